"""The committed view: what readers see through the commit log.

Every commit's objects, except those of batches a later commit retracted (eventdedup.ops.retract),
and with each data file a column backfill replaced (eventdedup.ops.backfill_columns) seen as its
copy, still the batch's (and so still taken out with it by a retraction).
Their objects stay where they are (a commit still names them) but belong to no view: readers that
go through the log or the per-batch load manifests never see them again. The load manifests are
part of the view, derived from the commit records and written only after a commit exists
(`publish_load_manifests`); a retraction empties its targets'.
"""
from __future__ import annotations

import gzip
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import orjson
from botocore.exceptions import ClientError

from eventdedup import codec
from eventdedup.commit.changes import ColumnBackfill, Retraction
from eventdedup.commit.log import committed_record, load_committed_state
from eventdedup.commit.records import CommitRecord, PromotedObject
from eventdedup.commit.state import CommittedState
from eventdedup.errors import CorruptStateError, InconsistentStoreError
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.s3store import ObjectInfo, S3Store, is_changed_or_missing

log = logging.getLogger(__name__)
T = TypeVar("T")


def committed_objects(store: S3Store, layout: Layout, kind: str) -> Iterator[PromotedObject]:
    """The objects of one kind (data, audit, quarantine) of every batch in the committed view,
    in log order, read from the view's index (below)."""
    return (entry.promoted for entry in committed_entries(store, layout) if entry.promoted.kind == kind)


def dataset_objects(store: S3Store, layout: Layout, selector: InputSelector) -> list[ObjectInfo]:
    """The objects a populate batch reads (eventdedup.ops.populate). Under our own output prefix,
    the committed view's data files: a listing would also take files of batches that were
    retracted, or that lost their commit, and their events would become "seen" (and a reprocessed
    retracted input would come out as duplicates of itself). Anywhere else, every object under
    the prefix."""
    prefix = selector.input_prefix
    assert prefix is not None and selector.populate
    if not prefix.startswith(layout.settings.output_prefix):
        return list(store.list(prefix))
    return sorted((obj.info for obj in committed_objects(store, layout, "data") if obj.key.startswith(prefix)),
                  key=lambda info: info.key)


EMPTY_LOAD_MANIFEST = orjson.dumps({"entries": []})


def load_manifest_bytes(store: S3Store, record: CommitRecord) -> bytes:
    """A batch's Redshift COPY manifest: its data files at their final keys, as its commit names
    them (an operation's, or a batch that wrote no data file: no entry)."""
    entries = [{"url": store.uri(obj.key), "mandatory": True, "meta": {"content_length": obj.size}}
               for obj in record.objects if obj.kind == "data"]
    return orjson.dumps({"entries": entries}, option=orjson.OPT_INDENT_2)


def publish_load_manifests(store: S3Store, layout: Layout, record: CommitRecord, state: CommittedState) -> None:
    """Make the load manifests agree with a commit, after it exists (before it, a loader triggered by
    the manifest's PUT would load a batch that may never commit, or lose its commit to another):
    a batch's manifest lists its data files, unless the batch is retracted; a retraction empties
    its targets'. Idempotent: the promotion, `recover`, a retried promotion or retraction may each
    run it, with the log as the caller folded it (`state`).

    A retraction empties unconditionally, after its commit. A batch's full manifest never
    overwrites an empty one (only a retraction writes it, and a batch is never un-retracted):
    it is created where none exists (IfNoneMatch), or replaces, by ETag, one that holds other
    bytes (a manifest staged and copied before a commit that never came: docs/formats.md; or the
    bucket was copied from one of another name). Whatever order a batch's publishers and a
    retraction of it run in, the empty write is last, with no look at the log after the write that
    could fail."""
    if isinstance(record.change, Retraction):
        for batch_id in record.change.retracts:
            store.put_bytes(layout.redshift_manifest(batch_id), EMPTY_LOAD_MANIFEST, content_type="application/json")
        return
    if record.is_operation or record.batch_id in state.retracted:
        return
    key, body = layout.redshift_manifest(record.batch_id), load_manifest_bytes(store, record)
    for _ in range(_MANIFEST_ATTEMPTS):
        if store.put_if_absent(key, body) is not None:
            return
        found = store.head(key)
        if found is None:
            continue  # deleted meanwhile: create it
        try:
            existing = store.get_bytes(key, if_match=found.etag)
        except ClientError as exc:
            if is_changed_or_missing(exc):
                continue
            raise
        if existing in (body, EMPTY_LOAD_MANIFEST):
            return  # written by another publisher, or emptied by a retraction: either is final
        log.warning("load manifest %s holds %d bytes other than its commit's; replacing it", store.uri(key),
                    len(existing))
        if store.put_if_match(key, body, found.etag) is not None:
            return
    raise InconsistentStoreError(f"load manifest {store.uri(key)} kept changing while batch {record.batch_id}'s was "
                                 "written; run `eventdedup recover`")


