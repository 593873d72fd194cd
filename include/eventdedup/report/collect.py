"""What a report reads from the store, and only that.

A report covers the commits made in [since, until): by their commit object's time on the store,
which grows with the version (commit N+1 is created after commit N exists), so the range is found
by a binary search of HEADs and one listing, never by reading the log from its start (or the
newest `last` commits). Per commit in the range, in one task:

- the commit record (counts, the earlier batches its duplicates were decided against, objects),
  kept slim once read: its audit and quarantine objects, no cache heads, no ledger;
- the batch manifest's HEAD (when staging finished) and one promoted object's HEAD (when the
  promotion's copies began);
- nothing more for its duplicates by source and producer, which the record holds (older
  records: the audit's short columns, source object and producer, by byte range,
  eventdedup.report.ranged_parquet); the audit's kept_in_batch only where `decided_against`
  cannot tell copies' holders;
- nothing more for its quarantined lines by reason class, which the record holds (older records
  that quarantined lines: the quarantine's `error` column). Which records hold what:
  docs/formats.md.

Raw lines, output files and cache segments are never read. The earlier batches copies were decided
against, outside the range, are read once each for their time: the head of their commit record.
"""
from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

import pyarrow as pa
from botocore.exceptions import ClientError

from eventdedup.commit.changes import BatchChange, Change
from eventdedup.commit.log import commit_as_of, committed_record, committed_version, load_committed_state
from eventdedup.commit.records import CommitRecord, PromotedObject
from eventdedup.commit.state import CommittedState
from eventdedup.config import Config
from eventdedup.counts import OTHER_VALUES, bounded_counts, read_recorded_folder, recorded_folder
from eventdedup.errors import CorruptStateError
from eventdedup.layout import Layout
from eventdedup.naming import key_folder
from eventdedup.parse.quarantine_reasons import reason_class_counts
from eventdedup.report.ranged_parquet import ReadCost, read_columns
from eventdedup.s3store import S3Store, is_changed_or_missing
from eventdedup.tables import value_counts

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")
THREADS = 16
UNREADABLE = "unreadable_file"  # quarantined lines of a committed file the report could not read


@dataclass(frozen=True)
class CommitInRange:
    record: CommitRecord  # slim: its audit and quarantine objects only, no cache heads, no ledger
    committed_at: datetime
    staged_at: datetime | None = None  # the batch manifest written (staging finished)
    promoted_at: datetime | None = None  # the promotion's first copy (its job had finished)
    retracted: bool = False
    cache_objects: int = 0  # cache objects (segments, guards) the commit wrote, and their bytes
    cache_bytes: int = 0


@dataclass
class AuditSummary:
    """One batch's audit, grouped: duplicates by source object's prefix, by producer, by holder."""

    sources: Counter[str] = field(default_factory=Counter)
    producers: Counter[str | None] = field(default_factory=Counter)
    holders: Counter[str] = field(default_factory=Counter)  # read only where decided_against cannot say
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
            ingestion: Callable[[CommittedState], dict[str, Any]] | None = None,
            last: int | None = None) -> Collected:
    """Everything the report's figures are computed from (see the module's docstring); `last`:
    the newest `last` commits instead of those made in [since, until)."""
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    times = (newest_commit_times(store, layout, state.version, last) if last is not None
             else commit_times(store, layout, state.version, since, until))
    read = parallel(lambda pair: _read_commit(store, config, layout, state, *pair), times)
    commits, audits, quarantine, cost = [], {}, {}, ReadCost()
    for commit, audit, reasons, spent in read:  # each task counted its own reads: summed on one thread
        commits.append(commit)
        cost.add(spent)
        if audit is not None:
            audits[commit.record.batch_id] = audit
        if reasons is not None:
            quarantine[commit.record.batch_id] = reasons
    if last is not None and commits:
        since, until = commits[0].committed_at, commits[-1].committed_at
    return Collected(since, until, state.version, commits, audits, quarantine,
                     _holder_times(store, layout, state, commits, audits), _live_cache_by_day(state),
                     None if ingestion is None else ingestion(state), cost)


def copy_holders(record: CommitRecord, audit: AuditSummary | None) -> Mapping[str, int]:
    """The earlier batches that hold the kept copies of a batch's cross-batch duplicates, and how
    many of its copies each holds: as its record says, else from its audit's `kept_in_batch`."""
    recorded = _recorded_copy_holders(record)
    if recorded is not None:
        return recorded
    return audit.holders if audit is not None else {}


