"""The output as a Delta Lake table: a projection of the commit log, never a second source of truth.

The table lives at the output prefix (`_delta_log/` beside the `date=/hour=` folders) and is
written with delta-rs (`deltalake`), whose S3 commits are conditional PUTs. Commit N of
eventdedup's log becomes one Delta commit carrying the application transaction
(`eventdedup`, N): a batch's adds its data files, a retraction's removes its targets' files, a
column backfill's replaces its hour's files by their rewritten copies, any other commit (a
populate, a reshard) adds nothing and only names itself. Where commit N's files carry declared
columns the table's schema does not hold yet, a commit of its own adds them first (delta-rs
writes a schema change apart from file actions: files written before read them as null). Each Delta commit is
written at exactly the table version after the one this projector read, with delta-rs's own
retries off: delta-rs has accepted a second commit carrying an application version the table
already held (it rebases appends over concurrent ones), so the check "the table's eventdedup
version is N - 1" is made here, on the snapshot the commit builds on, and a lost race is read
again and judged again. Whoever finds the table behind the log rolls it forward: the promotion,
`recover`, a retried task, the next batch. A reader of the table sees committed batches only:
a Delta commit is written only after the log's commit it projects.

A new store gets its (empty) table before its first commit ([table] delta = "auto"); a store
whose log has commits and no table (docs/formats.md) keeps files and manifests only unless set to
"on", which creates the table from the committed view in one commit. "off": never written (one
already there lags).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa
from deltalake import DeltaTable
from deltalake import Schema as DeltaSchema
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import AddAction, CommitProperties, PostCommitHookProperties, RemoveAction, Transaction

from eventdedup.column_types import DeclaredColumn
from eventdedup.commit.changes import BatchChange, ColumnBackfill, Retraction
from eventdedup.commit.log import committed_record, load_committed_state
from eventdedup.commit.records import CommitRecord, PromotedObject
from eventdedup.commit.state import CommittedState
from eventdedup.commit.view import committed_entries
from eventdedup.config import Config
from eventdedup.delta.files import (
    PARTITION_COLUMNS,
    TABLE_SCHEMA,
    file_statistics,
    modification_millis,
    partition_of_object,
)
from eventdedup.delta.storage import DELTA_LOG, open_table, storage_options, table_location
from eventdedup.errors import EventDedupError, InconsistentStoreError
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store

log = logging.getLogger(__name__)

APP_ID = "eventdedup"
# delta-rs reads every log entry after the last checkpoint twice to open a table and once more for
# each app-transaction lookup, and a batch opens it once: a checkpoint every 10 versions (written
# by the projection itself; delta-rs's own default is 100) bounds what a batch reads of the table's
# log by the table's live files, not by its history. No clean-up of expired log entries after a
# commit: that lists the whole log, every batch; the maintenance DAG does it daily
# (eventdedup.delta.upkeep).
CHECKPOINT_EVERY = 10
AFTER_COMMIT = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
ATTEMPTS = 8  # Delta commits lost to other writers (projectors, compaction) before giving up
FOOTER_THREADS = 16


class TableProjectionError(EventDedupError):
    """The Delta table could not be brought up to the log (the log itself is unharmed)."""


@dataclass(frozen=True)
class TableStatus:
    """Where the table stands against the log."""

    mode: str
    location: str
    exists: bool
    table_version: int | None = None
    projected_version: int = 0  # the log version the table reflects (its eventdedup transaction)
    log_version: int = 0

    @property
    def lag(self) -> int:
        """Log commits the table does not reflect yet (0 where there is no table to keep)."""
        return max(0, self.log_version - self.projected_version) if self.exists else 0

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "location": self.location, "exists": self.exists,
                "table_version": self.table_version, "projected_log_version": self.projected_version,
                "log_version": self.log_version, "lag": self.lag}


@dataclass(frozen=True)
class Projection:
    """What one roll-forward did: the log versions it committed to the table, and where it ended."""

    status: TableStatus
    projected: tuple[int, ...] = field(default=())


def projected_version(table: DeltaTable) -> int:
    return table.transaction_version(APP_ID) or 0


def table_status(store: S3Store, config: Config, state: CommittedState | None = None) -> TableStatus:
    """Where the table stands; a table eventdedup did not create is refused (InconsistentStoreError)."""
    state = state or load_committed_state(store, Layout(config.layout))
    table = open_table(store, config)
    if table is None:
        return TableStatus(config.table.delta, table_location(store, config), False, log_version=state.version)
    check_is_ours(table, store, config)
    return TableStatus(config.table.delta, table_location(store, config), True, table.version(),
                       projected_version(table), state.version)


def prepare_new_store(store: S3Store, config: Config, state: CommittedState) -> None:
    """Before a store's first commit: its table, empty, so that "auto" keeps it from then on."""
    if state.version == 0 and config.table.delta != "off" and open_table(store, config) is None:
        create_table(store, config, 0)


