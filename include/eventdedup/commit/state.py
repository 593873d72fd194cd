"""The committed state: the commit log folded up to a version, pure (no S3 here).

The folded state is bounded by the dedup window, not by the age of the store: each commit names
the hour before which nothing it (or a rerun of a batch inside the window) reads, and the fold
drops cache heads of hours before the newest such hour, and batches that can no longer be
recomputed. A batch that leaves the state is still known to be committed: before the checkpoint
that first omits it is written, a marker beside its manifest records its version
(eventdedup.commit.log).

Every kind of change a commit carries (eventdedup.commit.changes) is applied here and nowhere
else: `CommittedState.apply` folds a commit, and one function per kind (`_apply_change`,
dispatched on the change's type as pyiceberg's `_apply_table_update` is) says what that kind alters.
"""
from __future__ import annotations

import gzip
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import singledispatch
from typing import Any

import orjson

from eventdedup import codec
from eventdedup.codec import TRANSIENT
from eventdedup.column_types import DeclaredColumn
from eventdedup.commit.changes import BatchChange, ColumnBackfill, Reshard, Retraction
from eventdedup.commit.ledger import IngestionLedger
from eventdedup.commit.records import CommitRecord
from eventdedup.errors import CorruptStateError
from eventdedup.inputs.intervals import interval_start_of
from eventdedup.keys import CacheKey, hour_index_at, hour_text

CHECKPOINT_FORMAT = 4