def _recorded_copy_holders(record: CommitRecord) -> Mapping[str, int] | None:
    """The copies' holders as a batch's record says them: `copies_decided_against`; in an older
    record without it, `decided_against` when the batch emitted no changelog update (it counts the
    batches updates supersede too: an update is a new version, not a copy); None where the record
    cannot say."""
    change = record.change
    if not isinstance(change, BatchChange):
        return None
    if change.copies_decided_against is not None:
        return change.copies_decided_against
    return change.decided_against if not record.counts.updates else None


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
    for version, at in _listed_commits(store, layout, first):
        if version > head or at >= until + CLOCK_SKEW:
            break
        if since <= at < until:
            found.append((version, at))
    return found


def newest_commit_times(store: S3Store, layout: Layout, head: int, last: int) -> list[tuple[int, datetime]]:
    """(version, commit time) of the newest `last` commits of 1..head, oldest first."""
    first = max(1, head - last + 1)
    return [(version, at) for version, at in _listed_commits(store, layout, first) if version <= head] if head else []


def _listed_commits(store: S3Store, layout: Layout, first: int) -> Iterable[tuple[int, datetime]]:
    start_after = layout.commit(first - 1) if first > 1 else None
    for info in store.list(layout.settings.commit_log_prefix, start_after=start_after):
        version = layout.version_of_commit_key(info.key)
        if version is not None and info.last_modified is not None:
            yield version, info.last_modified


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
        raise CorruptStateError(f"commit {store.uri(layout.commit(version))} of the folded log is missing")
    return info.last_modified


def _read_commit(store: S3Store, config: Config, layout: Layout, state: CommittedState, version: int,
                 committed_at: datetime) -> tuple[CommitInRange, AuditSummary | None, Counter[str] | None, ReadCost]:
    """One commit of the range: its slim record, stage times, audit and quarantine summaries."""
    record = committed_record(store, layout, version)
    cache = [o for o in record.objects if o.kind == "cache"]
    commit = CommitInRange(_slim(record), committed_at, retracted=record.batch_id in state.retracted,
                           cache_objects=len(cache), cache_bytes=sum(o.size for o in cache))
    if not isinstance(record.change, BatchChange):
        return commit, None, None, ReadCost()
    manifest = store.head(layout.batch_manifest(record.batch_id))
    first = next((o for o in record.objects if o.kind in ("audit", "data", "quarantine")), None)
    copied = None if first is None else store.head(first.key)
    commit = replace(commit, staged_at=None if manifest is None else manifest.last_modified,
                     promoted_at=None if copied is None else copied.last_modified)
    audit, cost = _audit_summary(store, config, record)
    reasons = None
    if record.counts.malformed:
        recorded = record.change.quarantined_by_reason
        if recorded is not None:
            reasons = Counter(recorded)
        else:
            reasons, spent = _quarantine_reasons(store, record, audit.unreadable)
            cost.add(spent)
    return commit, audit, reasons, cost


def _slim(record: CommitRecord) -> CommitRecord:
    """What the figures read of a record: a year-old store's records name hundreds of cache objects
    and ledger inputs each, which 2,016 of them would hold in memory for nothing."""
    change: Change = record.change
    if isinstance(change, BatchChange):
        change = replace(change, ledger_update=None, excluded_inputs=(), duplicates_by_folder=None,
                         duplicates_by_producer=None, quarantined_by_reason=None)
    return replace(record, objects=tuple(o for o in record.objects if o.kind in ("audit", "quarantine")),
                   cache_heads={}, cache_bases={}, change=change)


def source_prefix(key: str, depth: int) -> str:
    """The part of an input key that names its source: its folder (depth 0), or its first `depth` folders."""
    folder = key_folder(key)
    if depth == 0:
        return folder
    return "".join(f"{name}/" for name in folder.split("/")[:-1][:depth])


def recorded_sources(folders: Mapping[str, int], depth: int) -> Counter[str]:
    """A commit's duplicates by folder as sources (`source_prefix` at `depth`). A folder an older
    record cut as a value, without its "/" (docs/formats.md), is read as a folder: credited to
    itself, not to its parent."""
    sources: Counter[str] = Counter()
    for folder, n in folders.items():
        sources[folder if folder == OTHER_VALUES else source_prefix(read_recorded_folder(folder), depth)] += n
    return sources


