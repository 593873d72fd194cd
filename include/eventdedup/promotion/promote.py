"""Atomic promotion: staged data, audit, quarantine and cache segments become one committed batch.

Order of effects, each safe to repeat:
  1. write the promotion journal (IfNoneMatch);
  2. copy every staged object to its final key (skipping ones already promoted);
  3. check the batch's exclusions are still the ones its job ran under (else abandon);
  4. write commit `base_version + 1` with IfNoneMatch: the single atomic step that makes the
     batch, its output and its cache entries visible together;
  5. write the load manifests the commit implies (eventdedup.commit.view: a batch's lists its
     data files; a retraction empties its targets'), derived from the commit record;
  6. checkpoint if due, then delete staging and the journal.
A crash before 3 leaves an invisible batch that `recover` rolls forward or reports; a crash after
3 leaves only garbage that the next promotion or `recover` cleans up.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from botocore.exceptions import ClientError
from deltalake.exceptions import DeltaError

from eventdedup.commit.gate import check_may_promote, exclusions_changed, refuse_if_other_journals
from eventdedup.commit.job_result import JobResult, load_job_result, withdraw_job_result
from eventdedup.commit.journal import EntryState, PromotionJournal, check_entries, journal_or_none
from eventdedup.commit.log import (
    batch_record,
    checkpoint_due,
    committed_record,
    committed_version,
    hold_state,
    load_committed_state,
    write_checkpoint_if_due,
    write_commit,
)
from eventdedup.commit.records import CommitRecord
from eventdedup.commit.state import CommittedState
from eventdedup.commit.view import publish_load_manifests, write_view_checkpoint
from eventdedup.config import Config
from eventdedup.delta.projection import TableProjectionError, prepare_new_store, project
from eventdedup.errors import (
    BatchNotReadyError,
    CommitConflictError,
    EventDedupError,
    InconsistentStoreError,
    StaleBatchError,
)
from eventdedup.layout import Layout
from eventdedup.naming import validate_batch_id
from eventdedup.s3store import S3Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PromotionOutcome:
    batch_id: str
    version: int
    newly_committed: bool
    counts: Mapping[str, int]


def promote_batch(store: S3Store, config: Config, batch_id: str,
                  new_token: Callable[[], str] = lambda: uuid.uuid4().hex) -> PromotionOutcome:
    validate_batch_id(batch_id)
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    if committed_version(store, layout, state, batch_id) is not None:
        outcome = _already_committed(store, layout, state, batch_id)
    else:
        prepare_new_store(store, config, state)
        try:
            outcome = _promote_uncommitted(store, config, layout, state, batch_id, new_token)
        except (ClientError, EventDedupError):
            _raise_if_committed_meanwhile(store, layout, batch_id, state)
            raise
    project_committed(store, config, f"batch {batch_id} is committed as log version {outcome.version}")
    return outcome


def project_committed(store: S3Store, config: Config, done: str) -> None:
    """The Delta table rolled forward after a commit (eventdedup.delta.projection). A failure
    here leaves the commit whole: it is reported as the table lagging, for a retry or `recover`."""
    try:
        project(store, config)
    except (ClientError, EventDedupError, DeltaError, OSError) as exc:
        raise TableProjectionError(
            f"{done}, but the Delta table could not be rolled forward to it: {exc}. The table lags the log; a "
            "retried task, the next promotion or `eventdedup recover` rolls it forward") from exc


def _promote_uncommitted(store: S3Store, config: Config, layout: Layout, state: CommittedState, batch_id: str,
                         new_token: Callable[[], str]) -> PromotionOutcome:
    refuse_if_other_journals(store, layout, batch_id)
    journal = journal_or_none(store, layout, batch_id)
    if journal is None:
        job = load_job_result(store, layout, batch_id)
        check_may_promote(store, layout, state, job, config.dedup.window_hours, config.dedup.mode,
                          config.table.delta)
        journal = PromotionJournal(new_token(), state.last_batch_id, job)
        fresh = store.put_if_absent(layout.journal(batch_id), journal.to_bytes()) is not None
        if fresh:
            _withdraw_if_exclusions_changed(store, layout, job)
        if not fresh:
            log.info("batch %s: another promoter wrote the journal first; continuing its promotion", batch_id)
            journal = journal_or_none(store, layout, batch_id) or journal
    else:
        fresh = False
        log.info("batch %s: resuming the promotion recorded in its journal", batch_id)
    return execute_journal(store, config, journal, state, fresh=fresh)


def _withdraw_if_exclusions_changed(store: S3Store, layout: Layout, job: JobResult) -> None:
    """`exclude-input` writes its record, then looks for a journal; the promoter writes its
    journal, then looks again for records. Whichever order they interleave in, one of them sees
    the other: an exclusion made after the gate's check withdraws this (still copy-free) journal."""
    excluded = exclusions_changed(store, layout, job)
    if excluded is not None:
        store.delete_keys([layout.journal(job.batch_id)])
        raise StaleBatchError(
            f"batch {job.batch_id}: inputs {excluded} were excluded while it was being promoted; "
            f"rerun the dedup step for {job.batch_id}"
        )


