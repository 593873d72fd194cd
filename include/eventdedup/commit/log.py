"""The commit log on S3: reading and writing commit records, checkpoints and committed markers.

The log is the single source of truth for what is committed: commit N is created with
`put_object(IfNoneMatch="*")` (eventdedup.commit.records holds its format), and the state it
folds to (eventdedup.commit.state) is checkpointed every `checkpoint_interval` commits, so loading
the committed state costs a constant number of requests, not one per past batch. A batch that
has left the folded state is still known to be committed: before the checkpoint that first omits
it is written, a marker beside its manifest records its version.
"""
from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime

import orjson
from botocore.exceptions import ClientError

from eventdedup.commit.ledger import write_part
from eventdedup.commit.records import CommitRecord
from eventdedup.commit.state import CommittedState
from eventdedup.errors import CommitConflictError, CorruptStateError, EventDedupError
from eventdedup.inputs.manifest import load_batch_manifest_or_none
from eventdedup.layout import Layout
from eventdedup.s3store import ObjectInfo, S3Store, is_not_found

log = logging.getLogger(__name__)


def read_commit(store: S3Store, layout: Layout, version: int) -> CommitRecord | None:
    key = layout.commit(version)
    data = store.get_immutable_or_none(key)  # a commit is created once and never changed
    return None if data is None else CommitRecord.from_bytes(data, store.uri(key))


def committed_record(store: S3Store, layout: Layout, version: int) -> CommitRecord:
    """Commit `version` of a folded log, which must exist: a gap means the log is broken."""
    record = read_commit(store, layout, version)
    if record is None:
        raise CorruptStateError(f"commit {store.uri(layout.commit(version))} is part of the folded log but missing; "
                                "the log cannot be trusted")
    return record


_AS_OF = re.compile(rb'"as_of": ?"([^"]+)"')
_RECORD_HEAD_BYTES = 2048


def commit_as_of(store: S3Store, layout: Layout, version: int) -> datetime:
    """Commit `version`'s as_of, from the head of its record (the field is among its first few
    hundred bytes, written in field order): one small ranged GET where the whole record names
    hundreds of objects. A record whose head does not hold them is read whole."""
    head = store.get_bytes(layout.commit(version), byte_range=(0, _RECORD_HEAD_BYTES))
    version_at = head.find(b'"version": %d,' % version)
    found = _AS_OF.search(head) if version_at >= 0 else None
    if found is not None and found.start() > version_at:
        return datetime.fromisoformat(found.group(1).decode())
    return datetime.fromisoformat(committed_record(store, layout, version).as_of)


def committed_version(store: S3Store, layout: Layout, state: CommittedState, batch_id: str) -> int | None:
    """The log version that committed `batch_id`, or None if it is not committed.

    The state holds every batch committed after `left_through_version`, and every retracted one
    (never committed again: None). A batch that left the state has a marker (one GET, made only
    when some batch has left). The marker is a convenience, not the truth: where it is missing,
    the batch's manifest says at which version it was staged, and a commit of it can only be a
    later one; if that is at or after `left_through_version`, the state would hold it, else the
    log from there is read for it (fsck names the missing marker; the answer is kept for the
    process, per log version). A batch never staged was never committed; one staged by a release
    that did not record the version is judged by its marker alone."""
    version = state.batches.get(batch_id)
    if version is None:
        version = state.left_since_checkpoint.get(batch_id)
    if version is not None or not state.left_through_version or batch_id in state.retracted:
        return version
    marker = _marker_version(store, layout, batch_id)
    if marker is not None:
        return marker
    manifest = load_batch_manifest_or_none(store, layout, batch_id)
    if manifest is None or manifest.staged_at_version is None:
        return None
    if manifest.staged_at_version >= state.left_through_version:
        return None
    return _version_in_log(store, layout, batch_id, manifest.staged_at_version, state.left_through_version)