def project(store: S3Store, config: Config, state: CommittedState | None = None) -> Projection:
    """Roll the table forward to the log (to `state`, or as loaded now): one Delta commit per log
    commit it does not reflect yet. Idempotent; safe beside other projectors and compaction."""
    layout = Layout(config.layout)
    state = state or load_committed_state(store, layout)
    if config.table.delta == "off":  # nothing of the table is read: an unreadable one must not fail batches
        return Projection(TableStatus("off", table_location(store, config), False, log_version=state.version))
    table = open_table(store, config)
    if table is None and config.table.delta == "auto":
        return Projection(TableStatus("auto", table_location(store, config), False, log_version=state.version))
    if table is None:
        table = create_table(store, config, state.version)
    check_is_ours(table, store, config)
    done: list[int] = []
    conflicts, backfilled = 0, False
    current = projected_version(table)  # once per snapshot: delta-rs replays the log for each lookup
    written = table.version()
    while current < state.version:
        target = current + 1
        try:
            if current == 0 and _created_over_log_version(store, config) > 0:
                target = state.version
                if _add_missing_columns(table, state.columns, target):
                    table.update_incremental()
                    current, written = projected_version(table), table.version()
                    continue
                _commit(table, _backfill_actions(store, layout, state.version), state.version,
                        {"eventdedup.operation": "backfill", "eventdedup.committed_view_at": state.version}, current)
                backfilled = True
            else:
                record = committed_record(store, layout, target)
                if _add_missing_columns(table, written_columns(record), target):
                    table.update_incremental()  # judged again on the table with its columns
                    current, written = projected_version(table), table.version()
                    continue
                _commit(table, _actions(store, layout, table, record), target, _metadata(record), current)
            # The handle stays as read: delta-rs does not move it to its own commit.
            done.append(target)
            current, written = target, table.version() + 1
        except CommitFailedError as exc:
            conflicts += 1
            if conflicts >= ATTEMPTS:
                raise TableProjectionError(
                    f"Delta table {table_location(store, config)}: log version {target} lost the table's next version "
                    f"to other writers {conflicts} times ({exc}); the log is unharmed: run `eventdedup recover`, "
                    "which rolls the table forward") from None
            log.info("Delta table: version %d was taken by another writer; reading it again", table.version() + 1)
        if current < state.version:
            # Read again, and judged again: another projector may have committed since (module docstring).
            table.update_incremental()
            current, written = projected_version(table), table.version()
    if backfilled or (done and written % CHECKPOINT_EVERY == 0):
        _checkpoint(table, store, config)
    status = TableStatus(config.table.delta, table_location(store, config), True, written, current, state.version)
    if done:
        log.info("Delta table %s at version %d reflects log version %d (projected %s)", status.location,
                 status.table_version, status.projected_version, _span(done))
    return Projection(status, tuple(done))


def _checkpoint(table: DeltaTable, store: S3Store, config: Config) -> None:
    """A checkpoint at the table's newest version (after a backfill: so that every later load reads
    its files as Parquet, not its one large JSON). Derived data: the commit stands without it, a
    failure is logged, and the next one is CHECKPOINT_EVERY versions later."""
    table.update_incremental()
    try:
        table.create_checkpoint()
    except (DeltaError, OSError) as exc:
        log.warning("Delta table %s: no checkpoint at version %d (%s); loads read its JSON until the next one",
                    table_location(store, config), table.version(), exc)