def _raise_if_committed_meanwhile(store: S3Store, layout: Layout, batch_id: str, started: CommittedState) -> None:
    """A promoter racing another promoter of the same batch can fail half-way (its staged objects
    were cleaned up under it). If the batch is committed, or was committed and retracted since
    this promotion `started`, say so instead of the low-level error."""
    try:
        state = load_committed_state(store, layout)
    except (ClientError, EventDedupError):
        return  # the store is unreachable or broken: the original error says more
    version = committed_version(store, layout, state, batch_id)
    if version is not None:
        finish_committed(store, layout, committed_record(store, layout, version), state)
        raise CommitConflictError(
            f"batch {batch_id}: another promoter committed it as log version {version} while this "
            f"one ran; nothing is lost and nothing is left to do"
        )
    if batch_id in state.retracted and batch_id not in started.retracted:
        clean_up_batch(store, layout, batch_id)
        raise CommitConflictError(
            f"batch {batch_id}: another promoter committed it while this one ran, and it was retracted at log "
            f"version {state.retracted[batch_id]}; nothing is lost and nothing is left to do")


def execute_journal(store: S3Store, config: Config, journal: PromotionJournal,
                    state: CommittedState, fresh: bool = False) -> PromotionOutcome:
    """Copy what is not promoted yet, commit, checkpoint, clean up. Raises if anything is lost.

    A journal this process has just written has nothing promoted yet, so it skips the two HEADs
    per object: each copy's CopySourceIfMatch still refuses a changed or missing source."""
    layout = Layout(config.layout)
    if fresh:
        to_copy = list(journal.to_copy)
    else:
        checks = check_entries(store, journal.to_copy)
        lost = [check.detail for check in checks if check.state is EntryState.LOST]
        if lost:
            raise InconsistentStoreError(
                f"batch {journal.batch_id}: cannot finish its promotion, {len(lost)} object(s) lost:\n  "
                + "\n  ".join(lost) + "\nrun `eventdedup recover` for the full report"
            )
        to_copy = [check.entry for check in checks if check.state is EntryState.STAGED]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda entry: store.copy(entry.staged, entry.final_key), to_copy))
    _abandon_if_exclusions_changed(store, layout, journal)
    record = journal.commit_record()
    write_commit(store, layout, record)
    committed = state.apply(record, store.uri(layout.commit(record.version)))
    publish_load_manifests(store, layout, record, committed)
    hold_state(store, layout, write_checkpoint_if_due(store, layout, committed, config.dedup.checkpoint_interval))
    if checkpoint_due(record.version, config.dedup.checkpoint_interval):
        _checkpoint_the_view(store, layout, record.version)
    clean_up_batch(store, layout, journal.batch_id)
    log.info("batch %s committed as log version %d (%d objects)", journal.batch_id, record.version, len(record.objects))
    return PromotionOutcome(journal.batch_id, record.version, True, record.counts)


def _checkpoint_the_view(store: S3Store, layout: Layout, version: int) -> None:
    """Derived data, after the commit: a failure costs readers requests, never the promotion."""
    try:
        if write_view_checkpoint(store, layout, version) is None:
            log.info("the view's index is far behind version %d: the maintenance DAG catches it up", version)
    except (ClientError, EventDedupError) as exc:
        log.warning("the view's index was not checkpointed at version %d (%s); readers read the log after the "
                    "last one", version, exc)