_found_in_log: dict[tuple[str, str, str, int, int], int | None] = {}


def _version_in_log(store: S3Store, layout: Layout, batch_id: str, after: int, through: int) -> int | None:
    """The version in (after, through] that committed `batch_id`, read from the log: only for a
    batch whose marker is missing, staged before the last batch that left the state."""
    key = (store.bucket, layout.settings.commit_log_prefix, batch_id, after, through)
    if key not in _found_in_log:
        found = next((candidate for candidate in range(after + 1, through + 1)
                      if committed_record(store, layout, candidate).batch_id == batch_id), None)
        if found is not None:
            log.warning("batch %s is committed at log version %d but its marker %s is missing: found in the log "
                        "(fsck names it)", batch_id, found, store.uri(layout.batch_committed_marker(batch_id)))
        _found_in_log[key] = found
    return _found_in_log[key]


def _marker_version(store: S3Store, layout: Layout, batch_id: str) -> int | None:
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


@dataclass(frozen=True)
class _Loaded:
    """The newest state this process folded from one checkpoint: the checkpoint and the newest
    commit folded after it (None: none), as listed or read, with their ETags."""

    checkpoint: ObjectInfo
    newest_commit: ObjectInfo | None
    state: CommittedState

    def still_true(self, store: S3Store, checkpoint: str) -> bool:
        """Whether the log holds what was folded: the pointer names the same checkpoint, and it
        and the newest commit folded are the objects read (a HEAD each). A log remade under the
        same name differs in its commits' tokens even where its checkpoint has the same bytes;
        where it has no commit after the checkpoint, the same checkpoint is the same state."""
        if self.checkpoint.key != checkpoint:
            return False
        return all((found := store.head(obj.key)) is not None and found.etag == obj.etag
                   for obj in (self.checkpoint, self.newest_commit) if obj is not None)


_LOADED: dict[str, _Loaded] = {}  # endpoint and the log's location -> what this process last loaded of it
_LOADED_LOCK = threading.Lock()


def forget_loaded_states() -> None:
    """Drop what this process kept (a benchmark timing loads from scratch)."""
    with _LOADED_LOCK:
        _LOADED.clear()


def load_committed_state(store: S3Store, layout: Layout, fresh: bool = False) -> CommittedState:
    """Latest checkpoint plus the commits after it: a GET, a GET, a LIST and at most a few GETs.

    A process loads a state version once: what it folded is kept, and a later load that finds
    the log still holding it (`_Loaded.still_true`) folds only the commits after it. The state
    is what a load from that checkpoint gives, markers and ledger parts still to write included;
    commits are immutable, so a fold once made stays true. Within one batch (`store.reads`) the
    state an earlier step held is taken as it is and only the commits listed after it are folded:
    one LIST, the protocol's look at whether the log moved on. `fresh`: read it all again (a
    check that the log itself still folds)."""
    where = f"{store.endpoint} {store.uri(layout.settings.commit_log_prefix)}"
    held = None if fresh else _held_state(store, where)
    if held is not None:
        state, _ = _fold_commits_after(store, layout, held)
        return hold_state(store, layout, state)
    checkpoint = _checkpoint_named(store, layout)
    with _LOADED_LOCK:
        loaded = None if fresh else _LOADED.get(where)
    if loaded is not None and checkpoint is not None and loaded.still_true(store, checkpoint[0]):
        state, newest = loaded.state, loaded.newest_commit
    else:
        (state, read), newest = _load_checkpoint(store, layout, checkpoint), None
        loaded = None if read is None else _Loaded(read, None, state)
    state, folded = _fold_commits_after(store, layout, state)
    if loaded is not None:
        with _LOADED_LOCK:
            _LOADED[where] = _Loaded(loaded.checkpoint, folded or newest, state)
    return hold_state(store, layout, state)