@dataclass(frozen=True)
class CommittedState:
    """The log folded up to `version`, bounded by the dedup window measured in arrival time.

    Every commit has an arrival hour (eventdedup.cache.history: its as_of's hour, never before the
    log's latest arrival, so arrivals never decrease along the log). A batch sees the cache
    entries of batches that arrived within a window before it; `retain_from_hour`, a window before
    the newest window start, is the horizon: entries that arrived before it are visible to no new
    batch and to no rerun that can still be exact.

    `batches` holds the recent batches (batch id -> commit version): a suffix of the log, from the
    oldest batch that arrived at or after the horizon. Older batches are committed all the same:
    ask `eventdedup.commit.log.committed_version`. `cache_heads` holds every cache object (hour
    segments and id guards) some batch at or after the horizon wrote; `head_arrivals` the newest
    arrival that wrote each. A head may build on older objects of its key (`cache_bases`, oldest
    first: eventdedup.cache.heads); the key's history is its chain, bases then head.
    """

    version: int = 0
    batches: Mapping[str, int] = field(default_factory=dict)  # recent batch id -> commit version
    cache_heads: Mapping[str, str] = field(default_factory=dict)
    # Cache key -> the older objects its head builds on, oldest first (only keys that have any).
    cache_bases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    last_batch_id: str | None = None
    arrivals: Mapping[str, int] = field(default_factory=dict)  # recent batch id -> its arrival hour
    retain_from_hour: int | None = None
    # The latest committed interval batch (recorded as one in its commit): what interval run order
    # needs; and its arrival, the log's time, at which a manual batch arrives.
    latest_interval_batch_id: str | None = None
    latest_interval_arrival_hour: int | None = None
    # The highest version whose batch has left `batches` (0: none has): below it, look for markers.
    left_through_version: int = 0
    # Every input object consumed by a recent commit (eventdedup.commit.ledger).
    ledger: IngestionLedger = field(default_factory=IngestionLedger)
    latest_arrival_hour: int | None = None
    head_arrivals: Mapping[str, int] = field(default_factory=dict)  # cache head key -> newest writer arrival
    # Batches that left the state since the checkpoint this state was loaded from: their markers
    # are written before the next checkpoint. Not part of a checkpoint.
    left_since_checkpoint: Mapping[str, int] = field(default_factory=dict, compare=False, metadata=TRANSIENT)
    # Retracted batch id -> the version of the retraction: out of the committed view, never
    # committed again under that id (their objects keep their names). Rare; kept for good.
    retracted: Mapping[str, int] = field(default_factory=dict)
    # Reshard cut-overs, (first hour, bucket count), in commit order (eventdedup.cache.epochs).
    bucket_cutovers: tuple[tuple[int, int], ...] = ()
    # Every object of every key's chain -> its ETag, as the commit that wrote it recorded it: an
    # executor's local copy of one is its bytes without asking S3 (eventdedup.cache.local_copies).
    # Empty in checkpoints that do not record it (docs/formats.md): those copies are confirmed by a
    # 304. Derived from the records, like the heads; not compared (a state folded from an older
    # checkpoint is the same state, knowing fewer ETags).
    object_etags: Mapping[str, str] = field(default_factory=dict, compare=False)
    # The output's declared columns as the latest commit that wrote data files with any recorded
    # them (a batch or a column backfill): what the next batch's columns are held to
    # (eventdedup.commit.gate) and the Delta table's schema holds. Empty in checkpoints written
    # before columns existed (docs/formats.md): none had been declared.
    columns: tuple[DeclaredColumn, ...] = ()

    def apply(self, record: CommitRecord, name: str) -> CommittedState:
        """The state after commit `record`. Its change takes effect in the function registered for
        its kind (`_apply_change`); what every commit does (its cache heads, the horizon's pruning) here."""
        self._check_follows(record, name)
        arrival = self._arrival_of(record)
        folding = _Folding(self, record, name, arrival, batches={**self.batches, record.batch_id: record.version},
                           arrivals={**self.arrivals, record.batch_id: arrival}, horizon=self.retain_from_hour,
                           ledger=self.ledger, retracted=dict(self.retracted), cutovers=self.bucket_cutovers,
                           latest_interval=(self.latest_interval_batch_id, self.latest_interval_arrival_hour),
                           columns=self.columns)
        _apply_change(record.change, folding)
        batches, arrivals, horizon, ledger = folding.batches, folding.arrivals, folding.horizon, folding.ledger
        retracted, cutovers, latest_interval = folding.retracted, folding.cutovers, folding.latest_interval
        left = dict(self.left_since_checkpoint)
        for batch_id in _batches_leaving(batches, arrivals, horizon):
            left[batch_id] = batches.pop(batch_id)
            arrivals.pop(batch_id, None)
        left_through = max([self.left_through_version, *left.values()])
        # A head lives from its newest writer's arrival; arrivals need not grow along the log
        # (eventdedup.cache.history), so the later of the two.
        head_arrivals = {**self.head_arrivals,
                         **{key: max(arrival, self.head_arrivals.get(key, arrival)) for key in record.cache_heads}}
        heads = {**self.cache_heads, **record.cache_heads}
        bases = self._bases_after(record, name)
        if horizon is not None:
            heads = {key: segment for key, segment in heads.items() if head_arrivals[key] >= horizon}
            head_arrivals = {key: head_arrivals[key] for key in heads}
            bases = {key: chain for key, chain in bases.items() if key in heads}
        object_etags = _chain_etags(self.object_etags, record, heads, bases)
        return CommittedState(
            version=record.version, batches=batches, cache_heads=heads, cache_bases=bases,
            last_batch_id=record.batch_id, arrivals=arrivals, retain_from_hour=horizon,
            latest_interval_batch_id=latest_interval[0],
            latest_interval_arrival_hour=latest_interval[1], left_through_version=left_through,
            ledger=ledger.pruned(left_through), latest_arrival_hour=_later_hour(self.latest_arrival_hour, arrival),
            head_arrivals=head_arrivals, left_since_checkpoint=left, retracted=retracted, bucket_cutovers=cutovers,
            object_etags=object_etags, columns=folding.columns,
        )

    def chain(self, key: str) -> tuple[str, ...]:
        """Every object of a cache key's committed history, oldest first (none: no head)."""
        head = self.cache_heads.get(key)
        return () if head is None else (*self.cache_bases.get(key, ()), head)

    def cache_chains(self) -> dict[str, tuple[str, ...]]:
        """Every cache key's chain: what a batch's executors read."""
        return {key: self.chain(key) for key in self.cache_heads}

    def chain_etags(self) -> dict[str, str]:
        """The ETag of every chain object the state knows one of (`object_etags`)."""
        return dict(self.object_etags)

    def cache_objects(self) -> set[str]:
        """Every cache object some reader may load: the heads and what they build on."""
        return {obj for key in self.cache_heads for obj in self.chain(key)}

    def _bases_after(self, record: CommitRecord, name: str) -> dict[str, tuple[str, ...]]:
        """The keys' bases once `record` applies. A head the commit writes replaces its key's
        chain from where it builds on: what it names must be the oldest objects of the key's
        chain it was computed against (this state), in order, or a reader would miss history."""
        bases = dict(self.cache_bases)
        for key in record.cache_heads:
            builds_on = tuple(record.cache_bases.get(key, ()))
            if len({*builds_on, record.cache_heads[key]}) != len(builds_on) + 1:
                raise CorruptStateError(f"commit record {name} names an object twice in the chain of cache key {key}; "
                                        "the log is broken")
            if builds_on != self.chain(key)[:len(builds_on)]:
                raise CorruptStateError(f"commit record {name} builds cache key {key} on {list(builds_on)}, not on the "
                                        f"oldest objects of its chain {list(self.chain(key))}; the log is broken")
            if builds_on:
                bases[key] = builds_on
            else:
                bases.pop(key, None)
        unknown = sorted(set(record.cache_bases) - set(record.cache_heads))
        if unknown:
            raise CorruptStateError(f"commit record {name} names bases of cache keys it writes no head of: {unknown}")
        return bases

    def _arrival_of(self, record: CommitRecord) -> int:
        """The hour a commit arrived at: the one its batch recorded (eventdedup.cache.history chose
        it); one that records none (older records: docs/formats.md) never before the log's latest
        arrival."""
        change = record.change
        if isinstance(change, BatchChange) and change.arrival_hour is not None:
            return change.arrival_hour
        arrival = _later_hour(self.latest_arrival_hour, record_arrival_hour(record))
        assert arrival is not None
        return arrival

    def _check_follows(self, record: CommitRecord, name: str) -> None:
        if record.version != self.version + 1 or record.previous_batch_id != self.last_batch_id:
            raise CorruptStateError(
                f"commit record {name} (version {record.version}, after {record.previous_batch_id!r}) does not "
                f"follow version {self.version} ({self.last_batch_id!r}); the log is broken"
            )
        if (record.batch_id in self.batches or record.batch_id in self.left_since_checkpoint
                or record.batch_id in self.retracted):
            raise CorruptStateError(f"commit record {name} commits batch {record.batch_id} a second time")

    def to_bytes(self) -> bytes:
        """The checkpoint: gzip of the codec's document (the transient markers-to-write left out)."""
        return gzip.compress(orjson.dumps({"format": CHECKPOINT_FORMAT, **codec.to_doc(self)}), mtime=0)

    @classmethod
    def from_bytes(cls, data: bytes, name: str) -> CommittedState:
        try:
            state: CommittedState = codec.loads(cls, gzip.decompress(data), upgrade_checkpoint)
        except (OSError, EOFError, codec.CodecError) as exc:
            raise CorruptStateError(f"checkpoint {name} does not parse: {exc}") from None
        # Version order: recent batches leave the state as a prefix of it.
        return replace(state, batches=dict(sorted(state.batches.items(), key=lambda item: item[1])))