def _span(versions: Sequence[int]) -> str:
    return str(versions[0]) if len(versions) == 1 else f"{versions[0]}..{versions[-1]}"


def create_table(store: S3Store, config: Config, log_version: int) -> DeltaTable:
    """The empty table, recording the log version it was created at: 0 for a new store (each
    commit is then projected on its own), or an existing store's (its committed view is then
    projected in one commit). Two creators racing write version 0 conditionally: the loser opens
    the winner's."""
    try:
        DeltaTable.create(table_location(store, config), TABLE_SCHEMA, mode="ignore",
                          partition_by=list(PARTITION_COLUMNS), name=TABLE_NAME,
                          description="Deduplicated events: a projection of eventdedup's commit log",
                          storage_options=storage_options(store, config.s3),
                          commit_properties=CommitProperties(
                              custom_metadata={"eventdedup.operation": "create",
                                               "eventdedup.created_at_log_version": log_version},
                              max_commit_retries=0))
    except CommitFailedError:
        log.info("Delta table %s: another writer created it first", table_location(store, config))
    table = open_table(store, config)
    if table is None:
        raise TableProjectionError(f"Delta table {table_location(store, config)} was created but cannot be read")
    check_is_ours(table, store, config)
    return table


def _created_over_log_version(store: S3Store, config: Config) -> int:
    """The log version the table was created at (its version 0's record); read only before the
    table reflects any commit."""
    first = store.get_bytes_or_none(f"{config.layout.output_prefix}{DELTA_LOG}{0:020d}.json") or b""
    for line in first.splitlines():
        info = orjson.loads(line).get("commitInfo")
        if isinstance(info, dict):
            return int(info.get("eventdedup.created_at_log_version") or 0)
    return 0


TABLE_NAME = "eventdedup_output"


def check_is_ours(table: DeltaTable, store: S3Store, config: Config) -> None:
    """Refuse a table eventdedup did not create (another team's, or a `CONVERT TO DELTA` of the
    output folders, which would hold uncommitted and retracted files): its name, schema and
    partitioning are eventdedup's, set at creation and kept by every checkpoint."""
    metadata = table.metadata()
    found = pa.schema(table.schema().to_arrow())
    partitions = tuple(metadata.partition_columns)
    own = found.names[:len(TABLE_SCHEMA.names)]  # declared columns follow (added as batches write them)
    if metadata.name != TABLE_NAME or own != TABLE_SCHEMA.names or partitions != PARTITION_COLUMNS:
        raise InconsistentStoreError(
            f"the Delta table at {table_location(store, config)} is not eventdedup's (name {metadata.name!r}, "
            f"columns {found.names}, partitioned by {list(partitions)}); nothing was written to it. Move it away "
            "(eventdedup then creates its own from the log with [table] delta = \"on\") or set [table] delta = "
            "\"off\"")


def _commit(table: DeltaTable, actions: Sequence[AddAction | RemoveAction], version: int,
            metadata: Mapping[str, Any], projected: int | None = None) -> None:
    """One Delta commit at exactly the version after the snapshot read, if that snapshot (which
    reflects log version `projected`: asked of it where not given) does not reflect log `version`
    yet (checked here: see the module's docstring)."""
    if (projected_version(table) if projected is None else projected) >= version:
        return
    table.create_write_transaction(
        list(actions), "append", table.schema(), partition_by=list(PARTITION_COLUMNS),
        commit_properties=CommitProperties(custom_metadata={**metadata, "eventdedup.log_version": version},
                                           max_commit_retries=0,
                                           app_transactions=[Transaction(APP_ID, version)]),
        post_commithook_properties=AFTER_COMMIT)


def written_columns(record: CommitRecord) -> tuple[DeclaredColumn, ...]:
    """The declared columns a commit's data files carry: a batch's or a column backfill's."""
    change = record.change
    return change.columns if isinstance(change, (BatchChange, ColumnBackfill)) else ()


