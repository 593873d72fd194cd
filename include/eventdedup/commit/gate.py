"""May this batch be promoted? Every rule that answers it lives here, and every path that
promotes (`eventdedup promote`, `run-batch`, the Airflow tasks) asks here: once before any work
on the batch, where it can, and again right before the promotion journal is written.

- No other batch's promotion may be unfinished: the pipeline halts until `recover`.
- An interval batch commits only on top of its predecessor, and never behind a later interval.
- The job must have been computed against the log head it will commit on top of.
- A retracted batch id never commits again.
- A job computed under another [dedup] mode (enforce | observe) than the configured one is not
  promoted.
- The declared columns a batch or a column backfill writes may add columns to the output's schema
  (the log's latest columns) and, with the Delta table off, widen one; never remove, rename or
  otherwise change one.
- A batch whose promotion is under way is never recomputed (its journal names what it copies),
  and needs no job once committed or journalled.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta

from eventdedup.column_types import DeclaredColumn, widens
from eventdedup.commit.changes import BatchChange, ColumnBackfill
from eventdedup.commit.job_result import JobResult
from eventdedup.commit.journal import journal_or_none, list_journals
from eventdedup.commit.log import committed_version, is_committed
from eventdedup.commit.state import CommittedState
from eventdedup.errors import (
    ColumnsRefusedError,
    InconsistentStoreError,
    OutOfOrderBatchError,
    RetractionRefusedError,
    StaleBatchError,
)
from eventdedup.inputs.exclusions import load_exclusions
from eventdedup.inputs.intervals import IntervalBatch, batch_id_for_interval, interval_start_of
from eventdedup.inputs.manifest import load_batch_manifest, load_batch_manifest_or_none
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store


def check_may_start(store: S3Store, layout: Layout, batch_id: str, selector: InputSelector,
                    load_state: Callable[[], CommittedState], window_hours: int) -> None:
    """Before staging or computing a batch: refuse what promotion would refuse anyway, so a
    refused batch costs no Spark work. The state is loaded only for interval batches (a retracted
    id is refused by the job's driver, before any Spark work, and by promotion)."""
    refuse_if_other_journals(store, layout, batch_id)
    interval = IntervalBatch.of_request(batch_id, selector)
    if interval is not None:
        refuse_longer_than_the_window(interval, window_hours)
        _check_interval_order(store, layout, load_state(), interval, window_hours)


def check_may_promote(store: S3Store, layout: Layout, state: CommittedState, job: JobResult,
                      window_hours: int, mode: str, table_mode: str) -> None:
    """Right before the journal is written: run order (read from the batch's own frozen
    manifest, so every caller is held to it), a job computed under the configured `mode`, with
    columns the output's schema can take (`table_mode`: [table] delta), and against the current
    log head."""
    if interval_start_of(job.batch_id) is not None:  # only an interval-named batch can be ordered
        interval = load_batch_manifest(store, layout, job.batch_id).interval
        if interval is not None:
            _check_interval_order(store, layout, state, interval, window_hours)
    refuse_if_retracted(state, job.batch_id)
    refuse_if_mode_changed(job, mode)
    # A populate writes no data file, and so no column (eventdedup.job.driver.batch_columns).
    if isinstance(job.change, (BatchChange, ColumnBackfill)) and (
            job.change.columns or any(obj.kind == "data" for obj in job.objects)):
        refuse_incompatible_columns(state.columns, job.change.columns, table_mode, f"batch {job.batch_id}")
    excluded = exclusions_changed(store, layout, job)
    if excluded is not None:
        raise StaleBatchError(
            f"batch {job.batch_id} was computed with excluded inputs {list(job.excluded_inputs)}, but the batch now "
            f"excludes {excluded}; rerun the dedup step for {job.batch_id}"
        )
    if job.base_version != state.version:
        raise StaleBatchError(
            f"batch {job.batch_id} was computed against log version {job.base_version}, but the log is at version "
            f"{state.version} (last batch {state.last_batch_id}); rerun the dedup step for {job.batch_id}"
        )


def refuse_if_retracted(state: CommittedState, batch_id: str) -> None:
    """A retracted batch's objects keep their names, which a new commit under its id would reuse."""
    if batch_id in state.retracted:
        raise RetractionRefusedError(
            f"batch {batch_id} was retracted at log version {state.retracted[batch_id]}; its id cannot be committed "
            "again. Process its input under a new batch id")


def refuse_if_mode_changed(job: JobResult, mode: str) -> None:
    """A batch's output and audit are its mode's (observing: every event, as it arrived), and its
    commit records that mode: promoting a job computed under another mode than the configured one
    would commit what the configuration no longer asks for. Refused loudly rather than committed:
    an operator who switched to enforce must not get observed batches, duplicates and all, from a
    job that reads another configuration than the promoter (EMR Serverless ships its own)."""
    change = job.change
    if isinstance(change, BatchChange) and change.mode != mode:
        raise StaleBatchError(
            f"batch {job.batch_id} was computed under [dedup] mode = {change.mode!r}, but the configured mode is "
            f"{mode!r}; if the mode was just switched, rerun the dedup step for {job.batch_id}; if every batch is "
            "refused so, the job reads another configuration than the promoter (e.g. the eventdedup.toml shipped "
            "to EMR Serverless and EVENTDEDUP_CONFIG): make their [dedup] mode agree, then rerun the dedup step")


# delta-rs, the Delta table's writer (and one of its readers), as pinned: what a widening refusal names.
DELTA_WRITER = "delta-rs (deltalake 1.6)"


def refuse_incompatible_columns(recorded: tuple[DeclaredColumn, ...], declared: tuple[DeclaredColumn, ...],
                                table_mode: str, what: str) -> None:
    """The output's schema evolves as the configuration does: columns may be added, and a type may
    widen (column_types.widens) where no Delta table is kept; a column in the log's latest columns
    (`recorded`) may not be removed, renamed or otherwise retyped: files already written, and the
    table, hold it. A widened Delta column needs Delta's typeWidening table feature, which delta-rs
    cannot write and refuses to read: rather than a table its readers cannot read, widening is
    refused while the table is kept ([table] delta other than "off")."""
    named = {column.name: column for column in declared}
    for old in recorded:
        new = named.get(old.name)
        if new is None:
            raise ColumnsRefusedError(
                f"{what}: column {old.name} ({old.data_type}) is in the output's schema, but [table.columns] no "
                "longer declares it: a column can be neither removed nor renamed (the files written and the Delta "
                f"table keep it). Declare it again: {old.name} = {{ path = {_path_toml(old)}, type = "
                f'"{old.data_type}" }}. A renamed column is a new one: declare it beside the old one and fill its '
                "past hours with `eventdedup backfill-columns --since ...`")
        if new.path != old.path:
            raise ColumnsRefusedError(
                f"{what}: column {old.name} is read from {_path_toml(new)} now, but the output's files hold the "
                f"values of {_path_toml(old)}: a column's field cannot change under it. Declare it again with path = "
                f"{_path_toml(old)}, and the new field as a new column filled for past hours by `eventdedup "
                "backfill-columns --since ...`")
        if new.data_type == old.data_type:
            continue
        if not widens(old.column_type, new.column_type):
            raise ColumnsRefusedError(
                f"{what}: column {old.name} is declared {new.data_type}, but the output's schema holds it as "
                f"{old.data_type}: a column's type may only widen (int to long or double, float to double, a "
                "decimal's precision up by at least as much as its scale). Declare the new type as a new column "
                f"(e.g. {old.name}_{new.column_type.kind} = \"{new.data_type}\") and fill its past hours with "
                "`eventdedup backfill-columns --since ...`; the old column stays")
        if table_mode != "off":
            raise ColumnsRefusedError(
                f"{what}: column {old.name} would widen from {old.data_type} to {new.data_type}, but the output is a "
                f"Delta table ([table] delta = \"{table_mode}\"): a widened column needs Delta's typeWidening table "
                f"feature, which {DELTA_WRITER} can neither write nor read, and readers without it would misread "
                f"the files written before. Declare the wider type as a new column (e.g. {old.name}_"
                f"{new.column_type.kind} = \"{new.data_type}\") and fill its past hours with `eventdedup "
                "backfill-columns --since ...`; widening in place is allowed with [table] delta = \"off\"")


def _path_toml(column: DeclaredColumn) -> str:
    """A column's path as [table.columns] spells it: keys joined by '.', or a list where a key
    holds a dot (joined, it would read as two keys)."""
    if any("." in key for key in column.path):
        return "[" + ", ".join(json.dumps(key) for key in column.path) + "]"
    return json.dumps(column.path_text)


def exclusions_changed(store: S3Store, layout: Layout, job: JobResult) -> list[str] | None:
    """The batch's excluded inputs now, if they are not the ones its job result was computed with."""
    excluded = sorted(load_exclusions(store, layout, job.batch_id))
    return excluded if excluded != list(job.excluded_inputs) else None


def refuse_if_other_journals(store: S3Store, layout: Layout, batch_id: str | None) -> None:
    others = [j for j in list_journals(store, layout) if j.batch_id != batch_id]
    if others:
        names = ", ".join(j.batch_id for j in others)
        raise InconsistentStoreError(
            f"unfinished promotion of batch(es) {names}; the pipeline is halted until `eventdedup recover` succeeds"
        )


def refuse_if_promotion_unfinished(store: S3Store, layout: Layout, batch_id: str) -> None:
    """A journal names the staged objects (by ETag) its promotion copies; recomputing would delete
    and replace them, and a recomputation that differs (settings changed between attempts) would
    leave the journal naming objects that no longer exist: a promotion nobody can finish."""
    if journal_or_none(store, layout, batch_id) is not None:
        raise InconsistentStoreError(
            f"batch {batch_id} has an unfinished promotion ({store.uri(layout.journal(batch_id))}) of the objects "
            f"staged under {store.uri(layout.staging_root(batch_id))}; recomputing would replace them. "
            "Run `eventdedup recover` to finish (or abandon) it first"
        )


def needs_dedup_job(store: S3Store, layout: Layout, batch_id: str) -> bool:
    """Whether the batch still needs its Spark job: it is neither committed nor being promoted
    (a promotion journal freezes the job's result; recomputing would stage objects it does not name)."""
    if is_committed(store, layout, batch_id):
        return False
    return journal_or_none(store, layout, batch_id) is None


def refuse_longer_than_the_window(batch: IntervalBatch, window_hours: int) -> None:
    """An interval batch arrives at its end (eventdedup.cache.history): one longer than the dedup
    window would not see what arrived just before its own start, and a copy landing early in it
    of an event committed just before would pass as new."""
    if batch.until - batch.since > timedelta(hours=window_hours):
        raise OutOfOrderBatchError(
            f"batch {batch.batch_id}: its interval {batch.since.isoformat()} .. {batch.until.isoformat()} is longer "
            f"than the dedup window ({window_hours} h), so it could not see what arrived before it; split it into "
            f"intervals of at most {window_hours} h")


def check_run_order(state: CommittedState, batch: IntervalBatch,
                    interval_end_of: Callable[[str], datetime | None], window_hours: int,
                    is_committed: Callable[[str], bool] | None = None) -> None:
    """An interval batch commits only on top of its predecessor, and never behind a later one.

    Without this, a cleared or backfilled run could commit an older interval after a newer one,
    and events the newer batch already emitted would reappear (or vanish) against a history that
    does not match the order they happened in. The first interval batch of a store may start
    anywhere. Manual batches are not ordered (they are still serialised by the commit log).

    The predecessor is the committed interval that ends where this one starts, read from the
    latest committed interval batch's own manifest (`interval_end_of`), so intervals of different
    lengths (a CLI batch of two hours after scheduled five-minute ones) chain correctly. Intervals
    commit in time order, so the latest committed one is all the state needs to keep of them;
    `is_committed` answers for batches that have left the state (default: the state's recent ones)."""
    committed = is_committed or (lambda batch_id: batch_id in state.batches)
    if committed(batch.batch_id):
        return  # a rerun of a committed batch is a no-op
    last = state.latest_interval_batch_id
    last_start = None if last is None else interval_start_of(last)
    if last is None or last_start is None:
        return
    if last_start > batch.since:
        raise OutOfOrderBatchError(
            f"batch {batch.batch_id} is older than the committed batch {last}; batches may only move forward "
            f"in time (a backwards backfill or a cleared old run is refused). Process a newer interval instead"
        )
    end = interval_end_of(last)
    predecessor = batch.previous_batch_id if end is None else batch_id_for_interval(end)
    if end is not None and end > batch.since:
        raise OutOfOrderBatchError(
            f"batch {batch.batch_id} starts at {batch.since.isoformat()}, inside the committed interval batch {last} "
            f"(until {end.isoformat()}); intervals may not overlap. Process the interval from {end.isoformat()}"
        )
    if end is not None and end < batch.since:
        # A bridge no longer than the window: one longer would not see what arrived before it.
        bridge_end = min(batch.since, end + timedelta(hours=window_hours))
        rest = "" if bridge_end == batch.since else (
            f" (the gap is longer than the dedup window, {window_hours} h: this bridges its first {window_hours} h; "
            "the next refusal names the next bridge)")
        raise OutOfOrderBatchError(
            f"batch {batch.batch_id} must wait: batch {predecessor} (the interval before it) must commit first; the "
            f"last committed interval batch is {last}, which ends at {end.isoformat()}. If no scheduled run will ever "
            f"cover {end.isoformat()} to {batch.since.isoformat()} (the schedule changed, e.g. from 5 minutes to "
            f"hourly), commit that gap as intervals, oldest first: `eventdedup run-batch --config <config> --batch-id "
            f"{predecessor} --since {end.isoformat()} --until {bridge_end.isoformat()}`, or trigger the pipeline DAG "
            f'with params {{"since": "{end.isoformat()}", "until": "{bridge_end.isoformat()}"}}{rest}'
        )
    if end is None and not committed(predecessor):
        raise OutOfOrderBatchError(
            f"batch {batch.batch_id} must wait: batch {predecessor} (the interval before it) must commit "
            f"first; the last committed interval batch is {last}"
        )


def _check_interval_order(store: S3Store, layout: Layout, state: CommittedState, interval: IntervalBatch,
                          window_hours: int) -> None:
    check_run_order(state, interval, lambda committed: _interval_end(store, layout, committed), window_hours,
                    lambda batch_id: committed_version(store, layout, state, batch_id) is not None)


def _interval_end(store: S3Store, layout: Layout, batch_id: str) -> datetime | None:
    """Where a committed batch's interval ends, from its frozen manifest; None if it selected a prefix."""
    manifest = load_batch_manifest_or_none(store, layout, batch_id)
    return None if manifest is None else manifest.selector.until
