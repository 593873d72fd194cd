"""The committed view: what readers see through the commit log.

Every commit's objects, except those of batches a later commit retracted (eventdedup.ops.retract).
Their objects stay where they are (a commit still names them) but belong to no view: readers that
go through the log or the per-batch load manifests never see them again (their load manifests
are emptied once the retraction is committed; the only objects a commit names that ever change).
"""
from __future__ import annotations

from collections.abc import Iterator

import orjson

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


def withdraw_load_manifests(store: S3Store, layout: Layout, retraction: CommitRecord) -> None:
    """Empty the Redshift load manifests of the batches a committed retraction retracts. Only
    after its commit (before, they are still in the view; an abandoned retraction must leave them
    whole); idempotent, so whoever finishes the retraction (its promotion, `recover`, a retried
    `retract`) may write them again."""
    for batch_id in retraction.retracts:
        store.put_bytes(layout.redshift_manifest(batch_id), EMPTY_LOAD_MANIFEST, content_type="application/json")
