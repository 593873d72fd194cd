"""A cache key's committed history: its chain of segments, a head building on older objects.

A batch that adds entries to a key does not rewrite the key's history: it writes one new object
that holds its own run merged with the key's newest, smallest objects, and names the older ones
as the bases it builds on (`StagedObject.builds_on`, the commit's `cache_bases`). The key's
history is then its chain: bases, oldest first, then the head (`CommittedState.chain`). Merging
follows the sizes (`ChainPolicy`, the way a log-structured merge tree keeps its levels):
a newer object merges into the one before it once it holds half as many bytes, small objects
always merge, and a chain never passes eight objects. So a key's chain stays a few objects
whose sizes fall geometrically, and what a batch writes to a key costs what it adds (each entry is
rewritten a logarithmic number of times over its life), not what the key holds: a straggler in a
30-hour-old hour writes a tail of kilobytes beside the hour's megabytes, and a key's big old base
is read by later batches in parts, or confirmed unchanged in an executor-local copy.

Every object in a chain is an ordinary segment (eventdedup.cache.segment); a reader takes the runs
of every object of the chain in order. Runs of batches that left the state, a rerun's own
earlier claim and later batches' runs are left out when objects merge (`merged_segment`); in
objects kept as bases they stay, and readers see only the runs of batches visible to them.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from types import ModuleType

from eventdedup.cache.local_copies import LocalCopies
from eventdedup.cache.segment import CacheRun, decode_segment, encode_segment
from eventdedup.errors import CorruptStateError
from eventdedup.s3store import S3Store


@dataclass(frozen=True)
class ChainPolicy:
    """When a batch's new head merges the newest objects of a key's chain (the defaults ship;
    tests shrink them to make chains of a few entries)."""

    merge_ratio: int = 2  # a newer object merges into the one before it once it holds 1/merge_ratio of its bytes
    small_bytes: int = 96 << 10  # an object this small merges with the next anyway: each costs a request per read
    max_chain: int = 8  # objects in a key's chain, head included

    def objects_to_merge(self, sizes: Sequence[int], own_bytes: int) -> int:
        """How many of the newest objects of a key's chain (their sizes, oldest first) a batch's
        new head merges with its own run (of about `own_bytes`); the older ones stay as its bases."""
        keep, merged = len(sizes), own_bytes
        while keep and (keep >= self.max_chain or sizes[keep - 1] <= self.small_bytes
                        or merged * self.merge_ratio >= sizes[keep - 1]):
            keep -= 1
            merged += sizes[keep]
        return len(sizes) - keep


def missing_segment(uri: str) -> CorruptStateError:
    return CorruptStateError(f"cache segment {uri} is named by the commit log but missing; reading it as empty "
                             "would let duplicates through")


def load_segment_runs(store: S3Store, key: str, copies: LocalCopies | None = None,
                      etag: str | None = None) -> tuple[list[CacheRun], int]:
    """Every run of one committed segment, and its size in bytes. A segment the log names but S3
    does not have halts the batch: read as empty, it would let duplicates through. `copies`: read
    through executor-local copies (eventdedup.cache.local_copies), `etag` the log's for it."""
    data = store.get_bytes_or_none(key) if copies is None else copies.get_or_none(store, key, etag)
    if data is None:
        raise missing_segment(store.uri(key))
    return decode_segment(data, store.uri(key)), len(data)


def load_chain_runs(store: S3Store, chain: Sequence[str], copies: LocalCopies | None = None) -> list[CacheRun]:
    """Every run of a key's chain (`CommittedState.chain`), oldest object first; none when empty."""
    return [run for key in chain for run in load_segment_runs(store, key, copies)[0]]


def merged_segment(runs: list[CacheRun], kept_owners: Collection[str], own_run: CacheRun,
                   core: ModuleType | None = None) -> bytes:
    """A key's next head from the runs of the objects it merges: those of batches still in the
    log's state and committed before this one, then its own. Runs of batches that left the state
    (arrived before the horizon: nobody sees them any more), a rerun's own earlier claim and later
    batches' runs are never copied."""
    return encode_segment([run for run in runs if run.owner in kept_owners] + [own_run], core)
