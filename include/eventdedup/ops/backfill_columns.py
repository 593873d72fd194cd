"""`eventdedup backfill-columns`: fill the declared columns into the committed files of a range of hours.

A column declared today is written by every batch from now on; the hours committed before hold
files without it (readers see null there, as Delta defines for a column added later). This
rewrites them: for each output hour of the range, oldest first, every data file of the committed
view that does not hold exactly the declared columns is copied with them, its values read from
each row's raw line by the parse's rules (eventdedup.parse.columns: a mismatch is null, whatever
on_mismatch says, since no committed row may leave), its rows and their order unchanged. The copy
is named after the original and the columns (`<batch>-part-NNNNN.c<digest>.parquet`), so it is
still its batch's: a retraction of the batch takes it out, vacuum keeps it.

Each hour is one commit to the log, staged, journaled and committed like a retraction
(`backfill-<YYYYMMDDTHH>-c<digest>`, the same for every attempt: a run killed anywhere is finished
by `recover` or by running the command again, which skips the hours committed). Its change
(`ColumnBackfill`) names every file it replaces and the copy replacing it: readers of the view
(eventdedup.commit.view) see the copies from that commit on, and the Delta projection turns it
into one table commit (each old file removed, its copy added), so a reader sees the hour's old
files or its new ones, never a mix, and every row once. The original files stay where their
commits name them. A batch, a retraction or another backfill committing meanwhile makes the
staged hour stale (the gate commits only on top of the log head it was read at): it is staged
again from the view as it is then, up to STALE_ATTEMPTS times.
"""
from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import orjson
import pyarrow as pa

from eventdedup.codec import to_doc
from eventdedup.column_types import DeclaredColumn
from eventdedup.commit.changes import ColumnBackfill, ColumnFigures, ReplacedFile
from eventdedup.commit.gate import refuse_if_other_journals, refuse_incompatible_columns
from eventdedup.commit.job_result import JobResult, StagedObject, withdraw_job_result
from eventdedup.commit.journal import journal_or_none
from eventdedup.commit.log import committed_record, committed_version, load_committed_state
from eventdedup.commit.state import CommittedState, log_time
from eventdedup.commit.view import ViewEntry, committed_entries
from eventdedup.config import Config
from eventdedup.counts import BatchCounts
from eventdedup.delta.files import partition_values, relative_path
from eventdedup.errors import ColumnsRefusedError, CommitConflictError, StaleBatchError
from eventdedup.job.dedup_stage import with_declared_columns
from eventdedup.keys import hour_index_at
from eventdedup.layout import Layout, new_attempt
from eventdedup.naming import validate_batch_id
from eventdedup.promotion.promote import abandon_promotion, clean_up_batch, promote_batch
from eventdedup.s3store import S3Store
from eventdedup.tables import OUTPUT_SCHEMA, output_schema, parquet_to_table, read_parquet_tail, table_to_parquet

log = logging.getLogger(__name__)
BACKFILL_ID_PREFIX = "backfill-"
STALE_ATTEMPTS = 5
_FOOTER_READ = 64 << 10


@dataclass(frozen=True)
class HourBackfill:
    """What became of one hour: its backfill's id and log version (None: every file already held
    the columns), whether this run committed it, and its change."""

    hour: int
    backfill_id: str
    version: int | None = None
    newly_committed: bool = False
    change: ColumnBackfill | None = None

    @property
    def hour_text(self) -> str:
        return datetime.fromtimestamp(self.hour * 3600, timezone.utc).strftime("%Y-%m-%dT%H:00Z")


def columns_tag(columns: tuple[DeclaredColumn, ...]) -> str:
    """The columns' tag in backfill ids and file names: "c" and 8 hex digits of their digest."""
    digest = hashlib.blake2b(orjson.dumps([to_doc(column) for column in columns]), digest_size=4).hexdigest()
    return f"c{digest}"


def backfill_id(hour: int, tag: str) -> str:
    moment = datetime.fromtimestamp(hour * 3600, timezone.utc)
    return validate_batch_id(f"{BACKFILL_ID_PREFIX}{moment:%Y%m%dT%H}-{tag}")


def backfill_columns(store: S3Store, config: Config, since: datetime, until: datetime | None,
                     now: datetime) -> list[HourBackfill]:
    """Backfill every output hour from `since`'s to before `until` (None: every later hour the view
    holds), oldest first, with the configured columns; each hour's outcome."""
    columns = config.table.columns
    if not columns:
        raise ColumnsRefusedError("backfill-columns: [table.columns] declares no column; there is nothing to fill")
    first = hour_index_at(since)
    last = None if until is None else hour_index_at(until - timedelta(microseconds=1))
    if last is not None and last < first:
        raise ColumnsRefusedError(f"backfill-columns: --until {until} is not after --since {since}")
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    refuse_incompatible_columns(state.columns, columns, config.table.delta, "backfill-columns")
    hours = sorted({hour for hour in _data_hours(layout, committed_entries(store, layout))
                    if hour >= first and (last is None or hour <= last)})
    tag = columns_tag(columns)
    return [backfill_hour(store, config, hour, columns, tag, now) for hour in hours]