_MANIFEST_ATTEMPTS = 3


# --- The view's index: readers start from it, not from version 1 --------------------------------
#
# With a checkpoint of the state (every `checkpoint_interval` commits) the promotion writes the
# view's objects in parts of VIEW_BLOCK consecutive versions each, and a view checkpoint naming
# every block's current part; the latest view checkpoint is the highest-numbered one. A reader
# loads it and its parts (one GET per VIEW_BLOCK commits of history), then the commits after it.
# A part is written again only while its block is open, or when a retraction takes a batch out
# of it, as a new object each time; writers never delete (two promotions' writers may overlap:
# neither can take the other's parts away). The maintenance DAG catches the index up where a
# promotion did not (it writes only when the last view checkpoint is near, so a promotion never
# reads a long stretch of log) and deletes view checkpoints older than the newest VIEW_BLOCK
# versions and the parts none of the rest names. Derived data, like the state's checkpoints: a
# reader or writer that meets a part gone starts from the log instead.

VIEW_BLOCK = 256
VIEW_KINDS = ("data", "audit", "quarantine")


@dataclass(frozen=True)
class ViewEntry:
    """One object of the committed view, with the commit that promoted it."""

    version: int
    batch_id: str
    promoted: PromotedObject


@dataclass(frozen=True)
class ViewPart:
    block: int
    entries: tuple[ViewEntry, ...]


@dataclass(frozen=True)
class ViewCheckpoint:
    version: int = 0
    parts: Mapping[str, str] = field(default_factory=dict)  # block number (as text) -> its part's key


def committed_entries(store: S3Store, layout: Layout, version: int | None = None) -> list[ViewEntry]:
    """The committed view in log order: the latest view checkpoint's parts, then every commit
    after it. Retracted batches' objects are left out. A part that has gone (a newer checkpoint
    replaced it while this reader read) sends the reader to the log itself. `version`: the view
    as it was at that commit of the log (the Delta table's projection replays it), not the latest."""
    head = load_committed_state(store, layout).version
    version = head if version is None else min(version, head)
    checkpoint = _latest_view_checkpoint(store, layout, version)
    try:
        return _view(store, layout, checkpoint, version)
    except _PartGone as gone:
        log.info("%s; reading the view from the log", gone)
        return _view(store, layout, ViewCheckpoint(), version)


def _view(store: S3Store, layout: Layout, checkpoint: ViewCheckpoint, version: int) -> list[ViewEntry]:
    blocks = _Blocks.replayed(store, layout, checkpoint, version)
    return [entry for block in sorted(set(blocks.loaded) | {int(b) for b in checkpoint.parts})
            for entry in blocks.entries(block)]


def write_view_checkpoint(store: S3Store, layout: Layout, version: int,
                          at_most_behind: int | None = VIEW_BLOCK) -> ViewCheckpoint | None:
    """The view as of commit `version`: the previous view checkpoint and the commits since; only
    the blocks they change are written again. None, writing nothing, when the previous view
    checkpoint is more than `at_most_behind` commits behind (a promotion: the maintenance DAG
    catches up, with None). A part gone under it: the view is built from the log."""
    previous = _latest_view_checkpoint(store, layout, version)
    if previous.version >= version:
        return previous
    if at_most_behind is not None and version - previous.version > at_most_behind:
        return None
    try:
        return _write_view_checkpoint(store, layout, previous, version)
    except _PartGone as gone:
        if at_most_behind is not None:
            return None
        log.warning("%s; the view is built again from the log", gone)
        return _write_view_checkpoint(store, layout, ViewCheckpoint(), version)


def _write_view_checkpoint(store: S3Store, layout: Layout, previous: ViewCheckpoint, version: int) -> ViewCheckpoint:
    blocks = _Blocks.replayed(store, layout, previous, version)
    parts = dict(previous.parts)
    for block in sorted(blocks.changed):
        key = layout.view_part(block, version)
        part = ViewPart(block, tuple(blocks.entries(block)))
        store.put_bytes(key, gzip.compress(codec.dumps(part), mtime=0), content_type="application/gzip")
        parts[str(block)] = key
    checkpoint = ViewCheckpoint(version, parts)
    store.put_bytes(layout.view_checkpoint(version), codec.dumps(checkpoint), content_type="application/json")
    return checkpoint


