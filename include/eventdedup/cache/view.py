"""What a batch can see of one cache key's committed history, and the lookups it makes there."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from eventdedup.cache.segment import CacheRun
from eventdedup.sorting import sorted_bounds

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
    """Committed runs visible to a batch, of one bucket's cache keys in any hours, in commit order.

    Each run's digests are sorted when written, so a lookup binary-searches the batch's few
    queries in every run instead of sorting the (much larger) history: the cost of a cache key
    grows with the log of its history, not with its size.
    """

    runs: tuple[CacheRun, ...]
    hours: tuple[int, ...] = ()  # the hour whose segment holds each run (hours since the epoch)

    @classmethod
    def empty(cls) -> CacheView:
        return cls(())

    @classmethod
    def from_runs(cls, runs: Sequence[CacheRun], visible_owners: Mapping[str, int], hour: int = 0) -> CacheView:
        """The runs of one segment the batch may see."""
        return cls.from_hours({hour: runs}, visible_owners)

    @classmethod
    def from_hours(cls, runs_by_hour: Mapping[int, Sequence[CacheRun]], visible_owners: Mapping[str, int]) -> CacheView:
        """Keep only runs of the batches the one being computed sees (owner -> commit version:
        committed before it, arrived within its window; never a rerun's own earlier claims), in
        commit order across hours, so "earliest" and "latest" holder mean what the log says."""
        kept = [(visible_owners[run.owner], hour, run) for hour, runs in runs_by_hour.items() for run in runs
                if run.owner in visible_owners and len(run)]
        kept.sort(key=lambda item: (item[0], item[1]))
        return cls(tuple(run for _, _, run in kept), tuple(hour for _, hour, _ in kept))

    @property
    def owners(self) -> tuple[str, ...]:
        return tuple(run.owner for run in self.runs)

    def __len__(self) -> int:
        return sum(len(run) for run in self.runs)

    def lookup(self, digests: npt.NDArray[np.bytes_], fingerprints: npt.NDArray[np.uint64],
               queries_by_hour: Mapping[int, npt.NDArray[np.intp]] | None = None) -> CacheLookup:
        """Where each queried pair and key is held. `queries_by_hour` (hour -> query indexes)
        limits a run to the queries whose id may be in its hour (its own hour, or one an id guard
        names): a batch's ids are searched in a few hours' runs, not in every hour it loaded."""
        count = len(digests)
        pair_owner, key_first, key_last = (np.full(count, -1, np.int32) for _ in range(3))
        fingerprints = fingerprints.astype(np.uint64)
        everything = np.arange(count)
        for index, run in enumerate(self.runs):
            queries = everything if queries_by_hour is None else queries_by_hour.get(self.hours[index])
            if queries is None or not len(queries):
                continue
            wanted = digests[queries]
            low, high = sorted_bounds(run.digests, wanted, run.first_words)
            has_key = queries[high > low]
            key_first[has_key[key_first[has_key] < 0]] = index
            key_last[has_key] = index
            pair = queries[_pair_in_run(run, low, high, fingerprints[queries])]
            pair_owner[pair[pair_owner[pair] < 0]] = index
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