def _abandon_if_exclusions_changed(store: S3Store, layout: Layout, journal: PromotionJournal) -> None:
    """The last check before the commit, on every path that commits a journal (a fresh promotion,
    a resumed one, `recover` rolling it forward): a job result computed under other exclusions
    than the batch has now (an `exclude-input` that completed before this journal was written)
    would commit the excluded object's events. Its promotion is abandoned; the batch reruns."""
    excluded = exclusions_changed(store, layout, journal.job)
    if excluded is None:
        return
    # Its log version is still open, so another promoter of the journal may commit it meanwhile
    # (an `exclude-input` whose record this one saw may yet withdraw it, refusing): deleting the
    # copies now could take objects of a commit away. Only the journal and this attempt's
    # staging go; copies already made carry the batch's own names, which its next promotion
    # writes again, and no commit names them.
    store.delete_keys([layout.journal(journal.batch_id)])
    _delete_attempts_of(store, layout, journal)
    raise StaleBatchError(
        f"batch {journal.batch_id}: its job ran with excluded inputs {list(journal.job.excluded_inputs)}, but the "
        f"batch now excludes {excluded}: its promotion is abandoned (nothing was committed); rerun the dedup step "
        f"for {journal.batch_id}")


def finish_committed(store: S3Store, layout: Layout, record: CommitRecord, state: CommittedState) -> None:
    """What a commit leaves to do, for whoever finds it committed (the promotion that crashed after
    its commit, `recover`, a retried promotion or retraction): its load manifests, then its staging
    and journal. `state`: the log as the caller folded it, to find the commit. Idempotent."""
    publish_load_manifests(store, layout, record, state)
    clean_up_batch(store, layout, record.batch_id)


def _already_committed(store: S3Store, layout: Layout, state: CommittedState, batch_id: str) -> PromotionOutcome:
    record = batch_record(store, layout, state, batch_id)
    finish_committed(store, layout, record, state)
    log.info("batch %s is already committed as log version %d; nothing to promote", batch_id, record.version)
    return PromotionOutcome(batch_id, record.version, False, record.counts)


def abandon_promotion(store: S3Store, layout: Layout, journal: PromotionJournal) -> None:
    """Undo an uncommitted promotion whose log version another batch took: it can never commit.
    Only for a batch that was never committed: then no commit refers to any object its journal
    names (they all carry its id). A retracted batch was: its commit still names its objects.
    Its journal and its own attempt's staging go, never another attempt's (a job of the batch
    may be staging meanwhile: eventdedup.layout.Layout.attempt_root)."""
    state = load_committed_state(store, layout)
    if journal.batch_id in state.retracted or committed_version(store, layout, state, journal.batch_id) is not None:
        raise CommitConflictError(f"batch {journal.batch_id} is or was committed; its promotion cannot be abandoned "
                                  "(its objects are a commit's)")
    store.delete_keys([entry.final_key for entry in journal.entries])
    store.delete_keys([layout.journal(journal.batch_id)])
    _delete_attempts_of(store, layout, journal)


def _delete_attempts_of(store: S3Store, layout: Layout, journal: PromotionJournal) -> None:
    """The staging the journal's objects came from (their attempt roots), and the batch's job
    result if it is the journal's own (a newer attempt's stays)."""
    attempts = {layout.attempt_root_of(journal.batch_id, entry.staged.key) for entry in journal.entries}
    for attempt in sorted(attempt for attempt in attempts if attempt is not None):
        store.delete_prefix(attempt)
    try:
        current = load_job_result(store, layout, journal.batch_id)
    except BatchNotReadyError:
        return
    if current == journal.job:
        withdraw_job_result(store, layout, journal.batch_id)


def clean_up_batch(store: S3Store, layout: Layout, batch_id: str) -> None:
    """Staging and journal are garbage once the commit exists; deleting them is idempotent."""
    store.delete_prefix(layout.staging_root(batch_id))
    store.delete_keys([layout.journal(batch_id)])
