"""The ordered commit log: the single source of truth for what is committed.

Modelled on Delta Lake's `_delta_log`: commit N is one JSON object written with
`put_object(IfNoneMatch="*")`, so at most one writer can ever create it, and it names commit
N-1's batch. A batch is visible, and its cache entries trusted, only once its commit exists.
Every `checkpoint_interval` commits the folded state is written as a checkpoint, so loading the
committed state costs a constant number of requests, not one per past batch.

The folded state is bounded by the dedup window, not by the age of the store: each commit names
the hour before which nothing it (or a rerun of a batch inside the window) reads, and the fold
drops cache heads of hours before the newest such hour, and batches that can no longer be
recomputed. A batch that leaves the state is still known to be committed: before the checkpoint
that first omits it is written, a marker beside its manifest records its version.
"""
from __future__ import annotations

import gzip
import logging
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

import orjson

from eventdedup.commit.ledger import IngestionLedger, LedgerUpdate
from eventdedup.errors import CommitConflictError, CorruptStateError, EventDedupError
from eventdedup.inputs.intervals import interval_start_of
from eventdedup.keys import CacheKey, hour_index_at
from eventdedup.layout import Layout
from eventdedup.s3store import ObjectInfo, S3Store

log = logging.getLogger(__name__)
COMMIT_FORMAT = 1


@dataclass(frozen=True)
class PromotedObject:
    kind: str  # data | audit | quarantine | cache | load_manifest
    key: str
    size: int
    etag: str
    rows: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "key": self.key, "size": self.size, "etag": self.etag, "rows": self.rows}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PromotedObject:
        return cls(data["kind"], data["key"], int(data["size"]), data["etag"], int(data.get("rows", 0)))

    @property
    def info(self) -> ObjectInfo:
        return ObjectInfo(self.key, self.size, self.etag)