def _audit_summary(store: S3Store, config: Config, record: CommitRecord) -> tuple[AuditSummary, ReadCost]:
    """A batch's duplicates by source and producer, as its commit records them (no request) or, in a
    record without them (docs/formats.md), from its audit's columns; and, where decided_against
    cannot say, its copies' holders from the audit's kept_in_batch."""
    change = record.change
    assert isinstance(change, BatchChange)
    summary = AuditSummary()
    recorded = change.duplicates_by_folder is not None and change.duplicates_by_producer is not None
    if recorded:
        summary.sources.update(recorded_sources(change.duplicates_by_folder or {}, config.report.source_prefix_depth))
        summary.producers.update({value or None: n for value, n in (change.duplicates_by_producer or {}).items()})
    columns = ([] if recorded else ["source_object", "producer"]) + (
        ["kept_in_batch"] if _recorded_copy_holders(record) is None else [])
    cost = ReadCost()
    if columns:
        _read_audit(store, config, record, columns, summary, cost)
    return summary, cost


def _read_audit(store: S3Store, config: Config, record: CommitRecord, columns: Sequence[str],
                summary: AuditSummary, cost: ReadCost) -> None:
    for audit in (o for o in record.objects if o.kind == "audit" and o.rows):
        table = _read_or_note(store, audit, columns, cost, summary.unreadable)
        if table is None:
            continue
        if "source_object" in columns:  # counted per distinct value: a batch's duplicates come from few objects
            for value, n in value_counts(table.column("source_object")):  # each folder as a commit records it
                folder = recorded_folder(key_folder(value or ""))
                summary.sources[source_prefix(folder, config.report.source_prefix_depth)] += n
            summary.producers.update(dict(value_counts(table.column("producer"))))
        if "kept_in_batch" in columns:
            summary.holders.update({holder: n for holder, n in value_counts(table.column("kept_in_batch"))
                                    if holder is not None and holder != record.batch_id})
    if "source_object" in columns:  # bounded as a commit records them
        summary.sources = Counter(bounded_counts(summary.sources, recorded=recorded_folder))
        producers = bounded_counts({value or "": n for value, n in summary.producers.items()})
        summary.producers = Counter({value or None: n for value, n in producers.items()})


def _read_or_note(store: S3Store, obj: PromotedObject, columns: Sequence[str], cost: ReadCost,
                  unreadable: list[str]) -> pa.Table | None:
    """The columns of a committed file, or None with why it could not be read: gone, replaced or
    damaged (a report shows what it could not count; `fsck` is the check that fails on it). Any
    other error (a throttled store) is raised: a report must not come out silently short."""
    try:
        return read_columns(store, obj.key, columns, etag=obj.etag, cost=cost)
    except ClientError as exc:
        if not is_changed_or_missing(exc):
            raise
        unreadable.append(f"{store.uri(obj.key)}: {exc}")
    except (CorruptStateError, pa.ArrowException) as exc:
        unreadable.append(f"{store.uri(obj.key)}: {exc}")
    return None


def _quarantine_reasons(store: S3Store, record: CommitRecord,
                        unreadable: list[str]) -> tuple[Counter[str], ReadCost]:
    reasons: Counter[str] = Counter()
    cost = ReadCost()
    for obj in (o for o in record.objects if o.kind == "quarantine" and o.rows):
        table = _read_or_note(store, obj, ["error"], cost, unreadable)
        if table is None:
            reasons[UNREADABLE] += obj.rows
            continue
        reasons.update(reason_class_counts(table.column("error")))
    return reasons, cost


def _holder_times(store: S3Store, layout: Layout, state: CommittedState, commits: Sequence[CommitInRange],
                  audits: dict[str, AuditSummary]) -> dict[str, datetime]:
    """The as_of of every batch a copy in the range was decided against."""
    batches = [c.record for c in commits if isinstance(c.record.change, BatchChange)]
    times = {r.batch_id: datetime.fromisoformat(r.as_of) for r in batches}
    holders: set[str] = set()
    for record in batches:
        holders.update(copy_holders(record, audits.get(record.batch_id)))
    missing = sorted(holders - set(times))

    def time_of(batch_id: str) -> datetime | None:
        version = committed_version(store, layout, state, batch_id)
        return None if version is None else commit_as_of(store, layout, version)

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
