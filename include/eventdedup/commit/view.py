"""The committed view: what readers see through the commit log.

Every commit's objects, except those of batches a later commit retracted (eventdedup.ops.retract).
Their objects stay where they are (a commit still names them) but belong to no view: readers that
go through the log or the per-batch load manifests never see them again. The load manifests are
part of the view, derived from the commit records and written only after a commit exists
(`publish_load_manifests`); a retraction empties its targets'.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import orjson

from eventdedup.commit.changes import Retraction
from eventdedup.commit.log import committed_record, load_committed_state
from eventdedup.commit.records import CommitRecord, PromotedObject
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.s3store import ObjectInfo, S3Store


def committed_records(store: S3Store, layout: Layout) -> Iterator[CommitRecord]:
    """Every commit record in log order, retractions included, retracted batches left out."""
    state = load_committed_state(store, layout)
    for version in range(1, state.version + 1):
        record = committed_record(store, layout, version)
        if record.batch_id not in state.retracted:
            yield record


def committed_objects(store: S3Store, layout: Layout, kind: str) -> Iterator[PromotedObject]:
    """The objects of one kind (data, audit, quarantine) of every batch in the committed view."""
    for record in committed_records(store, layout):
        yield from (obj for obj in record.objects if obj.kind == kind)


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


def publish_load_manifests(store: S3Store, layout: Layout, record: CommitRecord,
                           is_retracted: Callable[[str], bool]) -> None:
    """Make the load manifests agree with a commit, after it exists (before it, a loader triggered by
    the manifest's PUT would load a batch that may never commit, or lose its commit to another):
    a batch's manifest lists its data files, unless the batch is retracted; a retraction empties
    its targets'. Idempotent: the promotion, `recover`, a retried promotion or retraction may each
    run it. A batch's manifest is checked again after its write (`is_retracted` reads the log as
    it is then): a retraction committed meanwhile empties it after its own commit, or is seen here."""
    if isinstance(record.change, Retraction):
        for batch_id in record.change.retracts:
            store.put_bytes(layout.redshift_manifest(batch_id), EMPTY_LOAD_MANIFEST, content_type="application/json")
        return
    if record.is_operation or is_retracted(record.batch_id):
        return
    key = layout.redshift_manifest(record.batch_id)
    store.put_bytes(key, load_manifest_bytes(store, record), content_type="application/json")
    if is_retracted(record.batch_id):
        store.put_bytes(key, EMPTY_LOAD_MANIFEST, content_type="application/json")