@dataclass(frozen=True)
class CommitRecord:
    version: int
    batch_id: str
    previous_batch_id: str | None
    # Unique per promotion attempt: lets a promoter whose PUT response was lost recognise the
    # commit as its own (Iceberg's "commit state unknown") instead of reporting a conflict.
    token: str
    as_of: str
    counts: Mapping[str, int]
    objects: tuple[PromotedObject, ...]
    cache_heads: Mapping[str, str]  # cache key "YYYY-MM-DD/HH/BBBB" -> segment key
    # The first hour (hours since the epoch) the batch checked against the cache; a rerun checks
    # the same hours. None in records written before it was recorded.
    window_start_hour: int | None = None
    # Hours before this one may leave the state: neither this batch nor a rerun of any batch whose
    # window starts within a window of this one reads them (its window start minus one window).
    retain_from_hour: int | None = None
    # The input objects the batch consumed and the ledger's horizons (eventdedup.commit.ledger);
    # None in records written before the ledger existed.
    ledger_update: LedgerUpdate | None = None
    # Dedup partitions the batch's job ran with; None in records written before they were derived
    # from the input (eventdedup.job.read_units.dedup_partitions).
    partitions: int | None = None
    # A retraction (eventdedup.ops.retract): the batches this commit removes from the committed
    # view, and why. Its objects are their cache heads without their runs and their emptied
    # load manifests; it consumes no input and owns no cache run.
    retracts: tuple[str, ...] = ()
    reason: str | None = None
    # A reshard (eventdedup.ops.reshard): from this hour on (hours since the epoch), hour segments
    # have this many buckets (eventdedup.cache.epochs).
    reshard: tuple[int, int] | None = None

    @property
    def is_operation(self) -> bool:
        """A retraction or a reshard: staged from the log, not from a batch manifest; no input."""
        return bool(self.retracts) or self.reshard is not None

    def to_bytes(self) -> bytes:
        doc: dict[str, Any] = {
            "format": COMMIT_FORMAT,
            "version": self.version,
            "batch_id": self.batch_id,
            "previous_batch_id": self.previous_batch_id,
            "token": self.token,
            "as_of": self.as_of,
            "counts": dict(self.counts),
            "objects": [obj.to_json() for obj in self.objects],
            "cache_heads": dict(sorted(self.cache_heads.items())),
        }
        if self.window_start_hour is not None:
            doc["window_start_hour"] = self.window_start_hour
        if self.retain_from_hour is not None:
            doc["retain_from_hour"] = self.retain_from_hour
        if self.ledger_update is not None:
            doc["ledger"] = self.ledger_update.to_json()
        if self.partitions is not None:
            doc["partitions"] = self.partitions
        if self.retracts:
            doc["retracts"] = list(self.retracts)
            doc["reason"] = self.reason
        if self.reshard is not None:
            doc["reshard"] = {"from_hour": self.reshard[0], "buckets": self.reshard[1]}
        return orjson.dumps(doc, option=orjson.OPT_INDENT_2)

    @classmethod
    def from_bytes(cls, data: bytes, name: str) -> CommitRecord:
        try:
            doc = orjson.loads(data)
            if doc.get("format") != COMMIT_FORMAT:
                raise ValueError(f"unknown format {doc.get('format')!r}")
            return cls(
                version=int(doc["version"]),
                batch_id=str(doc["batch_id"]),
                previous_batch_id=doc["previous_batch_id"],
                token=str(doc["token"]),
                as_of=str(doc["as_of"]),
                counts={k: int(v) for k, v in doc["counts"].items()},
                objects=tuple(PromotedObject.from_json(o) for o in doc["objects"]),
                cache_heads={str(k): str(v) for k, v in doc["cache_heads"].items()},
                window_start_hour=_optional_int(doc.get("window_start_hour")),
                retain_from_hour=_optional_int(doc.get("retain_from_hour")),
                ledger_update=LedgerUpdate.from_json(doc.get("ledger")),
                partitions=_optional_int(doc.get("partitions")),
                retracts=tuple(str(batch) for batch in doc.get("retracts", ())),
                reason=doc.get("reason"),
                reshard=_cutover(doc.get("reshard")),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptStateError(f"commit record {name} does not parse: {exc}; the log cannot be trusted") from None


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _cutover(doc: Mapping[str, Any] | None) -> tuple[int, int] | None:
    return None if doc is None else (int(doc["from_hour"]), int(doc["buckets"]))


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
    ask `committed_version`. `cache_heads` holds every cache object (hour segments and id guards)
    some batch at or after the horizon wrote; `head_arrivals` the newest arrival that wrote each.
    """

    version: int = 0
    batches: Mapping[str, int] = field(default_factory=dict)  # recent batch id -> commit version
    cache_heads: Mapping[str, str] = field(default_factory=dict)
    last_batch_id: str | None = None
    arrivals: Mapping[str, int] = field(default_factory=dict)  # recent batch id -> its arrival hour
    retain_from_hour: int | None = None
    # The committed batch whose id names the latest interval start: what interval run order needs.
    latest_interval_batch_id: str | None = None
    # The highest version whose batch has left `batches` (0: none has): below it, look for markers.
    left_through_version: int = 0
    # Every input object consumed by a recent commit (eventdedup.commit.ledger).
    ledger: IngestionLedger = field(default_factory=IngestionLedger)
    latest_arrival_hour: int | None = None
    head_arrivals: Mapping[str, int] = field(default_factory=dict)  # cache head key -> newest writer arrival
    # Batches that left the state since the checkpoint this state was loaded from: their markers
    # are written before the next checkpoint. Not part of a checkpoint.
    left_since_checkpoint: Mapping[str, int] = field(default_factory=dict, compare=False)
    # Retracted batch id -> the version of the retraction: out of the committed view, never
    # committed again under that id (their objects keep their names). Rare; kept for good.
    retracted: Mapping[str, int] = field(default_factory=dict)
    # Reshard cut-overs, (first hour, bucket count), in commit order (eventdedup.cache.epochs).
    bucket_cutovers: tuple[tuple[int, int], ...] = ()

    def apply(self, record: CommitRecord, name: str) -> CommittedState:
        if record.version != self.version + 1 or record.previous_batch_id != self.last_batch_id:
            raise CorruptStateError(
                f"commit record {name} (version {record.version}, after {record.previous_batch_id!r}) does not "
                f"follow version {self.version} ({self.last_batch_id!r}); the log is broken"
            )
        if (record.batch_id in self.batches or record.batch_id in self.left_since_checkpoint
                or record.batch_id in self.retracted):
            raise CorruptStateError(f"commit record {name} commits batch {record.batch_id} a second time")
        unknown = [batch for batch in record.retracts if batch not in self.batches]
        if unknown:
            raise CorruptStateError(f"commit record {name} retracts {unknown}, which are not recent committed "
                                    "batches; the log is broken")
        cutovers = self.bucket_cutovers
        if record.reshard is not None:
            if cutovers and record.reshard[0] <= cutovers[-1][0]:
                raise CorruptStateError(f"commit record {name} reshards from hour {record.reshard[0]}, not after the "
                                        f"last cut-over at {cutovers[-1][0]}; the log is broken")
            cutovers = (*cutovers, record.reshard)
        horizon = _later_hour(self.retain_from_hour, record.retain_from_hour)
        arrival = _later_hour(self.latest_arrival_hour, record_arrival_hour(record))
        assert arrival is not None
        retracted_versions = {self.batches[batch] for batch in record.retracts}
        batches = {**self.batches, record.batch_id: record.version}
        arrivals = {**self.arrivals, record.batch_id: arrival}
        for batch in record.retracts:
            batches.pop(batch)
            arrivals.pop(batch, None)
        left = dict(self.left_since_checkpoint)
        for batch_id in _batches_leaving(batches, arrivals, horizon):
            left[batch_id] = batches.pop(batch_id)
            arrivals.pop(batch_id, None)
        head_arrivals = {**self.head_arrivals, **{key: arrival for key in record.cache_heads}}
        heads = {**self.cache_heads, **record.cache_heads}
        if horizon is not None:
            heads = {key: segment for key, segment in heads.items() if head_arrivals[key] >= horizon}
            head_arrivals = {key: head_arrivals[key] for key in heads}
        consumed_hour = hour_index_at(datetime.fromisoformat(record.as_of))
        ledger = self.ledger.without_versions(retracted_versions).with_update(record.ledger_update, record.version,
                                                                              consumed_hour)
        return CommittedState(
            version=record.version,
            batches=batches,
            cache_heads=heads,
            last_batch_id=record.batch_id,
            arrivals=arrivals,
            retain_from_hour=horizon,
            latest_interval_batch_id=_later_interval(self.latest_interval_batch_id, record.batch_id),
            left_through_version=max([self.left_through_version, *left.values()]),
            ledger=ledger,
            latest_arrival_hour=arrival,
            head_arrivals=head_arrivals,
            left_since_checkpoint=left,
            retracted={**self.retracted, **{batch: record.version for batch in record.retracts}},
            bucket_cutovers=cutovers,
        )

    def to_bytes(self) -> bytes:
        doc = {"version": self.version, "batches": dict(self.batches), "arrivals": dict(self.arrivals),
               "cache_heads": dict(self.cache_heads), "head_arrivals": dict(self.head_arrivals),
               "last_batch_id": self.last_batch_id, "retain_from_hour": self.retain_from_hour,
               "latest_arrival_hour": self.latest_arrival_hour,
               "latest_interval_batch_id": self.latest_interval_batch_id,
               "left_through_version": self.left_through_version, "ledger": self.ledger.to_json(),
               "retracted": dict(self.retracted), "bucket_cutovers": [list(c) for c in self.bucket_cutovers]}
        return gzip.compress(orjson.dumps(doc), mtime=0)

    @classmethod
    def from_bytes(cls, data: bytes, name: str) -> CommittedState:
        try:
            doc = orjson.loads(gzip.decompress(data))
            batches = dict(sorted(((str(k), int(v)) for k, v in doc["batches"].items()), key=lambda item: item[1]))
            latest = doc.get("latest_interval_batch_id")
            if "latest_interval_batch_id" not in doc:  # a checkpoint written before it was kept
                for batch_id in batches:
                    latest = _later_interval(latest, batch_id)
            heads = {str(k): str(v) for k, v in doc["cache_heads"].items()}
            horizon = _optional_int(doc.get("retain_from_hour"))
            arrivals, head_arrivals = _arrivals_of(doc, heads, horizon)
            latest_arrival = _optional_int(doc.get("latest_arrival_hour"))
            if latest_arrival is None and arrivals:
                latest_arrival = max(arrivals.values())
            return cls(int(doc["version"]), batches, heads, doc["last_batch_id"], arrivals, horizon, latest,
                       int(doc.get("left_through_version", 0)), IngestionLedger.from_json(doc.get("ledger")),
                       latest_arrival, head_arrivals,
                       retracted={str(k): int(v) for k, v in doc.get("retracted", {}).items()},
                       bucket_cutovers=tuple((int(h), int(b)) for h, b in doc.get("bucket_cutovers", ())))
        except (OSError, EOFError, orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise CorruptStateError(f"checkpoint {name} does not parse: {exc}") from None


def log_time(state: CommittedState, now: datetime) -> datetime:
    """The time an operation commits at (a retraction, a reshard): the log's latest arrival, not
    a clock, so it never moves the windows of the batches after it (a clock ahead of log time
    during a backfill would); `now` only for a log without arrivals."""
    if state.latest_arrival_hour is None:
        return now
    return datetime.fromtimestamp(state.latest_arrival_hour * 3600, tz=timezone.utc)


def record_arrival_hour(record: CommitRecord) -> int:
    """A commit's arrival hour: its window start plus one window (a window start is the arrival
    minus the window, and the horizon it records one window earlier still); a record older than
    window starts arrived at its as_of's hour."""
    if record.window_start_hour is not None and record.retain_from_hour is not None:
        return 2 * record.window_start_hour - record.retain_from_hour
    return hour_index_at(datetime.fromisoformat(record.as_of))


