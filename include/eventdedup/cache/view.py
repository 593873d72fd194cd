"""What a batch can see of one cache key's committed history, and the lookups it makes there."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

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
    # An ordered store's (`prefer` given): the order key of the preferred entry of the key in the
    # run key_first (the first kept version) and in the run key_last (the current one); null
    # where the key is absent or its entry holds none. None otherwise.
    first_order: pa.BinaryArray | None = None
    last_order: pa.BinaryArray | None = None

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
               queries_by_hour: Mapping[int, npt.NDArray[np.intp]] | None = None,
               prefer: str | None = None) -> CacheLookup:
        """Where each queried pair and key is held. `queries_by_hour` (hour -> query indexes)
        limits a run to the queries whose id may be in its hour (its own hour, or one an id guard
        names): a batch's ids are searched in a few hours' runs, not in every hour it loaded.
        `prefer` ("min" or "max", an ordered store's survivor): also the order keys of the key's
        first and current versions: each the preferred of that batch's entries of the key (a
        batch holds a key more than once only as renamed copies, perhaps in several hours)."""
        count = len(digests)
        pair_owner, key_first, key_last = (np.full(count, -1, np.int32) for _ in range(3))
        held_keys: list[tuple[int, npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.intp]]] = []
        fingerprints = fingerprints.astype(np.uint64)
        everything = np.arange(count)
        for index, run in enumerate(self.runs):
            queries = everything if queries_by_hour is None else queries_by_hour.get(self.hours[index])
            if queries is None or not len(queries):
                continue
            wanted = digests[queries]
            low, high = sorted_bounds(run.digests, wanted, run.first_words)
            held = high > low
            has_key = queries[held]
            if prefer is not None and len(has_key):
                held_keys.append((index, has_key, low[held], high[held]))
            key_first[has_key[key_first[has_key] < 0]] = index
            key_last[has_key] = index
            pair = queries[_pair_in_run(run, low, high, fingerprints[queries])]
            pair_owner[pair[pair_owner[pair] < 0]] = index
        if prefer is None:
            return CacheLookup(pair_owner, key_first, key_last)
        return CacheLookup(pair_owner, key_first, key_last, self._version_keys(held_keys, key_first, prefer),
                           self._version_keys(held_keys, key_last, prefer))

    def _version_keys(self, held_keys: Sequence[tuple[int, npt.NDArray[np.intp], npt.NDArray[np.intp],
                                                      npt.NDArray[np.intp]]],
                      version: IndexArray, prefer: str) -> pa.BinaryArray:
        """Per query, the preferred order key among the entries of its key that the batch owning
        run `version` (-1: none) holds in any run; null where there is none."""
        count = len(version)
        owner_codes = {owner: code for code, owner in enumerate(dict.fromkeys(self.owners))}
        run_owner = np.array([owner_codes[run.owner] for run in self.runs] + [-1], np.int64)
        queries_parts, keys_parts = [], []
        for index, queries, low, high in held_keys:
            mine = run_owner[index] == run_owner[version[queries]]
            if not mine.any() or self.runs[index].order_keys is None:
                continue
            entries = _preferred_entries(self.runs[index], low[mine], high[mine], prefer)
            queries_parts.append(queries[mine])
            keys = self.runs[index].order_keys
            assert keys is not None
            keys_parts.append(keys.take(pa.array(entries, pa.int64())))
        if not queries_parts:
            return pa.nulls(count, pa.binary())
        queries = np.concatenate(queries_parts)
        keys = pa.concat_arrays(keys_parts)
        candidates = np.bincount(queries, minlength=count)
        single = candidates[queries] == 1
        where = np.full(count, len(keys), np.int64)  # len(keys): the null appended below
        where[queries[single]] = np.flatnonzero(single)
        values = pa.concat_arrays([keys, pa.nulls(1, pa.binary())])
        chosen = values.take(pa.array(where, pa.int64()))
        several = np.flatnonzero(~single)
        if len(several):  # a batch's key in several hours' runs: rare, per query in Python
            best: dict[int, bytes | None] = {}
            for at in several.tolist():
                query, value = int(queries[at]), keys[at].as_py()
                best[query] = _preferred(best.get(query), value, prefer) if query in best else value
            mask = np.zeros(count, bool)
            mask[list(best)] = True
            ordered_best = [best[query] for query in sorted(best)]
            chosen = pc.replace_with_mask(chosen, pa.array(mask), pa.array(ordered_best, pa.binary()))
        return chosen


def _preferred(a: bytes | None, b: bytes | None, prefer: str) -> bytes | None:
    """The preferred of two order keys (None never wins)."""
    if a is None or b is None:
        return a if b is None else b
    return max(a, b) if prefer == "max" else min(a, b)


def _preferred_entries(run: CacheRun, low: npt.NDArray[np.intp], high: npt.NDArray[np.intp],
                       prefer: str) -> npt.NDArray[np.int64]:
    """Per held key, its entry in the run with the preferred order key (`prefer`: min or max; a key
    without one never wins): the entry itself where the run holds the key once, as it nearly
    always does."""
    entries = np.asarray(low, np.int64).copy()
    keys = run.order_keys
    if keys is None:
        return entries
    for i in np.flatnonzero(high - low > 1).tolist():
        values = keys[int(low[i]):int(high[i])].to_pylist()
        present = [(value, at) for at, value in enumerate(values) if value is not None]
        if present:
            chosen = max(present) if prefer == "max" else min(present)
            entries[i] = int(low[i]) + chosen[1]
    return entries


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
