"""A cache key's head segment: the one object that holds the key's whole committed history.

Copy-forward: a batch that adds entries to a key writes a new head holding every run it could
see plus its own, so one GET loads a key's history whatever the number of past batches, and
every older segment of the key is garbage once the new head is committed.
"""
from __future__ import annotations

from collections.abc import Collection

from eventdedup.cache.local_copies import LocalCopies
from eventdedup.cache.segment import CacheRun, decode_segment, encode_segment
from eventdedup.errors import CorruptStateError
from eventdedup.s3store import S3Store


def load_head_runs(store: S3Store, head_key: str | None, copies: LocalCopies | None = None) -> list[CacheRun]:
    """Every run of the key's committed head; none when the key has no head yet. A head the log
    names but S3 does not have halts the batch: read as empty, it would let duplicates through.
    `copies`: read through executor-local copies (eventdedup.cache.local_copies)."""
    if head_key is None:
        return []
    data = store.get_bytes_or_none(head_key) if copies is None else copies.get_or_none(store, head_key)
    if data is None:
        raise CorruptStateError(f"cache segment {store.uri(head_key)} is named by the commit log but missing; "
                                "reading it as empty would let duplicates through")
    return decode_segment(data, store.uri(head_key))


def copy_forward_segment(runs: list[CacheRun], kept_owners: Collection[str], own_run: CacheRun) -> bytes:
    """The key's next head: the runs of batches still in the log's state and committed before this
    one, then its own. Runs of batches that left the state (arrived before the horizon: nobody
    sees them any more), a rerun's own earlier claim and later batches' runs are never copied."""
    return encode_segment([run for run in runs if run.owner in kept_owners] + [own_run])