def _arrivals_of(doc: Mapping[str, Any], heads: Mapping[str, str],
                 horizon: int | None) -> tuple[dict[str, int], dict[str, int]]:
    """Arrivals of batches and heads; a checkpoint written before arrivals were kept had window
    starts per batch (arrival = start + one window) and event-hour heads (kept while their hour was)."""
    if "arrivals" in doc:
        return ({str(k): int(v) for k, v in doc["arrivals"].items()},
                {str(k): int(v) for k, v in doc["head_arrivals"].items()})
    starts = {str(k): int(v) for k, v in doc.get("window_starts", {}).items()}
    window = max(starts.values()) - horizon if starts and horizon is not None else 0
    return ({batch: start + window for batch, start in starts.items()},
            {key: CacheKey.parse(key).hour_index for key in heads})


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


def _later_interval(current: str | None, batch_id: str) -> str | None:
    start = interval_start_of(batch_id)
    if start is None:
        return current
    current_start = None if current is None else interval_start_of(current)
    return batch_id if current_start is None or start > current_start else current


def read_commit(store: S3Store, layout: Layout, version: int) -> CommitRecord | None:
    key = layout.commit(version)
    data = store.get_bytes_or_none(key)
    return None if data is None else CommitRecord.from_bytes(data, store.uri(key))


