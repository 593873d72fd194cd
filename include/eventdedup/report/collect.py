"""What a report reads from the store, and only that.

A report covers the commits made in [since, until): by their commit object's time on the store,
which grows with the version (commit N+1 is created after commit N exists), so the range is found
by a binary search of HEADs and one listing, never by reading the log from its start. Per commit
in the range it reads:

- the commit record (counts, the earlier batches its duplicates were decided against, objects);
- the batch manifest's HEAD (when staging finished) and one promoted object's HEAD (when the
  promotion's copies began);
- the audit's short columns (source object, producer; kept_in_batch only for records written
  before `decided_against` was), by byte range (eventdedup.report.ranged_parquet);
- the quarantine's `error` column, only for a batch that quarantined lines.

Raw lines, output files and cache segments are never read. The holders of kept copies outside the
range are read once each, for their time.
"""
from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from botocore.exceptions import ClientError

from eventdedup.commit.changes import BatchChange
from eventdedup.commit.log import committed_record, committed_version, load_committed_state
from eventdedup.commit.records import CommitRecord, PromotedObject
from eventdedup.commit.state import CommittedState
from eventdedup.config import Config
from eventdedup.errors import CorruptStateError
from eventdedup.layout import Layout
from eventdedup.parse.quarantine_reasons import reason_class
from eventdedup.report.ranged_parquet import ReadCost, read_columns
from eventdedup.s3store import S3Store

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")
THREADS = 16
UNREADABLE = "unreadable_file"  # quarantined lines of a committed file the report could not read


@dataclass(frozen=True)
class CommitInRange:
    record: CommitRecord
    committed_at: datetime
    staged_at: datetime | None = None  # the batch manifest written (staging finished)
    promoted_at: datetime | None = None  # the promotion's first copy (its job had finished)
    retracted: bool = False


@dataclass
class AuditSummary:
    """One batch's audit, grouped: duplicates by source object's prefix, by producer, by holder."""

    sources: Counter[str] = field(default_factory=Counter)
    producers: Counter[str | None] = field(default_factory=Counter)
    holders: Counter[str] = field(default_factory=Counter)  # only read when the record lacks decided_against
    unreadable: list[str] = field(default_factory=list)  # committed files that could not be read, and why


@dataclass
class Collected:
    since: datetime
    until: datetime
    head_version: int
    commits: list[CommitInRange]
    audits: dict[str, AuditSummary]  # batch id -> its audit, grouped
    quarantine: dict[str, Counter[str]]  # batch id -> quarantined lines by reason class
    holder_times: dict[str, datetime]  # batch id -> its as_of, for every holder of a kept copy
    live_cache_by_day: dict[str, int]  # day of the cache hour -> live cache objects (heads and bases)
    ingestion: dict[str, Any] | None
    cost: ReadCost = field(default_factory=ReadCost)


def parallel(function: Callable[[T], R], items: Iterable[T]) -> list[R]:
    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(function, items))


def collect(store: S3Store, config: Config, since: datetime, until: datetime,
            ingestion: Callable[[CommittedState], dict[str, Any]] | None = None) -> Collected:
    """Everything the report's figures are computed from (see the module's docstring)."""
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    times = commit_times(store, layout, state.version, since, until)
    records = parallel(lambda version: committed_record(store, layout, version), [v for v, _ in times])
    commits = parallel(lambda pair: _with_stage_times(store, layout, pair[0], pair[1], state),
                       list(zip(records, (t for _, t in times), strict=True)))
    batches = [c.record for c in commits if isinstance(c.record.change, BatchChange)]
    cost = ReadCost()  # each task counts its own reads: summed here, on one thread
    audits: dict[str, AuditSummary] = {}
    for record, (summary, spent) in zip(batches, parallel(lambda r: _audit_summary(store, config, r), batches),
                                        strict=True):
        audits[record.batch_id] = summary
        cost.add(spent)
    quarantine: dict[str, Counter[str]] = {}
    quarantined = [r for r in batches if r.counts.malformed]
    for record, (reasons, spent) in zip(quarantined, parallel(lambda r: _quarantine_reasons(store, r), quarantined),
                                        strict=True):
        quarantine[record.batch_id] = reasons
        cost.add(spent)
    return Collected(since, until, state.version, commits, audits, quarantine,
                     _holder_times(store, layout, state, batches, audits), _live_cache_by_day(state),
                     None if ingestion is None else ingestion(state), cost)


# How far apart the store's clocks may date two commits against their order (commit N+1 is created
# after commit N exists, but S3's front ends each stamp LastModified by their own clock). The range's
# first commit is looked for this much before `since`, and its listing goes on this long past `until`.
CLOCK_SKEW = timedelta(minutes=5)


def commit_times(store: S3Store, layout: Layout, head: int, since: datetime,
                 until: datetime) -> list[tuple[int, datetime]]:
    """(version, commit time) of every commit of 1..head made in [since, until), oldest first."""
    if head == 0:
        return []
    first = first_version_at_or_after(lambda version: _commit_time(store, layout, version), head, since - CLOCK_SKEW)
    found: list[tuple[int, datetime]] = []
    if first > head:
        return found
    start_after = layout.commit(first - 1) if first > 1 else None
    for info in store.list(layout.settings.commit_log_prefix, start_after=start_after):
        version = layout.version_of_commit_key(info.key)
        if version is None or info.last_modified is None:
            continue
        if version > head or info.last_modified >= until + CLOCK_SKEW:
            break
        if since <= info.last_modified < until:
            found.append((version, info.last_modified))
    return found