@dataclass
class _Folding:
    """A commit being folded into `state`: what its change may alter, altered in place by the
    function registered for its kind, then taken by `CommittedState.apply`."""

    state: CommittedState
    record: CommitRecord
    name: str
    arrival: int
    batches: dict[str, int]
    arrivals: dict[str, int]
    horizon: int | None
    ledger: IngestionLedger
    retracted: dict[str, int]
    cutovers: tuple[tuple[int, int], ...]
    latest_interval: tuple[str | None, int | None]
    columns: tuple[DeclaredColumn, ...]


@singledispatch
def _apply_change(change: object, folding: _Folding) -> None:
    """How a kind of change alters the state: one function per kind (a new kind registers its own)."""
    raise CorruptStateError(f"commit record {folding.name} carries a change of no known kind "
                            f"({type(change).__name__}); the log is broken")


@_apply_change.register
def _apply_batch(change: BatchChange, folding: _Folding) -> None:
    """A batch moves the horizon, adds what it consumed to the ledger, and may be the latest interval."""
    record = folding.record
    folding.horizon = _later_hour(folding.horizon, change.retain_from_hour)
    folding.ledger = folding.ledger.with_update(change.ledger_update, record.version,
                                                hour_index_at(datetime.fromisoformat(record.as_of)))
    if change.interval:
        folding.latest_interval = _later_interval(folding.latest_interval, record.batch_id, folding.arrival)
    if change.columns:  # a batch of a release without columns (an older promoter) leaves them as they are
        folding.columns = change.columns


