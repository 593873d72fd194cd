"""Retract a committed batch: take it out of the committed view so its input can be processed again.

A batch committed from bad input (a producer bug, the wrong prefix) cannot simply be rerun under
a new id: every event would come out as a cross-batch duplicate of itself. `retract` commits a
new log version, through the same staging, journal and conditional commit as any batch (so a
crash anywhere recovers like a promotion), that

- removes the batch from the folded state: its cache runs are visible to no batch and copied
  forward by none, its inputs leave the ingestion ledger, and its id can never commit again;
- names new heads of every cache key it wrote, each the key's whole chain rewritten as one
  segment without its runs;
- once committed, replaces its Redshift load manifest with an empty one (derived from the commit,
  like a checkpoint: the promotion, recovery and a retried `retract` each finish it);
- leaves its data, audit and quarantine objects where they are: its own commit still names them,
  and nothing a commit names is deleted. Readers of the log (eventdedup.commit.view) and of the
  manifests no longer see them.

Its ids stay in the id guards: a guard only says which hour to load, so a stale hit costs one
segment load, never a drop.

Refused when a later batch's decisions depended on the batch (its commit names it as the holder
of a kept copy: a duplicate dropped, renamed, kept or updated against it; an older commit that
records none, its audit: docs/formats.md): retracting it alone would leave that later batch's
output wrong.
`--cascade` retracts those batches too, transitively.
"""
from __future__ import annotations

import hashlib
import io
import logging
from dataclasses import dataclass
from datetime import datetime

import pyarrow.parquet as pq

from eventdedup.cache.heads import load_chain_runs
from eventdedup.cache.segment import encode_segment
from eventdedup.commit.changes import ColumnBackfill, Reshard, RestoredInterval, Retraction
from eventdedup.commit.gate import refuse_if_other_journals
from eventdedup.commit.job_result import JobResult, StagedObject
from eventdedup.commit.journal import journal_or_none
from eventdedup.commit.log import committed_record, committed_version, load_committed_state
from eventdedup.commit.records import CommitRecord
from eventdedup.commit.state import CommittedState, log_time, record_arrival_hour
from eventdedup.config import Config
from eventdedup.counts import BatchCounts
from eventdedup.errors import RetractionRefusedError
from eventdedup.inputs.manifest import load_batch_manifest_or_none
from eventdedup.keys import CacheKey, hour_text, is_guard_head_key
from eventdedup.layout import Layout, new_attempt
from eventdedup.naming import validate_batch_id
from eventdedup.promotion.promote import PromotionOutcome, finish_committed, project_committed, promote_batch
from eventdedup.s3store import S3Store

log = logging.getLogger(__name__)
RETRACT_ID_PREFIX = "retract-"


@dataclass(frozen=True)
class RetractionOutcome:
    retraction_id: str
    version: int
    change: Retraction
    newly_committed: bool

    @property
    def retracted(self) -> tuple[str, ...]:
        return self.change.retracts

    @property
    def figures(self) -> dict[str, int]:
        return self.change.figures


def retraction_id(batch_id: str) -> str:
    """`retract-<batch>` (a digest for ids too long to prefix): the same for every attempt, so a
    retraction interrupted anywhere is finished, not started twice."""
    name = f"{RETRACT_ID_PREFIX}{batch_id}"
    if len(name) > 128:
        name = f"{RETRACT_ID_PREFIX}{hashlib.blake2b(batch_id.encode(), digest_size=16).hexdigest()}"
    return validate_batch_id(name)


def retract_batch(store: S3Store, config: Config, batch_id: str, reason: str, now: datetime,
                  cascade: bool = False) -> RetractionOutcome:
    validate_batch_id(batch_id)
    if not reason.strip():
        raise RetractionRefusedError("a retraction needs a reason (--reason): it is recorded in the commit")
    layout = Layout(config.layout)
    rid = retraction_id(batch_id)
    state = load_committed_state(store, layout)
    if batch_id in state.retracted:
        return _already_retracted(store, config, state, batch_id)
    if journal_or_none(store, layout, rid) is None:
        refuse_if_other_journals(store, layout, rid)
        targets = retraction_targets(store, layout, state, batch_id, cascade)
        _stage_retraction(store, layout, state, rid, targets, reason, now)
    else:
        log.info("retraction %s: finishing the promotion its journal records", rid)
    outcome: PromotionOutcome = promote_batch(store, config, rid)
    return _outcome(committed_record(store, layout, outcome.version), outcome.newly_committed)


def _outcome(record: CommitRecord, newly_committed: bool) -> RetractionOutcome:
    change = record.change
    if not isinstance(change, Retraction):
        raise RetractionRefusedError(f"log version {record.version} ({record.batch_id}) is not a retraction")
    if newly_committed:
        log.warning("retracted %s at log version %d: %s", ", ".join(change.retracts), record.version, change.reason)
    return RetractionOutcome(record.batch_id, record.version, change, newly_committed)


def _already_retracted(store: S3Store, config: Config, state: CommittedState, batch_id: str) -> RetractionOutcome:
    layout = Layout(config.layout)
    record = committed_record(store, layout, state.retracted[batch_id])
    finish_committed(store, layout, record, state)  # what a crash right after the commit left undone
    project_committed(store, config, f"retraction {record.batch_id} is committed as log version {record.version}")
    return _outcome(record, False)


