"""`eventdedup fsck`: every object the commit log promises is really there, unchanged.

`recover` and `status` read journals: a committed object deleted by hand or by a lifecycle rule
is invisible to them. fsck reads the commit records (one GET each, newest first, `--last N` to
bound them) and checks what they name against LIST replies, which carry each key's size and
ETag: one LIST per folder the objects live in (an hour of output, the audit prefix, ...), never
a request per object. Checked: data, audit and quarantine objects, Redshift load manifests, each
batch's frozen manifest (existence: it is what a rerun reads), the committed marker of each batch
that has left the folded state (existence: without it, rerunning the batch would commit it a
second time), and the cache segments that are
still in a key's chain in the folded state (a head or a base it builds on), i.e. of an hour the
log has not expired; one written before the commits `--last N` checks is checked to exist, as
every batch still reads it (superseded and expired
segments are maintenance's to delete; both are judged by log time, not by a clock). Exit code 3
when anything is missing or changed, each finding named by key.
"""
from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

from deltalake.exceptions import DeltaError

from eventdedup.commit.log import committed_record, load_committed_state
from eventdedup.commit.records import CommitRecord
from eventdedup.commit.state import CommittedState
from eventdedup.commit.view import EMPTY_LOAD_MANIFEST, load_manifest_bytes
from eventdedup.config import Config
from eventdedup.delta.files import partition_of_object
from eventdedup.delta.projection import TableStatus, check_is_ours, partition_key, projected_version, table_files
from eventdedup.delta.storage import open_table, table_location
from eventdedup.errors import InconsistentStoreError
from eventdedup.layout import Layout
from eventdedup.s3store import ObjectInfo, S3Store


@dataclass(frozen=True)
class Expected:
    kind: str
    key: str
    size: int | None  # None: existence only (batch manifests are not in commit records)
    etag: str | None
    batch_id: str
    version: int


@dataclass
class FsckReport:
    commits_checked: int = 0
    objects_checked: int = 0
    list_requests: int = 0
    missing: list[Expected] = field(default_factory=list)
    changed: list[tuple[Expected, ObjectInfo]] = field(default_factory=list)
    table: TableStatus | None = None  # the Delta table against the log (a lag is reported, not a fault)
    table_missing: list[str] = field(default_factory=list)  # files the table's snapshot uses, not in the store
    table_problems: list[str] = field(default_factory=list)  # a table that cannot be read, or is not eventdedup's

    @property
    def table_ahead(self) -> bool:
        """Whether the table reflects a log version the log does not hold (a lag is no problem)."""
        return self.table is not None and self.table.projected_version > self.table.log_version

    @property
    def problems(self) -> int:
        return (len(self.missing) + len(self.changed) + len(self.table_missing) + len(self.table_problems)
                + int(self.table_ahead))

    @property
    def consistent(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "consistent": self.consistent, "commits_checked": self.commits_checked,
            "objects_checked": self.objects_checked, "list_requests": self.list_requests,
            "missing": [_describe(e) for e in self.missing],
            "changed": [{**_describe(e), "found_size": found.size, "found_etag": found.etag}
                        for e, found in self.changed],
            "table": None if self.table is None else self.table.to_json(), "table_missing": self.table_missing,
            "table_problems": self.table_problems,
        }

    def text(self) -> str:
        lines = [f"missing: {e.kind} {e.key} (batch {e.batch_id}, commit {e.version})" for e in self.missing]
        lines += [f"changed: {e.kind} {e.key} (batch {e.batch_id}, commit {e.version}): recorded size {e.size} "
                  f"ETag {e.etag}, found size {found.size} ETag {found.etag}" for e, found in self.changed]
        lines += [f"missing: a file the Delta table uses: {key}" for key in self.table_missing]
        lines += [f"Delta table: {problem}" for problem in self.table_problems]
        table = self.table
        if table is not None and table.exists:
            lines.append(f"Delta table {table.location}: version {table.table_version}, reflects log version "
                         f"{table.projected_version} of {table.log_version}"
                         + (f" (lags by {table.lag}: `eventdedup recover` rolls it forward)" if table.lag else "")
                         + (" (AHEAD of the log: the log is missing commits)" if self.table_ahead else ""))
        # The table's line is a problem only when the table is ahead: counted by `problems`, not by lines.
        summary = (f"{self.commits_checked} commit(s), {self.objects_checked} object(s) checked with "
                   f"{self.list_requests} LIST request(s): " + ("consistent" if self.consistent else
                                                                 f"{self.problems} problem(s)"))
        return "\n".join([*lines, summary])


def fsck(store: S3Store, config: Config, last: int | None = None) -> FsckReport:
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    oldest = 1 if last is None else max(1, state.version - last + 1)
    records = [committed_record(store, layout, version) for version in range(state.version, oldest - 1, -1)]
    expected = _expected_objects(store, layout, state, records)
    report = FsckReport(commits_checked=len(records), objects_checked=len(expected))
    groups: dict[tuple[str, str], list[Expected]] = defaultdict(list)
    for item in expected:
        groups[_listing_group(item)].append(item)
    for _, items in sorted(groups.items()):
        found, requests = _listing(store, os.path.commonprefix([item.key for item in items]))
        report.list_requests += requests
        for item in items:
            info = found.get(item.key)
            if info is None:
                report.missing.append(item)
            elif item.size is not None and (info.size != item.size or item.etag not in (None, info.etag)):
                report.changed.append((item, info))
    _check_table(store, config, state, records if last is not None else None, report)
    return report