@_apply_change.register
def _apply_retraction(change: Retraction, folding: _Folding) -> None:
    """Retracted batches leave the view and the ledger, for good; a false latest interval is undone."""
    recent = folding.state.batches
    unknown = [batch for batch in change.retracts if batch not in recent]
    if unknown:
        raise CorruptStateError(f"commit record {folding.name} retracts {unknown}, which are not recent committed "
                                "batches; the log is broken")
    folding.ledger = folding.ledger.without_versions({recent[batch] for batch in change.retracts})
    for batch in change.retracts:
        folding.batches.pop(batch)
        folding.arrivals.pop(batch, None)
        folding.retracted[batch] = folding.record.version
    if change.restores_interval is not None:
        folding.latest_interval = (change.restores_interval.batch_id, change.restores_interval.arrival_hour)


@_apply_change.register
def _apply_reshard(change: Reshard, folding: _Folding) -> None:
    """A reshard adds a cut-over, after every earlier one."""
    cutovers = folding.cutovers
    if cutovers and change.from_hour <= cutovers[-1][0]:
        raise CorruptStateError(f"commit record {folding.name} reshards from {hour_text(change.from_hour)}, not after "
                                f"the last cut-over at {hour_text(cutovers[-1][0])}; the log is broken")
    folding.cutovers = (*cutovers, change.cutover)


@_apply_change.register
def _apply_column_backfill(change: ColumnBackfill, folding: _Folding) -> None:
    """A column backfill replaces files of the committed view (eventdedup.commit.view applies that):
    never a retracted batch's, whose files have left it; its columns are the log's from here on."""
    gone = sorted({replaced.batch_id for replaced in change.replaced} & set(folding.retracted))
    if gone:
        raise CorruptStateError(f"commit record {folding.name} backfills columns into files of retracted batches "
                                f"{gone}; the log is broken")
    folding.columns = change.columns


def upgrade_checkpoint(doc: Any) -> Any:
    """A checkpoint of any earlier format as the current document: what an unnumbered one lacks
    is derived, a ledger's inline entries become its recent ones (written as a part by the next
    checkpoint), and a format-3 one has no `cache_bases` (docs/formats.md)."""
    if isinstance(doc, dict) and doc.get("format") == 3:  # no cache_bases: every head holds its key's history
        return {**doc, "format": CHECKPOINT_FORMAT}
    if isinstance(doc, dict) and doc.get("format") == 2:
        return _ledger_entries_as_recent({**doc, "format": CHECKPOINT_FORMAT})
    if not codec.is_older_format(doc, CHECKPOINT_FORMAT, None, "checkpoint format"):
        return doc
    doc = dict(doc)
    if "latest_interval_batch_id" not in doc:
        latest: tuple[str | None, int | None] = (None, None)
        for batch_id in doc.get("batches", {}):
            latest = _later_interval(latest, batch_id, None)
        doc["latest_interval_batch_id"] = latest[0]
    if "arrivals" not in doc:
        starts = {str(k): int(v) for k, v in doc.get("window_starts", {}).items()}
        horizon = doc.get("retain_from_hour")
        window = max(starts.values()) - horizon if starts and horizon is not None else 0
        doc["arrivals"] = {batch: start + window for batch, start in starts.items()}
        doc["head_arrivals"] = {key: CacheKey.parse(key).hour_index for key in doc.get("cache_heads", {})}
    if doc.get("latest_arrival_hour") is None and doc["arrivals"]:
        doc["latest_arrival_hour"] = max(doc["arrivals"].values())
    if doc.get("latest_interval_batch_id") is not None and "latest_interval_arrival_hour" not in doc:
        # Arrivals never decreased along such a log: its latest interval arrived at its own
        # arrival, or (it left the state) no later than the latest.
        doc["latest_interval_arrival_hour"] = doc["arrivals"].get(doc["latest_interval_batch_id"],
                                                                  doc.get("latest_arrival_hour"))
    if isinstance(doc.get("ledger"), dict) and doc["ledger"] and "started" not in doc["ledger"]:
        doc["ledger"] = {**doc["ledger"], "started": True}  # a ledger object without keys was never started
    return _ledger_entries_as_recent(doc)