def backfill_hour(store: S3Store, config: Config, hour: int, columns: tuple[DeclaredColumn, ...], tag: str,
                  now: datetime) -> HourBackfill:
    """One hour's commit: finished where a journal of it exists, skipped where it is committed,
    else staged from the view and promoted; staged again where the log moved on meanwhile."""
    layout = Layout(config.layout)
    bid = backfill_id(hour, tag)
    for _ in range(STALE_ATTEMPTS):
        state = load_committed_state(store, layout)
        version = committed_version(store, layout, state, bid)
        if version is None and journal_or_none(store, layout, bid) is None:
            refuse_if_other_journals(store, layout, bid)
            if not _stage_hour(store, layout, state, hour, columns, tag, bid, now, config.events.compiled_parser):
                return HourBackfill(hour, bid)
        try:
            outcome = promote_batch(store, config, bid)  # a committed one: only what its commit left to do
        except StaleBatchError:
            log.info("backfill %s: the log moved on while it was staged; staging it again", bid)
            _withdraw(store, layout, bid)
            continue
        except CommitConflictError:
            journal = journal_or_none(store, layout, bid)
            if journal is None or committed_version(store, layout, load_committed_state(store, layout), bid):
                raise
            log.info("backfill %s: another commit took its log version; staging it again", bid)
            abandon_promotion(store, layout, journal)
            continue
        change = committed_record(store, layout, outcome.version).change
        assert isinstance(change, ColumnBackfill)
        return HourBackfill(hour, bid, outcome.version, outcome.newly_committed, change)
    raise StaleBatchError(f"backfill {bid}: the log moved on {STALE_ATTEMPTS} times while it was staged; run "
                          "`eventdedup backfill-columns` again (it goes on from the hours committed)")


def _withdraw(store: S3Store, layout: Layout, bid: str) -> None:
    withdraw_job_result(store, layout, bid)
    clean_up_batch(store, layout, bid)


def _data_hours(layout: Layout, entries: list[ViewEntry]) -> dict[int, list[ViewEntry]]:
    """The view's data files by output hour (hours since the epoch), in log order."""
    by_hour: dict[int, list[ViewEntry]] = defaultdict(list)
    for entry in entries:
        if entry.promoted.kind == "data":
            partition = partition_values(relative_path(layout, entry.promoted.key))
            day = datetime.fromisoformat(f"{partition['date']}T00:00:00+00:00")
            by_hour[hour_index_at(day) + int(partition["hour"] or 0)].append(entry)
    return by_hour


def _stage_hour(store: S3Store, layout: Layout, state: CommittedState, hour: int,
                columns: tuple[DeclaredColumn, ...], tag: str, bid: str, now: datetime, compiled: bool) -> bool:
    """Stage the copies of the hour's files that lack the columns, then the job result (last: its
    presence means staging finished); False, staging nothing, where every file holds them."""
    wanted = output_schema(columns)
    entries = _data_hours(layout, committed_entries(store, layout, state.version)).get(hour, [])
    stale = [entry for entry in entries if not _holds(store, entry, wanted)]
    if not stale:
        log.info("backfill %s: every file of the hour holds the columns", bid)
        return False
    attempt = new_attempt()
    objects: list[StagedObject] = []
    replaced: list[ReplacedFile] = []
    figures = {column.name: ColumnFigures() for column in columns}
    for entry in stale:
        old = parquet_to_table(store.get_bytes(entry.promoted.key, if_match=entry.promoted.etag))
        copy, counted = with_declared_columns(old.select(OUTPUT_SCHEMA.names), columns, compiled)
        for name, found_in_file in counted.items():
            figures[name] += found_in_file
        final = layout.backfilled_data(entry.promoted.key, tag)
        staged = f"{layout.attempt_root(bid, attempt)}data/{relative_path(layout, final)}"
        info = store.put_bytes(staged, table_to_parquet(copy.select(wanted.names)))
        objects.append(StagedObject("data", info, final, copy.num_rows))
        replaced.append(ReplacedFile(entry.version, entry.batch_id, entry.promoted.key, final))
    change = ColumnBackfill(hour, columns, tuple(replaced), sum(obj.rows for obj in objects), figures)
    result = JobResult(bid, state.version, log_time(state, now).isoformat(), BatchCounts(), tuple(objects), change)
    store.put_bytes(layout.job_result(bid), result.to_bytes(), content_type="application/json")
    log.info("backfill %s: %d file(s), %d row(s) staged against log version %d", bid, len(objects),
             change.rows, state.version)
    return True


def _holds(store: S3Store, entry: ViewEntry, wanted: pa.Schema) -> bool:
    """Whether a committed data file holds exactly the wanted columns (its footer's schema)."""
    tail = read_parquet_tail(store, entry.promoted.key, _FOOTER_READ, etag=entry.promoted.etag, what="data file")
    return bool(tail.metadata.schema.to_arrow_schema().remove_metadata().equals(wanted))