def _held_state(store: S3Store, where: str) -> CommittedState | None:
    held = None if store.reads is None else store.reads.held(f"committed state {where}")
    return held if isinstance(held, CommittedState) else None


def hold_state(store: S3Store, layout: Layout, state: CommittedState) -> CommittedState:
    """Hand the folded state to the batch's later steps (a promotion holds the state its commit
    made); without `store.reads`, nothing is held."""
    if store.reads is not None:
        held = _held_state(store, f"{store.endpoint} {store.uri(layout.settings.commit_log_prefix)}")
        if held is None or held.version <= state.version:
            store.reads.hold(f"committed state {store.endpoint} {store.uri(layout.settings.commit_log_prefix)}",
                             state)
    return state


def _fold_commits_after(store: S3Store, layout: Layout,
                        state: CommittedState) -> tuple[CommittedState, ObjectInfo | None]:
    """The state with every commit listed after its version, and the newest of them (None: none)."""
    start_after = layout.commit(state.version) if state.version else None
    newest = None
    for item in store.list(layout.settings.commit_log_prefix, start_after=start_after):
        version = layout.version_of_commit_key(item.key)
        if version is None:
            continue
        record = read_commit(store, layout, version)
        if record is None:
            raise CorruptStateError(f"commit {store.uri(item.key)} was listed but cannot be read")
        if record.version != version:
            raise CorruptStateError(f"commit {store.uri(item.key)} claims version {record.version}")
        state, newest = state.apply(record, store.uri(item.key)), item
    return state, newest


def _checkpoint_named(store: S3Store, layout: Layout) -> tuple[str, int] | None:
    """The key and version of the checkpoint the pointer names; None before the first one."""
    pointer = store.get_bytes_or_none(layout.last_checkpoint)
    if pointer is None:
        return None
    try:
        version = int(orjson.loads(pointer)["version"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise CorruptStateError(f"{store.uri(layout.last_checkpoint)} does not parse: {exc}") from None
    return layout.checkpoint(version), version


def _load_checkpoint(store: S3Store, layout: Layout,
                     named: tuple[str, int] | None) -> tuple[CommittedState, ObjectInfo | None]:
    """The state a checkpoint holds (empty without one), and the checkpoint as read."""
    if named is None:
        return CommittedState(), None
    key, version = named
    try:
        read = store.get_versioned(key)
    except ClientError as exc:
        if is_not_found(exc):
            raise CorruptStateError(f"{store.uri(layout.last_checkpoint)} names checkpoint {store.uri(key)}, "
                                    "which is missing") from None
        raise
    assert read is not None  # an unconditional GET answers or raises
    data, etag = read
    state = CommittedState.from_bytes(data, store.uri(key))
    if state.version != version:
        raise CorruptStateError(f"checkpoint {store.uri(key)} holds version {state.version}, not {version}")
    return state, ObjectInfo(key, len(data), etag)


def write_commit(store: S3Store, layout: Layout, record: CommitRecord) -> None:
    """Create commit `record.version` if absent; a commit already there with our token is ours."""
    key = layout.commit(record.version)
    data = record.to_bytes()
    if store.put_if_absent(key, data) is not None:
        store.wrote_immutable(key, data)
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


def checkpoint_due(version: int, interval: int) -> bool:
    """Whether commit `version` is followed by a checkpoint (of the state, and of the view)."""
    return version % interval == 0


def write_checkpoint_if_due(store: S3Store, layout: Layout, state: CommittedState, interval: int) -> CommittedState:
    """Checkpoints are derived data: losing one costs a few extra GETs, never correctness. The
    markers of batches that left the state go first: the checkpoint is the first thing to omit them.
    Returns the state as a load from the new checkpoint would give it (no markers left to write)."""
    if not checkpoint_due(state.version, interval):
        return state
    write_committed_markers(store, layout, state.left_since_checkpoint)
    state = replace(state, ledger=write_part(store, layout, state.ledger, state.version))
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