def _check_table(store: S3Store, config: Config, state: CommittedState, records: list[CommitRecord] | None,
                 report: FsckReport) -> None:
    """The Delta table: where it stands against the log, and every file its snapshot uses is there
    (one LIST per hour folder; with `--last N`, the hours the commits checked wrote to)."""
    if config.table.delta == "off":
        return
    try:
        table = open_table(store, config)
        if table is not None:
            check_is_ours(table, store, config)
    except (DeltaError, OSError, InconsistentStoreError) as exc:
        report.table_problems.append(f"{table_location(store, config)}: {exc}")
        return
    if table is None:
        return
    report.table = TableStatus(config.table.delta, table_location(store, config), True, table.version(),
                               projected_version(table), state.version)
    layout = Layout(config.layout)
    hours = None if records is None else {
        partition_key(partition_of_object(layout, obj)[1]) for record in records for obj in record.objects
        if obj.kind == "data"}
    folders: dict[str, list[str]] = defaultdict(list)
    try:
        files = table_files(table)
    except (DeltaError, OSError, ValueError, RuntimeError) as exc:
        report.table_problems.append(f"{table_location(store, config)}: its files cannot be read: {exc}")
        return
    for path, info in files.items():
        if hours is None or partition_key(info["partition"]) in hours:
            key = config.layout.output_prefix + path
            folders[key.rsplit("/", 1)[0] + "/"].append(key)
    for folder, keys in sorted(folders.items()):
        found, requests = _listing(store, folder)
        report.list_requests += requests
        report.table_missing += [key for key in keys if key not in found]


def fsck_gate(store: S3Store, config: Config, last: int | None = None) -> FsckReport:
    """fsck for a scheduler: raise, naming every problem, when the store is not what the log says."""
    report = fsck(store, config, last)
    if not report.consistent:
        findings = report.text().replace("\n", "\n  ")
        raise InconsistentStoreError(f"committed objects are missing or changed:\n  {findings}")
    return report


def _expected_objects(store: S3Store, layout: Layout, state: CommittedState,
                      records: list[CommitRecord]) -> list[Expected]:
    expected: list[Expected] = []
    segments: dict[str, Expected] = {}
    for record in records:
        expected += _load_manifest(store, layout, state, record)
        for obj in record.objects:
            item = Expected(obj.kind, obj.key, obj.size, obj.etag, record.batch_id, record.version)
            if obj.kind == "cache":
                segments[obj.key] = item  # judged below, by the current heads
            elif obj.kind == "load_manifest" and record.batch_id in state.retracted:
                expected.append(replace(item, size=len(EMPTY_LOAD_MANIFEST), etag=None))  # emptied by the retraction
            else:
                expected.append(item)
        if not record.is_operation:  # a retraction or reshard is staged from the log, not from a batch manifest
            expected.append(Expected("batch_manifest", layout.batch_manifest(record.batch_id), None, None,
                                     record.batch_id, record.version))
        if (record.batch_id not in state.batches and record.batch_id not in state.left_since_checkpoint
                and record.batch_id not in state.retracted):
            # Left the state: its marker is all that says it is committed (rerunning it is a no-op).
            expected.append(Expected("committed_marker", layout.batch_committed_marker(record.batch_id), None,
                                     None, record.batch_id, record.version))
    for segment in sorted(state.cache_objects()):  # chains of expired hours have left the state
        if segment in segments:
            expected.append(segments[segment])
        else:  # written before the commits checked (`--last`), and still read: it must exist
            owner = (layout.cache_object_of(segment) or ("?", ""))[0]
            expected.append(Expected("cache", segment, None, None, owner, state.batches.get(owner, 0)))
    return expected


def _load_manifest(store: S3Store, layout: Layout, state: CommittedState, record: CommitRecord) -> list[Expected]:
    """A batch's load manifest, derived from its commit (eventdedup.commit.view): its size is
    known, its ETag is the store's to choose; a retracted batch's is the empty one, never its data
    files. A record that names its manifest among its objects (older ones: docs/formats.md) has
    it checked there instead."""
    if record.is_operation or any(obj.kind == "load_manifest" for obj in record.objects):
        return []
    key = layout.redshift_manifest(record.batch_id)
    retracted = record.batch_id in state.retracted
    size = len(EMPTY_LOAD_MANIFEST) if retracted else len(load_manifest_bytes(store, record))
    return [Expected("load_manifest", key, size, None, record.batch_id, record.version)]


def _listing_group(item: Expected) -> tuple[str, str]:
    """Which LIST checks an object: output and cache segments share one per hour (every batch and
    bucket of that hour), per-batch folders and flat ones (load manifests) one per batch, narrowed
    to the keys' common prefix, so no LIST grows with the age of the store."""
    if item.kind == "data":
        return item.key.rsplit("/", 1)[0] + "/", ""
    if item.kind == "cache":
        return item.key.rsplit("/", 2)[0] + "/", ""
    return item.key.rsplit("/", 1)[0] + "/", item.batch_id


def _listing(store: S3Store, prefix: str) -> tuple[dict[str, ObjectInfo], int]:
    """Every object under `prefix`, and the LIST requests that took (1,000 keys a page)."""
    found = {info.key: info for info in store.list(prefix)}
    return found, max(1, -(-len(found) // 1000))


def _describe(item: Expected) -> dict[str, Any]:
    return {"kind": item.kind, "key": item.key, "batch_id": item.batch_id, "commit_version": item.version,
            "recorded_size": item.size, "recorded_etag": item.etag}
