"""The ordered commit log: the single source of truth for what is committed.

Modelled on Delta Lake's `_delta_log`: commit N is one JSON object written with
`put_object(IfNoneMatch="*")`, so at most one writer can ever create it, and it names commit
N-1's batch. A batch is visible, and its cache entries trusted, only once its commit exists.
Every `checkpoint_interval` commits the folded state is written as a checkpoint, so loading the
committed state costs a constant number of requests, not one per past batch.
"""
from __future__ import annotations

import gzip
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from eventdedup.errors import CommitConflictError, CorruptStateError, EventDedupError
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

    def to_bytes(self) -> bytes:
        return orjson.dumps(
            {
                "format": COMMIT_FORMAT,
                "version": self.version,
                "batch_id": self.batch_id,
                "previous_batch_id": self.previous_batch_id,
                "token": self.token,
                "as_of": self.as_of,
                "counts": dict(self.counts),
                "objects": [obj.to_json() for obj in self.objects],
                "cache_heads": dict(sorted(self.cache_heads.items())),
            },
            option=orjson.OPT_INDENT_2,
        )

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
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptStateError(f"commit record {name} does not parse: {exc}; the log cannot be trusted") from None


@dataclass(frozen=True)
class CommittedState:
    """The log folded up to `version`: which batches are committed, and each cache key's head."""

    version: int = 0
    batches: Mapping[str, int] = field(default_factory=dict)  # batch id -> commit version
    cache_heads: Mapping[str, str] = field(default_factory=dict)
    last_batch_id: str | None = None

    def apply(self, record: CommitRecord, name: str) -> CommittedState:
        if record.version != self.version + 1 or record.previous_batch_id != self.last_batch_id:
            raise CorruptStateError(
                f"commit record {name} (version {record.version}, after {record.previous_batch_id!r}) does not "
                f"follow version {self.version} ({self.last_batch_id!r}); the log is broken"
            )
        if record.batch_id in self.batches:
            raise CorruptStateError(f"commit record {name} commits batch {record.batch_id} a second time")
        return CommittedState(
            version=record.version,
            batches={**self.batches, record.batch_id: record.version},
            cache_heads={**self.cache_heads, **record.cache_heads},
            last_batch_id=record.batch_id,
        )

    def to_bytes(self) -> bytes:
        doc = {"version": self.version, "batches": dict(self.batches),
               "cache_heads": dict(self.cache_heads), "last_batch_id": self.last_batch_id}
        return gzip.compress(orjson.dumps(doc), mtime=0)

    @classmethod
    def from_bytes(cls, data: bytes, name: str) -> CommittedState:
        try:
            doc = orjson.loads(gzip.decompress(data))
            return cls(int(doc["version"]), {str(k): int(v) for k, v in doc["batches"].items()},
                       {str(k): str(v) for k, v in doc["cache_heads"].items()}, doc["last_batch_id"])
        except (OSError, EOFError, orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise CorruptStateError(f"checkpoint {name} does not parse: {exc}") from None


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


def batch_record(store: S3Store, layout: Layout, state: CommittedState, batch_id: str) -> CommitRecord:
    """The commit record of a committed batch; refuses a batch that is not committed."""
    version = state.batches.get(batch_id)
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


def write_checkpoint_if_due(store: S3Store, layout: Layout, state: CommittedState, interval: int) -> bool:
    """Checkpoints are derived data: losing one costs a few extra GETs, never correctness."""
    if state.version % interval:
        return False
    store.put_bytes(layout.checkpoint(state.version), state.to_bytes(), content_type="application/gzip")
    store.put_bytes(layout.last_checkpoint, orjson.dumps({"version": state.version}), content_type="application/json")
    return True
