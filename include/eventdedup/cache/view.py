"""What a batch can see of one cache key's committed history, and the lookups it makes there."""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from eventdedup.cache.segment import CacheRun

IndexArray = npt.NDArray[np.int32]


@dataclass(frozen=True)
class CacheLookup:
    """Per queried (key, fingerprint): whether the pair and the key are cached, and by which runs
    (indexes into CacheView.owners; -1 when absent)."""

    pair_owner: IndexArray  # the earliest run holding the pair
    key_first: IndexArray  # the earliest run holding the key
    key_last: IndexArray  # the latest run holding the key (the current version)

    @property
    def pair_hit(self) -> npt.NDArray[np.bool_]:
        return self.pair_owner >= 0

    @property
    def key_hit(self) -> npt.NDArray[np.bool_]:
        return self.key_first >= 0


@dataclass(frozen=True)
class CacheView:
    """Committed runs of one cache key visible to a batch, in commit order.

    Each run's digests are sorted when written, so a lookup binary-searches the batch's few
    queries in every run instead of sorting the (much larger) history: the cost of a cache key
    grows with the log of its history, not with its size.
    """

    runs: tuple[CacheRun, ...]

    @classmethod
    def empty(cls) -> CacheView:
        return cls(())

    @classmethod
    def from_runs(cls, runs: Sequence[CacheRun], hidden_owners: Collection[str]) -> CacheView:
        """Keep only runs of batches committed before the one being computed: a rerun must not
        see its own earlier claims, nor claims made by batches committed after it (`hidden_owners`;
        a committed head holds runs of committed batches only)."""
        return cls(tuple(run for run in runs if run.owner not in hidden_owners and len(run)))

    @property
    def owners(self) -> tuple[str, ...]:
        return tuple(run.owner for run in self.runs)

    def __len__(self) -> int:
        return sum(len(run) for run in self.runs)

    def lookup(self, digests: npt.NDArray[np.bytes_], fingerprints: npt.NDArray[np.uint64]) -> CacheLookup:
        count = len(digests)
        pair_owner, key_first, key_last = (np.full(count, -1, np.int32) for _ in range(3))
        fingerprints = fingerprints.astype(np.uint64)
        for index, run in enumerate(self.runs):
            low = np.searchsorted(run.digests, digests, side="left")
            high = np.searchsorted(run.digests, digests, side="right")
            has_key = high > low
            key_first[has_key & (key_first < 0)] = index
            key_last[has_key] = index
            pair_owner[_pair_in_run(run, low, high, fingerprints) & (pair_owner < 0)] = index
        return CacheLookup(pair_owner, key_first, key_last)


def _pair_in_run(run: CacheRun, low: npt.NDArray[np.intp], high: npt.NDArray[np.intp],
                 fingerprints: npt.NDArray[np.uint64]) -> npt.NDArray[np.bool_]:
    """Whether each query's fingerprint is among its key's entries in the run (usually 0 or 1)."""
    width = high - low
    found = np.zeros(len(low), bool)
    single = np.flatnonzero(width == 1)
    found[single] = run.fingerprints[low[single]] == fingerprints[single]
    for i in np.flatnonzero(width > 1).tolist():  # a key emitted with several payloads (renamed copies)
        found[i] = bool((run.fingerprints[low[i]:high[i]] == fingerprints[i]).any())
    return found