def maintain_view(store: S3Store, layout: Layout) -> ViewCheckpoint:
    """The maintenance DAG's step: the view checkpointed at the log's head, however far behind the
    last one is, then view checkpoints older than the newest VIEW_BLOCK versions deleted, and the
    parts none of the kept ones names (a reader still on a deleted one starts from the log)."""
    head = load_committed_state(store, layout).version
    latest = write_view_checkpoint(store, layout, head, at_most_behind=None) or ViewCheckpoint()
    listed = _view_checkpoints(store, layout)
    old = [name for version, name in listed if version < latest.version - VIEW_BLOCK]
    kept = [_read(ViewCheckpoint, store.get_bytes(name), store.uri(name)) for version, name in listed
            if version >= latest.version - VIEW_BLOCK]
    named = {key for checkpoint in [*kept, latest] for key in checkpoint.parts.values()}
    orphans = [item.key for item in store.list(layout.view_parts_prefix) if item.key not in named]
    store.delete_keys(old + orphans)
    log.info("view checkpoint at version %d; deleted %d older checkpoint(s) and %d part(s)", latest.version,
             len(old), len(orphans))
    return latest


class _Blocks:
    """The view's blocks as they are being read or written: parts loaded on first use."""

    def __init__(self, store: S3Store, checkpoint: ViewCheckpoint) -> None:
        self._store, self._parts = store, checkpoint.parts
        self.loaded: dict[int, list[ViewEntry]] = {}
        self.changed: set[int] = set()

    @classmethod
    def replayed(cls, store: S3Store, layout: Layout, checkpoint: ViewCheckpoint, version: int) -> _Blocks:
        """The blocks as of commit `version`: the checkpoint's, with every commit after it applied."""
        blocks = cls(store, checkpoint)
        for number in range(checkpoint.version + 1, version + 1):
            blocks.apply(committed_record(store, layout, number))
        return blocks

    def entries(self, block: int) -> list[ViewEntry]:
        if block not in self.loaded:
            key = self._parts.get(str(block))
            self.loaded[block] = [] if key is None else list(_load_part(self._store, key).entries)
        return self.loaded[block]

    def apply(self, record: CommitRecord) -> None:
        change = record.change
        if isinstance(change, Retraction):
            # A retraction names its batches' versions (an older one does not: then every block
            # known so far, docs/formats.md; only the first view checkpoint of a log ever meets one).
            blocks = ({(version - 1) // VIEW_BLOCK for version in change.retracted_versions}
                      if change.retracted_versions else set(self.loaded) | {int(b) for b in self._parts})
            gone = set(change.retracts)
            for block in blocks:
                kept = [entry for entry in self.entries(block) if entry.batch_id not in gone]
                if len(kept) != len(self.entries(block)):
                    self.loaded[block] = kept
                    self.changed.add(block)
        elif isinstance(change, ColumnBackfill):
            self._replace(record, change)
        elif not record.is_operation:
            block = (record.version - 1) // VIEW_BLOCK
            self.entries(block).extend(ViewEntry(record.version, record.batch_id, obj) for obj in record.objects
                                       if obj.kind in VIEW_KINDS)
            self.changed.add(block)


    def _replace(self, record: CommitRecord, change: ColumnBackfill) -> None:
        """Each replaced file's entry becomes its copy's, in place (its version and batch stay: the
        block that holds the batch's files holds the copy). A file not in the view is none of its
        (the gate commits a backfill only against the log head its files were read at)."""
        copies = {obj.key: obj for obj in record.objects}
        for replaced in change.replaced:
            block = (replaced.version - 1) // VIEW_BLOCK
            entries = self.entries(block)
            for position, entry in enumerate(entries):
                if entry.promoted.key == replaced.key:
                    entries[position] = ViewEntry(entry.version, entry.batch_id, copies[replaced.by])
                    self.changed.add(block)
                    break


def _latest_view_checkpoint(store: S3Store, layout: Layout, at_most: int) -> ViewCheckpoint:
    """The highest-numbered view checkpoint at or below `at_most` (a reader's state may be older
    than a checkpoint just written); none: the empty view at version 0."""
    for version, name in sorted(_view_checkpoints(store, layout), reverse=True):
        if version <= at_most:
            data = store.get_bytes_or_none(name)
            if data is not None:
                return _read(ViewCheckpoint, data, store.uri(name))
    return ViewCheckpoint()


def _view_checkpoints(store: S3Store, layout: Layout) -> list[tuple[int, str]]:
    """Every view checkpoint listed, (version, key)."""
    listed = ((layout.version_of_view_checkpoint_key(item.key), item.key)
              for item in store.list(layout.view_checkpoint_prefix))
    return [(version, key) for version, key in listed if version is not None]


class _PartGone(Exception):
    """A part a view checkpoint names is not there (a newer checkpoint has replaced it)."""


def _load_part(store: S3Store, key: str) -> ViewPart:
    data = store.get_bytes_or_none(key)
    if data is None:
        raise _PartGone(f"view part {store.uri(key)} is gone")
    try:
        return _read(ViewPart, gzip.decompress(data), store.uri(key))
    except (OSError, EOFError) as exc:
        raise CorruptStateError(f"view part {store.uri(key)} does not parse: {exc}") from None


def _read(kind: type[T], data: bytes, name: str) -> T:
    try:
        return codec.loads(kind, data)
    except codec.CodecError as exc:
        raise CorruptStateError(f"{name} does not parse: {exc}") from None
