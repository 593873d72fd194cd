"""The Delta table's upkeep, run by the maintenance DAG: compaction, and a vacuum that never deletes
what eventdedup's log names.

Compaction (delta-rs `optimize.compact`) rewrites an output hour's many batch files as a few large
ones once the hour lies `[table] compact_after_hours` behind the log's time (its latest commit's
as_of, never this run's clock) and holds `compact_min_files` files. It changes files, not rows.
It commits with delta-rs's own retries: delta-rs rebases it over commits landed meanwhile that
only added files (it never touches those), and its conflict check refuses it where one removed a
file it read (a retraction's projection): it gives way, to try again next run
(tests/integration/test_delta_table.py holds delta-rs to both).

A compaction writes its files in folders of delta-rs's spelling (`hour=5/`, beside the batches'
`hour=05/`): a reader that lists `deduped/` instead of reading the table or the log sees both.

The batches' own files are the commit log's: commits and retractions name them, `populate`,
`verify-rerun`, fsck and the load manifests read them, and a retraction of a batch in a compacted
hour sets the hour back to them (eventdedup.delta.projection). So `vacuum` deletes only files the
table's compaction wrote and no longer uses, once `vacuum_retention_hours` have passed since they
left the table (Delta's rule: readers of older table versions keep them that long), and files a
compaction wrote but never committed (it gave way, or died) once that old. What delta-rs would
delete is asked of it (a full dry run), and every file named like a batch's is kept.
"""
from __future__ import annotations

import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any

from deltalake.exceptions import CommitFailedError
from deltalake.transaction import CommitProperties

from eventdedup.commit.log import committed_record, load_committed_state
from eventdedup.config import Config
from eventdedup.delta.projection import partition_key, table_files
from eventdedup.delta.storage import open_table
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store

log = logging.getLogger(__name__)


@dataclass
class UpkeepReport:
    compacted: list[str] = field(default_factory=list)  # "date/hour" of each compacted output hour
    files_rewritten: int = 0
    gave_way: list[str] = field(default_factory=list)  # hours another writer changed meanwhile: next run
    vacuumed: list[str] = field(default_factory=list)
    kept_batch_files: int = 0  # what delta-rs would have vacuumed, kept: the log names them
    kept_other: int = 0  # untracked files neither a batch's nor a compaction's, left alone

    def to_json(self) -> dict[str, Any]:
        return {"compacted": self.compacted, "files_rewritten": self.files_rewritten, "gave_way": self.gave_way,
                "vacuumed": len(self.vacuumed), "kept_batch_files": self.kept_batch_files,
                "kept_other": self.kept_other}


def maintain_table(store: S3Store, config: Config) -> UpkeepReport:
    """Compact, then vacuum. Nothing to do where there is no table or it is off."""
    report = UpkeepReport()
    if config.table.delta == "off" or open_table(store, config) is None:
        return report
    compact(store, config, report)
    vacuum(store, config, report)
    table = open_table(store, config)
    if table is not None:  # the Delta log's entries older than its retention (30 days), after a checkpoint
        table.cleanup_metadata()
    return report


COMPACTION_RETRIES = 5
# What delta-rs names the files it writes (compaction's): part-NNNNN-<uuid>-cNNN[.codec].parquet.
COMPACTION_FILE = re.compile(r"part-\d{5}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-c\d{3}"
                             r"(\.[a-z0-9]+)?\.parquet")
HOURS_PER_RUN = 240  # a store turned "on" over years of history is compacted over several runs, oldest first
REOPEN_EVERY = 16  # hours compacted with one table handle (its credentials are frozen when it is opened)


def compact(store: S3Store, config: Config, report: UpkeepReport) -> None:
    table = open_table(store, config)
    horizon = _log_time(store, config)
    if table is None or horizon is None:
        return
    horizon -= timedelta(hours=config.table.compact_after_hours)
    counts = Counter(partition_key(info["partition"]) for info in table_files(table).values())
    due = [(day, hour) for day, hour in sorted(counts)
           if counts[(day, hour)] >= config.table.compact_min_files and _hour_start(day, hour) < horizon]
    for number, (day, hour) in enumerate(due[:HOURS_PER_RUN]):
        if number and number % REOPEN_EVERY == 0:
            table = open_table(store, config) or table
        name = f"{day}/{int(str(hour)):02d}"  # as the output's folders spell it
        try:
            metrics = table.optimize.compact(
                partition_filters=[("date", "=", str(day)), ("hour", "=", str(hour))],
                target_size=config.table.compact_target_bytes,
                # delta-rs's own retries: it rebases over projections that only added files, and its
                # conflict check refuses where one removed a file this compaction read.
                commit_properties=CommitProperties(custom_metadata={"eventdedup.operation": "compaction",
                                                                    "eventdedup.hour": name},
                                                   max_commit_retries=COMPACTION_RETRIES))
        except CommitFailedError:
            report.gave_way.append(name)
            table.update_incremental()
            continue
        report.compacted.append(name)
        report.files_rewritten += int(metrics.get("numFilesRemoved", 0))
    log.info("Delta table: compacted %d hour(s) (%d files), %d gave way to other writers", len(report.compacted),
             report.files_rewritten, len(report.gave_way))


def vacuum(store: S3Store, config: Config, report: UpkeepReport) -> None:
    table = open_table(store, config)
    if table is None:
        return
    layout = Layout(config.layout)
    # full: also files no table version names (a compaction that gave way, or died, after writing its
    # output), once older than the retention; a compaction still running is younger than that.
    candidates = table.vacuum(retention_hours=config.table.vacuum_retention_hours, dry_run=True,
                              enforce_retention_duration=False, full=True)
    doomed = []
    for path in candidates:
        relative = _relative(path, store, config)
        if layout.data_owner(relative) is not None:
            report.kept_batch_files += 1
        elif COMPACTION_FILE.fullmatch(relative.rsplit("/", 1)[-1]) and relative.startswith("date="):
            doomed.append(config.layout.output_prefix + relative)
        else:
            report.kept_other += 1  # not ours, not delta-rs's: somebody else's to delete
    store.delete_keys(doomed)
    report.vacuumed += doomed
    log.info("Delta table: vacuumed %d file(s) compaction replaced; kept %d batch file(s) the log names",
             len(doomed), report.kept_batch_files)


def _relative(path: str, store: S3Store, config: Config) -> str:
    """A vacuum candidate as a path below the table's root (delta-rs gives it relative or whole)."""
    root = store.uri(config.layout.output_prefix)
    return path[len(root):] if path.startswith(root) else path.lstrip("/")


def _log_time(store: S3Store, config: Config) -> datetime | None:
    """The log's time: its latest commit's as_of (None before the first commit)."""
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    if state.version == 0:
        return None
    moment = datetime.fromisoformat(committed_record(store, layout, state.version).as_of)
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _hour_start(day: str | None, hour: str | None) -> datetime:
    start = datetime.combine(date.fromisoformat(str(day)), datetime.min.time(), tzinfo=timezone.utc)
    return start + timedelta(hours=int(str(hour)))