def committed_record(store: S3Store, layout: Layout, version: int) -> CommitRecord:
    """Commit `version` of a folded log, which must exist: a gap means the log is broken."""
    record = read_commit(store, layout, version)
    if record is None:
        raise CorruptStateError(f"commit {store.uri(layout.commit(version))} is part of the folded log but missing; "
                                "the log cannot be trusted")
    return record


def committed_version(store: S3Store, layout: Layout, state: CommittedState, batch_id: str) -> int | None:
    """The log version that committed `batch_id`, or None if it is not committed. A batch the state
    no longer holds is found by its marker: one GET, made only when some batch has left the state
    and the id could be one of them (an interval id later than every committed one cannot)."""
    version = state.batches.get(batch_id)
    if version is None:
        version = state.left_since_checkpoint.get(batch_id)
    if version is not None or not state.left_through_version:
        return version
    start, latest = interval_start_of(batch_id), state.latest_interval_batch_id
    latest_start = None if latest is None else interval_start_of(latest)
    if start is not None and latest_start is not None and start > latest_start:
        return None
    data = store.get_bytes_or_none(layout.batch_committed_marker(batch_id))
    if data is None:
        return None
    try:
        return int(orjson.loads(data)["version"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise CorruptStateError(f"{store.uri(layout.batch_committed_marker(batch_id))} does not parse: {exc}") from None


def is_committed(store: S3Store, layout: Layout, batch_id: str) -> bool:
    """Whether `batch_id` is committed, read from the log as it is now."""
    return committed_version(store, layout, load_committed_state(store, layout), batch_id) is not None


def batch_record(store: S3Store, layout: Layout, state: CommittedState, batch_id: str) -> CommitRecord:
    """The commit record of a committed batch; refuses a batch that is not committed."""
    version = committed_version(store, layout, state, batch_id)
    if version is None:
        raise EventDedupError(f"batch {batch_id} is not committed")
    return committed_record(store, layout, version)


def load_committed_state(store: S3Store, layout: Layout) -> CommittedState:
    """Latest checkpoint plus the commits after it: a GET, a GET, a LIST and at most a few GETs."""
    state = _load_checkpoint(store, layout)
    start_after = layout.commit(state.version) if state.version else None
    for item in store.list(layout.settings.commit_log_prefix, start_after=start_after):
        version = layout.version_of_commit_key(item.key)
        if version is None:
            continue
        record = read_commit(store, layout, version)
        if record is None:
            raise CorruptStateError(f"commit {store.uri(item.key)} was listed but cannot be read")
        if record.version != version:
            raise CorruptStateError(f"commit {store.uri(item.key)} claims version {record.version}")
        state = state.apply(record, store.uri(item.key))
    return state


def _load_checkpoint(store: S3Store, layout: Layout) -> CommittedState:
    pointer = store.get_bytes_or_none(layout.last_checkpoint)
    if pointer is None:
        return CommittedState()
    try:
        version = int(orjson.loads(pointer)["version"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise CorruptStateError(f"{store.uri(layout.last_checkpoint)} does not parse: {exc}") from None
    key = layout.checkpoint(version)
    data = store.get_bytes_or_none(key)
    if data is None:
        raise CorruptStateError(
            f"{store.uri(layout.last_checkpoint)} names checkpoint {store.uri(key)}, which is missing")
    state = CommittedState.from_bytes(data, store.uri(key))
    if state.version != version:
        raise CorruptStateError(f"checkpoint {store.uri(key)} holds version {state.version}, not {version}")
    return state


def write_commit(store: S3Store, layout: Layout, record: CommitRecord) -> None:
    """Create commit `record.version` if absent; a commit already there with our token is ours."""
    key = layout.commit(record.version)
    if store.put_if_absent(key, record.to_bytes()) is not None:
        return
    existing = read_commit(store, layout, record.version)
    if existing is not None and existing.token == record.token:
        log.info("commit %s already holds our token: a retried PUT whose first response was lost", key)
        return
    if existing is not None and existing.batch_id == record.batch_id:
        raise CommitConflictError(
            f"batch {record.batch_id}: another promoter committed it as log version {record.version} "
            f"({store.uri(key)}) while this one ran; nothing is lost and nothing is left to do"
        )
    holder = f"batch {existing.batch_id}" if existing else "an unreadable record"
    raise CommitConflictError(
        f"batch {record.batch_id}: log version {record.version} ({store.uri(key)}) was committed by {holder} "
        f"while this promotion ran, so batch {record.batch_id} is not committed; it must be recomputed on top of "
        f"it: run `eventdedup recover`, then rerun batch {record.batch_id}"
    )


def write_checkpoint_if_due(store: S3Store, layout: Layout, state: CommittedState, interval: int) -> CommittedState:
    """Checkpoints are derived data: losing one costs a few extra GETs, never correctness. The
    markers of batches that left the state go first: the checkpoint is the first thing to omit them.
    Returns the state as a load from the new checkpoint would give it (no markers left to write)."""
    if state.version % interval:
        return state
    write_committed_markers(store, layout, state.left_since_checkpoint)
    store.put_bytes(layout.checkpoint(state.version), state.to_bytes(), content_type="application/gzip")
    store.put_bytes(layout.last_checkpoint, orjson.dumps({"version": state.version}), content_type="application/json")
    return replace(state, left_since_checkpoint={})


def write_committed_markers(store: S3Store, layout: Layout, versions: Mapping[str, int]) -> None:
    """Idempotent: a marker holds only what the log already says, and is never overwritten."""
    def write(item: tuple[str, int]) -> None:
        batch_id, version = item
        store.put_if_absent(layout.batch_committed_marker(batch_id),
                            orjson.dumps({"batch_id": batch_id, "version": version}))
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(write, sorted(versions.items())))
