"""Recovery: judge every unfinished promotion, finish the ones that can be finished, report the rest.

For each journal: if its batch is committed, only cleanup is left; if every object is promoted
or still staged intact, the promotion is rolled forward (copies finished, commit written);
otherwise the store is inconsistent and recovery halts, naming each missing or mismatched object.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError
from deltalake.exceptions import DeltaError

from eventdedup.commit.journal import EntryState, PromotionJournal, check_entries, list_journals
from eventdedup.commit.log import committed_record, committed_version, load_committed_state, read_commit
from eventdedup.config import Config
from eventdedup.delta.projection import project, table_status
from eventdedup.errors import CommitConflictError, EventDedupError, StaleBatchError
from eventdedup.layout import Layout
from eventdedup.promotion.promote import abandon_promotion, clean_up_batch, execute_journal, finish_committed
from eventdedup.s3store import S3Store

log = logging.getLogger(__name__)


@dataclass
class RecoveryReport:
    actions: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # Leftovers of batches that are committed (a journal, staging): harmless, only tidied.
    cleanups: list[str] = field(default_factory=list)

    @property
    def consistent(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"consistent": self.consistent, "actions": self.actions, "problems": self.problems,
                "cleanups": self.cleanups}

    def text(self) -> str:
        lines = ([f"cleaned: {c}" for c in self.cleanups] + [f"recovered: {a}" for a in self.actions]
                 + [f"INCONSISTENT: {p}" for p in self.problems])
        return "\n".join(lines) if lines else "consistent: no unfinished promotions"


def examine(store: S3Store, config: Config) -> RecoveryReport:
    """Read-only diagnosis: what `recover` would do, and what it could not fix."""
    return _run(store, config, apply=False)


def recover(store: S3Store, config: Config) -> RecoveryReport:
    return _run(store, config, apply=True)


def _run(store: S3Store, config: Config, apply: bool) -> RecoveryReport:
    layout = Layout(config.layout)
    report = RecoveryReport()
    try:
        journals = sorted(list_journals(store, layout), key=lambda j: (j.target_version, j.batch_id))
        for journal in journals:
            _handle(store, config, layout, journal, report, apply)
        load_committed_state(store, layout, fresh=True)  # the log itself must still fold cleanly
    except EventDedupError as exc:
        report.problems.append(str(exc))
        return report
    _judge_table(store, config, report, apply)
    return report


def _judge_table(store: S3Store, config: Config, report: RecoveryReport, apply: bool) -> None:
    """The Delta table, a projection of the log: behind it, rolled forward; ahead of it (a table
    reflecting commits the log does not hold), an inconsistency."""
    if config.table.delta == "off":
        return  # files and manifests only: a table left from before is not judged, nor written
    try:
        status = table_status(store, config)
        if status.exists and status.projected_version > status.log_version:
            report.problems.append(
                f"the Delta table {status.location} reflects log version {status.projected_version}, but the log "
                f"ends at {status.log_version}: the log is missing commits its table projected")
            return
        if not status.lag:
            return
        # A lag is a leftover of committed batches, like their journals: harmless, only caught up
        # (the pipeline's gate does so and goes on; it never halts for it).
        if not apply:
            report.cleanups.append(f"the Delta table {status.location} lags the log by {status.lag} commit(s) (at "
                                   f"{status.projected_version}, the log at {status.log_version}); would catch it up")
            return
        projection = project(store, config)
        report.cleanups.append(f"the Delta table {status.location} rolled forward from log version "
                               f"{status.projected_version} to {projection.status.projected_version} "
                               f"(table version {projection.status.table_version})")
    except (ClientError, EventDedupError, DeltaError, OSError) as exc:
        report.problems.append(f"the Delta table could not be judged or rolled forward: {exc}")


def _handle(store: S3Store, config: Config, layout: Layout, journal: PromotionJournal,
            report: RecoveryReport, apply: bool) -> None:
    state = load_committed_state(store, layout)
    batch = journal.batch_id
    version = committed_version(store, layout, state, batch)
    if version is not None:
        if apply:
            finish_committed(store, layout, committed_record(store, layout, version), state)
        report.cleanups.append(f"batch {batch} is committed (version {version}); {'wrote' if apply else 'would write'} "
                               f"its load manifests and {'removed' if apply else 'would remove'} its leftover journal "
                               "and staging")
        return
    if batch in state.retracted:
        # Committed by another promoter, then retracted: its objects are that commit's and stay.
        if apply:
            clean_up_batch(store, layout, batch)
        report.cleanups.append(f"batch {batch} was committed and then retracted (log version "
                               f"{state.retracted[batch]}); {'removed' if apply else 'would remove'} its leftover "
                               "journal and staging; its objects stay")
        return
    if state.version >= journal.target_version:
        # A lost race (two batches promoted at once): the loser committed nothing, so everything
        # it wrote carries its own name and no commit refers to it. Remove it; rerun the batch.
        holder = read_commit(store, layout, journal.target_version)
        if apply:
            abandon_promotion(store, layout, journal)
        report.actions.append(
            f"batch {batch}: its promotion lost log version {journal.target_version} to batch "
            f"{holder.batch_id if holder else '?'}; {'abandoned' if apply else 'would abandon'} it (journal, staged "
            f"and copied objects deleted; none was committed). Rerun batch {batch}"
        )
        return
    if state.version != journal.target_version - 1:
        report.problems.append(f"batch {batch}: journal targets version {journal.target_version} but the log is at "
                               f"{state.version}; the log is missing commits")
        return
    lost = [c.detail for c in check_entries(store, journal.to_copy) if c.state is EntryState.LOST]
    if lost:
        report.problems.append(f"batch {batch}: promotion cannot be completed; {len(lost)} object(s) lost: "
                               + "; ".join(lost))
        return
    if not apply:
        report.actions.append(f"batch {batch} can be rolled forward to version {journal.target_version}")
        return
    try:
        outcome = execute_journal(store, config, journal, state)
    except CommitConflictError as exc:
        report.problems.append(str(exc))
        return
    except StaleBatchError as exc:  # its exclusions changed: abandoned, nothing committed
        report.actions.append(str(exc))
        return
    report.actions.append(f"batch {batch} rolled forward and committed as version {outcome.version}")