def _add_missing_columns(table: DeltaTable, columns: Sequence[DeclaredColumn], log_version: int) -> bool:
    """Add to the table's schema the declared columns it lacks, in a commit of their own (delta-rs
    changes a schema apart from file actions; files without them read as null, as Delta defines):
    whether it wrote one. Never a type change: the promotion gate refuses one while the table is
    kept (eventdedup.commit.gate.refuse_incompatible_columns). Retries off, as for the projection's
    own commits: a projector that lost the race reads the table again and finds them there."""
    held = set(pa.schema(table.schema().to_arrow()).names)
    missing = [column for column in columns if column.name not in held]
    if not missing:
        return False
    fields = DeltaSchema.from_arrow(pa.schema([pa.field(column.name, column.column_type.arrow)
                                               for column in missing])).fields
    table.alter.add_columns(fields, commit_properties=CommitProperties(
        custom_metadata={"eventdedup.operation": "add_columns", "eventdedup.columns": [c.name for c in missing],
                         "eventdedup.for_log_version": log_version}, max_commit_retries=0),
        post_commithook_properties=AFTER_COMMIT)
    log.info("Delta table: added column(s) %s for log version %d", ", ".join(c.name for c in missing), log_version)
    return True


def _metadata(record: CommitRecord) -> dict[str, Any]:
    change = record.change
    operation = ("retraction" if isinstance(change, Retraction) else
                 getattr(change, "KIND", "batch") if record.is_operation else "batch")
    metadata: dict[str, Any] = {"eventdedup.batch_id": record.batch_id, "eventdedup.operation": operation,
                                "eventdedup.as_of": record.as_of, "eventdedup.counts": dict(record.counts)}
    if isinstance(change, Retraction):
        metadata.update({"eventdedup.retracts": list(change.retracts), "eventdedup.reason": change.reason})
    if isinstance(change, ColumnBackfill):
        metadata.update({"eventdedup.hour": change.hour, "eventdedup.columns": [c.name for c in change.columns]})
    return metadata


def _actions(store: S3Store, layout: Layout, table: DeltaTable,
             record: CommitRecord) -> list[AddAction | RemoveAction]:
    if isinstance(record.change, Retraction):
        return _retraction_actions(store, layout, table, record)
    if isinstance(record.change, ColumnBackfill):
        return _backfill_columns_actions(store, layout, table, record)
    if record.is_operation:
        return []
    return list(add_actions(store, layout, [obj for obj in record.objects if obj.kind == "data"], record.as_of))


def add_actions(store: S3Store, layout: Layout, objects: Sequence[PromotedObject], as_of: str,
                with_statistics: bool = True) -> list[AddAction]:
    """Add actions for committed data files, statistics read from their footers (in parallel);
    without: the row count the commit recorded."""
    def one(obj: PromotedObject) -> AddAction:
        path, partition = partition_of_object(layout, obj)
        stats = file_statistics(store, obj.key, obj.etag) if with_statistics else f'{{"numRecords":{obj.rows}}}'
        return AddAction(path, obj.size, partition, modification_millis(as_of), True, stats)

    if len(objects) <= 1:
        return [one(obj) for obj in objects]
    with ThreadPoolExecutor(min(FOOTER_THREADS, len(objects))) as pool:
        return list(pool.map(one, objects))


def _backfill_actions(store: S3Store, layout: Layout, version: int) -> list[AddAction | RemoveAction]:
    """A table created over an existing log: the committed view at `version`, in one commit. The
    row counts are the commits' (reading a footer per file of years of history would be the cost
    of the whole backfill); compaction rewrites them with full statistics."""
    objects = [entry.promoted for entry in committed_entries(store, layout, version) if entry.promoted.kind == "data"]
    # One modification time for all, the backfilled version's: a GET per commit of years is not worth it.
    as_of = committed_record(store, layout, version).as_of
    return list(add_actions(store, layout, objects, as_of, with_statistics=False))


def table_files(table: DeltaTable) -> dict[str, dict[str, Any]]:
    """The snapshot's files: path -> size and partition values (as Delta serialises them)."""
    actions = pa.table(table.get_add_actions(flatten=False))
    rows = actions.select(["path", "size_bytes", "partition"]).to_pylist()
    return {row["path"]: {"size": row["size_bytes"],
                          "partition": {key: None if value is None else str(value)  # date: ISO; hour: its number
                                        for key, value in (row["partition"] or {}).items()}}
            for row in rows}