def first_version_at_or_after(time_of: Callable[[int], datetime], head: int, since: datetime) -> int:
    """The lowest version in 1..head committed at or after `since` (head + 1: none), by bisection:
    commit times grow with the version (within CLOCK_SKEW, which the caller allows for)."""
    low, high = 1, head + 1
    while low < high:
        middle = (low + high) // 2
        if time_of(middle) >= since:
            high = middle
        else:
            low = middle + 1
    return low


def _commit_time(store: S3Store, layout: Layout, version: int) -> datetime:
    info = store.head(layout.commit(version))
    if info is None or info.last_modified is None:
        raise RuntimeError(f"commit {store.uri(layout.commit(version))} of the folded log has no time: missing?")
    return info.last_modified


def _with_stage_times(store: S3Store, layout: Layout, record: CommitRecord, committed_at: datetime,
                      state: CommittedState) -> CommitInRange:
    retracted = record.batch_id in state.retracted
    if not isinstance(record.change, BatchChange):
        return CommitInRange(record, committed_at, retracted=retracted)
    manifest = store.head(layout.batch_manifest(record.batch_id))
    first = next((o for o in record.objects if o.kind in ("audit", "data", "quarantine")), None)
    copied = None if first is None else store.head(first.key)
    return CommitInRange(record, committed_at, None if manifest is None else manifest.last_modified,
                         None if copied is None else copied.last_modified, retracted)


def source_prefix(key: str, depth: int) -> str:
    """The part of an input key that names its source: its folder (depth 0), or its first `depth` folders."""
    folders = key.split("/")[:-1]
    kept = folders if depth == 0 else folders[:depth]
    return "".join(f"{folder}/" for folder in kept)


def _audit_summary(store: S3Store, config: Config, record: CommitRecord) -> tuple[AuditSummary, ReadCost]:
    summary, cost = AuditSummary(), ReadCost()
    change = record.change
    needs_holders = isinstance(change, BatchChange) and change.decided_against is None
    columns = ["source_object", "producer"] + (["kept_in_batch"] if needs_holders else [])
    for audit in (o for o in record.objects if o.kind == "audit" and o.rows):
        table = _read_or_note(store, audit, columns, cost, summary.unreadable)
        if table is None:
            continue
        # Counted per distinct value (a batch's duplicates come from a few objects and producers).
        for value, n in _value_counts(table.column("source_object")):
            summary.sources[source_prefix(value or "", config.report.source_prefix_depth)] += n
        summary.producers.update(dict(_value_counts(table.column("producer"))))
        if needs_holders:
            summary.holders.update({holder: n for holder, n in _value_counts(table.column("kept_in_batch"))
                                    if holder is not None and holder != record.batch_id})
    return summary, cost


def _value_counts(column: pa.ChunkedArray) -> list[tuple[str | None, int]]:
    counted = pc.value_counts(column)
    return list(zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist(), strict=True))


def _read_or_note(store: S3Store, obj: PromotedObject, columns: Sequence[str], cost: ReadCost,
                  unreadable: list[str]) -> pa.Table | None:
    """The columns of a committed file, or None with why it could not be read (a report shows what
    it could not count; `fsck` is the check that fails on it)."""
    try:
        return read_columns(store, obj.key, columns, etag=obj.etag, cost=cost)
    except (ClientError, CorruptStateError, pa.ArrowException) as exc:
        unreadable.append(f"{store.uri(obj.key)}: {exc}")
        return None


def _quarantine_reasons(store: S3Store, record: CommitRecord) -> tuple[Counter[str], ReadCost]:
    reasons: Counter[str] = Counter()
    cost = ReadCost()
    for obj in (o for o in record.objects if o.kind == "quarantine" and o.rows):
        table = _read_or_note(store, obj, ["error"], cost, [])
        if table is None:
            reasons[UNREADABLE] += obj.rows
            continue
        for error, n in _value_counts(table.column("error")):
            reasons[reason_class(error or "")] += n
    return reasons, cost


def _holder_times(store: S3Store, layout: Layout, state: CommittedState, batches: Sequence[CommitRecord],
                  audits: dict[str, AuditSummary]) -> dict[str, datetime]:
    """The as_of of every batch a duplicate in the range was decided against."""
    times = {r.batch_id: datetime.fromisoformat(r.as_of) for r in batches}
    holders: set[str] = set()
    for record in batches:
        change = record.change
        assert isinstance(change, BatchChange)
        holders.update(change.decided_against if change.decided_against is not None
                       else audits[record.batch_id].holders)
    missing = sorted(holders - set(times))

    def time_of(batch_id: str) -> datetime | None:
        version = committed_version(store, layout, state, batch_id)
        return None if version is None else datetime.fromisoformat(committed_record(store, layout, version).as_of)

    for batch_id, found in zip(missing, parallel(time_of, missing), strict=True):
        if found is not None:
            times[batch_id] = found
    return times


def _live_cache_by_day(state: CommittedState) -> dict[str, int]:
    """Cache objects the committed state still reads (heads and the bases they build on), by the day
    of the hour they hold ("YYYY-MM-DD/HH/BBBB" keys; id guards under "guards")."""
    by_day: Counter[str] = Counter()
    for cache_key in state.cache_heads:
        day = cache_key.split("/", 1)[0]
        by_day[day if len(day) == 10 and day[4] == "-" else "guards"] += 1 + len(state.cache_bases.get(cache_key, ()))
    return dict(sorted(by_day.items()))