def retraction_targets(store: S3Store, layout: Layout, state: CommittedState, batch_id: str,
                       cascade: bool) -> tuple[str, ...]:
    """The batch, and with `cascade` every later batch that decided against one of the targets;
    refused without it when there is any. Later batches are scanned in commit order, so a batch
    that depended on a dependent is found in the same pass."""
    version = state.batches.get(batch_id)
    if version is None:
        committed = committed_version(store, layout, state, batch_id)
        if committed is None:
            raise RetractionRefusedError(f"batch {batch_id} is not committed: there is nothing to retract")
        raise RetractionRefusedError(
            f"batch {batch_id} (log version {committed}) arrived before the window's horizon: its cache entries have "
            "expired and no batch sees them any more, so retracting it would not let its input through as new")
    _refuse_an_operation(committed_record(store, layout, version))
    targets = [batch_id]
    dependents: dict[str, int] = {}
    for later, later_version in sorted(state.batches.items(), key=lambda item: item[1]):
        if later_version <= version:
            continue
        rows = _rows_decided_against(store, committed_record(store, layout, later_version), set(targets))
        if rows:
            dependents[later] = rows
            if cascade:
                targets.append(later)
    if dependents and not cascade:
        named = ", ".join(f"{later} ({rows} audited row(s) kept in {batch_id})" for later, rows in dependents.items())
        raise RetractionRefusedError(
            f"batch {batch_id} cannot be retracted alone: later batches decided duplicates against it: {named}. "
            "Retracting it would leave their output wrong; retract them too with --cascade")
    return tuple(targets)


def _refuse_an_operation(record: CommitRecord) -> None:
    """A retraction or a reshard is not a batch: retracting one would report a change that does
    not happen (its effects are not what a batch's retraction takes away)."""
    change = record.change
    if isinstance(change, Retraction):
        raise RetractionRefusedError(
            f"{record.batch_id} is a retraction, not a batch: a retraction cannot be undone, so "
            f"{', '.join(change.retracts)} stays retracted. To bring its events back, process its input again under "
            "a new batch id (`eventdedup run-batch --input-prefix ...`)")
    if isinstance(change, Reshard):
        raise RetractionRefusedError(
            f"{record.batch_id} is a reshard, not a batch: a reshard cannot be undone (the cache's bucket count only "
            f"grows; {change.buckets} buckets from {hour_text(change.from_hour)} stay in force)")
    if isinstance(change, ColumnBackfill):
        raise RetractionRefusedError(
            f"{record.batch_id} is a column backfill, not a batch: it changed no row (its files are copies of its "
            f"hour's with the declared columns filled), so there is nothing to retract; retract the batches "
            "whose rows should leave")


def _restored_interval(store: S3Store, layout: Layout, state: CommittedState,
                       targets: tuple[str, ...]) -> RestoredInterval | None:
    """If the retraction takes away what the log holds for its latest interval, but that batch was
    no interval (a manual batch named like one, which a release reading intervals from ids took
    for one, holding the schedule behind it): the latest true interval before it. A true interval
    stays the latest, retracted or not: its time is covered, and the schedule goes on after it."""
    latest = state.latest_interval_batch_id
    if latest is None or latest not in targets or _selects_an_interval(store, layout, latest):
        return None
    for version in range(state.batches[latest] - 1, 0, -1):
        record = committed_record(store, layout, version)
        change = record.batch_change
        if (change is not None and change.interval and record.batch_id not in targets
                and record.batch_id not in state.retracted and _selects_an_interval(store, layout, record.batch_id)):
            return RestoredInterval(record.batch_id, record_arrival_hour(record))
    return RestoredInterval(None, None)


def _selects_an_interval(store: S3Store, layout: Layout, batch_id: str) -> bool:
    manifest = load_batch_manifest_or_none(store, layout, batch_id)
    return manifest is not None and manifest.interval is not None


def _rows_decided_against(store: S3Store, record: CommitRecord, targets: set[str]) -> int:
    """Audit rows of a commit whose kept copy is in one of `targets`: as its commit records them;
    from its audit objects for one that records none (docs/formats.md)."""
    change = record.batch_change
    if change is not None and change.decided_against is not None:
        return sum(rows for holder, rows in change.decided_against.items() if holder in targets)
    count = 0
    for obj in record.objects:
        if obj.kind == "audit":
            table = pq.read_table(io.BytesIO(store.get_bytes(obj.key, if_match=obj.etag)), columns=["kept_in_batch"])
            count += sum(1 for holder in table.column("kept_in_batch").to_pylist() if holder in targets)
    return count


def _stage_retraction(store: S3Store, layout: Layout, state: CommittedState, rid: str, targets: tuple[str, ...],
                      reason: str, now: datetime) -> None:
    """Stage the heads without the targets' runs, then the job result (last, like a Spark job's:
    its presence means staging finished). Their load manifests are emptied once the retraction is
    committed (eventdedup.commit.view.publish_load_manifests): before, they are still the view's."""
    attempt = new_attempt()  # its own staging (eventdedup.layout.Layout.attempt_root)
    records = [committed_record(store, layout, state.batches[target]) for target in targets]
    names = sorted({name for record in records for name in record.cache_heads if not is_guard_head_key(name)}
                   & set(state.cache_heads))
    kept_owners = set(state.batches) - set(targets)
    objects: list[StagedObject] = []
    for name in names:
        runs = load_chain_runs(store, state.chain(name))  # rewritten whole: building on nothing
        key = CacheKey.parse(name)
        info = store.put_bytes(layout.staged_cache_segment(rid, attempt, key),
                               encode_segment([run for run in runs if run.owner in kept_owners]))
        objects.append(StagedObject("cache", info, layout.final_cache_segment(rid, key), 0, cache_key=name))
    change = Retraction(targets, reason,
                        sum(obj.rows for record in records for obj in record.objects if obj.kind == "data"), len(names),
                        _restored_interval(store, layout, state, targets), tuple(record.version for record in records))
    result = JobResult(rid, state.version, log_time(state, now).isoformat(), BatchCounts(), tuple(objects), change)
    store.put_bytes(layout.job_result(rid), result.to_bytes(), content_type="application/json")