def _retraction_actions(store: S3Store, layout: Layout, table: DeltaTable,
                        record: CommitRecord) -> list[AddAction | RemoveAction]:
    """Remove the retracted batches' files. Where compaction has merged an hour's files, the
    hour is set back to the committed view's own files as of this retraction (the compacted file
    holds the retracted rows too; the batches' files never leave the store)."""
    change = record.change
    assert isinstance(change, Retraction)
    files = table_files(table)
    targets = set(change.retracts)
    touched = {partition_key(info["partition"]) for path, info in files.items()
               if layout.data_owner(path) in targets}
    for version in change.retracted_versions:
        target = committed_record(store, layout, version)
        touched |= {partition_key(partition_of_object(layout, obj)[1]) for obj in target.objects if obj.kind == "data"}
    compacted = {key for path, info in files.items() if (key := partition_key(info["partition"])) in touched
                 and layout.data_owner(path) is None}
    # A tombstone is dated when it is written (Delta's vacuum retention runs from it), not by log time.
    when = int(time.time() * 1000)
    actions: list[AddAction | RemoveAction] = [
        RemoveAction(path, True, when, info["size"], info["partition"]) for path, info in files.items()
        if layout.data_owner(path) in targets and partition_key(info["partition"]) not in compacted]
    if compacted:
        actions += _reset_partitions(store, layout, files, compacted, record.version, when)
    return actions


def _backfill_columns_actions(store: S3Store, layout: Layout, table: DeltaTable,
                              record: CommitRecord) -> list[AddAction | RemoveAction]:
    """A column backfill's hour: each replaced file removed and its copy added, in one commit. Where
    a replaced file is not in the table (compaction merged the hour), the hour is set back to the
    committed view's own files as of the backfill, which hold its copies."""
    change = record.change
    assert isinstance(change, ColumnBackfill)
    files = table_files(table)
    written = {obj.key: obj for obj in record.objects if obj.kind == "data"}
    when = int(time.time() * 1000)  # a tombstone is dated when it is written, as a retraction's
    output_prefix = layout.settings.output_prefix
    if all(replaced.key[len(output_prefix):] in files for replaced in change.replaced):
        removes: list[AddAction | RemoveAction] = []
        for replaced in change.replaced:
            path = replaced.key[len(output_prefix):]
            removes.append(RemoveAction(path, True, when, files[path]["size"], files[path]["partition"]))
        return removes + list(add_actions(store, layout, [written[replaced.by] for replaced in change.replaced],
                                          record.as_of))
    hours = {partition_key(partition_of_object(layout, written[replaced.by])[1]) for replaced in change.replaced}
    return _reset_partitions(store, layout, files, hours, record.version, when)


def _reset_partitions(store: S3Store, layout: Layout, files: Mapping[str, Mapping[str, Any]],
                      partitions: set[tuple[str | None, ...]], version: int,
                      when: int) -> list[AddAction | RemoveAction]:
    """The partitions' files made the committed view's at `version`: every other file removed,
    the view's missing ones added back."""
    wanted: dict[str, tuple[PromotedObject, int]] = {}
    for entry in committed_entries(store, layout, version):
        if entry.promoted.kind != "data":
            continue
        path, partition = partition_of_object(layout, entry.promoted)
        if partition_key(partition) in partitions:
            wanted[path] = (entry.promoted, entry.version)
    actions: list[AddAction | RemoveAction] = [
        RemoveAction(path, True, when, info["size"], info["partition"]) for path, info in files.items()
        if partition_key(info["partition"]) in partitions and path not in wanted]
    missing = [(obj, at) for path, (obj, at) in wanted.items() if path not in files]
    for at in sorted({at for _, at in missing}):
        as_of = committed_record(store, layout, at).as_of
        actions += add_actions(store, layout, [obj for obj, v in missing if v == at], as_of)
    return actions


def partition_key(partition: Mapping[str, str | None]) -> tuple[str | None, ...]:
    """An output hour as the table's partition values spell it: (date, hour)."""
    return tuple(partition.get(column) for column in PARTITION_COLUMNS)