def _ledger_entries_as_recent(doc: dict[str, Any]) -> dict[str, Any]:
    """A format-2 ledger's inline entries (key -> [etag, version, hour]) as format 3's recent
    entries (key -> [[etag, version, hour, dated]]: the LastModified hour was not recorded)."""
    if not isinstance(doc.get("ledger"), dict) or "entries" not in doc["ledger"]:
        return doc
    ledger = dict(doc["ledger"])
    entries = ledger.pop("entries")
    ledger["recent"] = ({key: [[*entry, None]] for key, entry in entries.items()} if isinstance(entries, dict)
                        else entries)
    return {**doc, "ledger": ledger}


def _chain_etags(known: Mapping[str, str], record: CommitRecord, heads: Mapping[str, str],
                 bases: Mapping[str, tuple[str, ...]]) -> dict[str, str]:
    """The ETags of the objects of the chains after a commit: those known, with the commit's own
    heads' (its record lists each object it promoted with its ETag); objects no chain names drop."""
    written = {obj.key: obj.etag for obj in record.objects if obj.kind == "cache"}
    etags = {**known, **{key: written[key] for key in record.cache_heads.values() if key in written}}
    live = {*heads.values(), *(obj for chain in bases.values() for obj in chain)}
    return {key: etag for key, etag in etags.items() if key in live}


def log_time(state: CommittedState, now: datetime) -> datetime:
    """The time an operation commits at (a retraction, a reshard): the log's latest arrival, not
    a clock, so it never moves the windows of the batches after it (a clock ahead of log time
    during a backfill would); `now` only for a log without arrivals."""
    if state.latest_arrival_hour is None:
        return now
    return datetime.fromtimestamp(state.latest_arrival_hour * 3600, tz=timezone.utc)


def record_arrival_hour(record: CommitRecord) -> int:
    """A commit's arrival hour as it records it: its `arrival_hour`; in a record without one, its
    window start plus one window (a window start is the arrival minus the window, and the horizon
    it records one window earlier still); in one without those either, and in an operation, its
    as_of's hour (docs/formats.md)."""
    change = record.change
    if isinstance(change, BatchChange) and change.arrival_hour is not None:
        return change.arrival_hour
    if (isinstance(change, BatchChange) and change.window_start_hour is not None
            and change.retain_from_hour is not None):
        return 2 * change.window_start_hour - change.retain_from_hour
    return hour_index_at(datetime.fromisoformat(record.as_of))


def _later_hour(current: int | None, candidate: int | None) -> int | None:
    """Horizons and arrivals only move forward: a batch committed late cannot lower them."""
    if candidate is None:
        return current
    return candidate if current is None else max(current, candidate)


def _batches_leaving(batches: Mapping[str, int], arrivals: Mapping[str, int],
                     horizon: int | None) -> list[str]:
    """The oldest batches (a prefix in version order) that arrived before the horizon: no batch
    sees their entries any more, and a rerun of them would read expired ones. Leaving as a prefix
    keeps `batches` a suffix of the log, so a run owned by a batch not in it is older than every
    batch in it."""
    if horizon is None:
        return []
    leaving = []
    for batch_id in batches:  # insertion order is version order
        arrival = arrivals.get(batch_id)
        if arrival is not None and arrival >= horizon:
            break
        leaving.append(batch_id)
    return leaving


def _later_interval(current: tuple[str | None, int | None], batch_id: str,
                    arrival: int | None) -> tuple[str | None, int | None]:
    """The later of the latest interval batch so far and an interval batch committing (intervals
    commit in time order; the later start wins all the same)."""
    start = interval_start_of(batch_id)
    if start is None:
        return current
    current_start = None if current[0] is None else interval_start_of(current[0])
    return (batch_id, arrival) if current_start is None or start > current_start else current
