"""Decide, for the events of one cache key, which copies survive, in what form, and why the others go.

Pure and vectorised: numpy over fixed-width keys, no per-row Python. Rows arrive in input order
(manifest object order, then line number) with a survivor priority per row (0 = preferred).

Terms (Snowplow's): rows with the same key and the same payload fingerprint are *natural*
duplicates, rows with the same key and different fingerprints *synthetic* duplicates. The cache
holds every (key, fingerprint) pair a committed batch emitted, with the batch (owner) that
emitted it, so both kinds are found across batches too. A rerun sees only runs of batches
committed before it, never its own claims.

Per row:
- its (key, fingerprint) was emitted by an earlier batch: cross-batch natural, dropped;
- its key was emitted earlier with another fingerprint: cross-batch synthetic, handled by the
  synthetic policy (rename, keep flagged, drop) -- or, in changelog mode, the preferred such
  copy is emitted as an update of the key;
- otherwise the survivor policy picks one copy per key; copies with its fingerprint are in-batch
  natural duplicates, the preferred copy of each other fingerprint an in-batch synthetic one.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from .cache_segment import DIGEST_DTYPE, CacheRun
from .keys import FINGERPRINT_BYTES, KEY_DIGEST_BYTES

PAIR_BYTES = KEY_DIGEST_BYTES + FINGERPRINT_BYTES
PAIR_DTYPE = np.dtype(f"S{PAIR_BYTES}")


class Outcome(IntEnum):
    KEPT = 0  # not a duplicate (or, in changelog mode, a newer version of a committed key)
    IN_BATCH_NATURAL = 1  # same key, same fingerprint as a copy emitted in this batch
    IN_BATCH_SYNTHETIC = 2  # same key, different fingerprint from the survivor in this batch
    CROSS_BATCH_NATURAL = 3  # same key and fingerprint emitted by an earlier committed batch
    CROSS_BATCH_SYNTHETIC = 4  # same key, different fingerprint, emitted by an earlier batch

    @property
    def reason(self) -> str:
        return self.name.lower()

    @property
    def is_in_batch(self) -> bool:
        return self in (Outcome.IN_BATCH_NATURAL, Outcome.IN_BATCH_SYNTHETIC)


class Action(IntEnum):
    EMIT = 0  # output under its own key (op = insert)
    DROP = 1  # not output; audited
    RENAME = 2  # synthetic = rename: output under a derived id, original id in original_event_id
    FLAG = 3  # synthetic = keep: output under its own key, flagged in duplicate_of
    UPDATE = 4  # changelog: output as op = update of the version an earlier batch holds

    @property
    def label(self) -> str:
        return {Action.DROP: "dropped", Action.RENAME: "renamed", Action.FLAG: "kept"}.get(self, self.name.lower())


_SYNTHETIC_ACTIONS = {"rename": Action.RENAME, "keep": Action.FLAG, "drop": Action.DROP}


@dataclass(frozen=True)
class DuplicatePolicy:
    """What happens to synthetic duplicates and whether a later batch may update a key."""

    synthetic: str = "rename"
    changelog: bool = False

    @property
    def synthetic_action(self) -> Action:
        return _SYNTHETIC_ACTIONS[self.synthetic]


def pair_bytes(digests: np.ndarray, fingerprints: np.ndarray) -> np.ndarray:
    """(key, fingerprint) as one fixed-width value, so pairs sort and match like keys do."""
    n = len(digests)
    buffer = np.empty((n, PAIR_BYTES), np.uint8)
    if n:
        buffer[:, :KEY_DIGEST_BYTES] = np.frombuffer(
            np.ascontiguousarray(digests, DIGEST_DTYPE).tobytes(), np.uint8).reshape(n, KEY_DIGEST_BYTES)
        buffer[:, KEY_DIGEST_BYTES:] = np.ascontiguousarray(
            fingerprints.astype(">u8")).view(np.uint8).reshape(n, FINGERPRINT_BYTES)
    return buffer.view(PAIR_DTYPE).reshape(n)


@dataclass(frozen=True)
class CacheLookup:
    """Per queried (key, fingerprint): whether the pair and the key are cached, and by which runs
    (indexes into CacheView.owners; -1 when absent)."""

    pair_owner: np.ndarray  # int32: the earliest run holding the pair
    key_first: np.ndarray  # int32: the earliest run holding the key
    key_last: np.ndarray  # int32: the latest run holding the key (the current version)

    @property
    def pair_hit(self) -> np.ndarray:
        return self.pair_owner >= 0

    @property
    def key_hit(self) -> np.ndarray:
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
    def from_runs(cls, runs: Sequence[CacheRun], visible_owners: Collection[str]) -> CacheView:
        """Keep only runs of batches committed before the one being computed: a rerun must not
        see its own earlier claims, nor claims made by batches committed after it."""
        return cls(tuple(run for run in runs if run.owner in visible_owners and len(run)))

    @property
    def owners(self) -> tuple[str, ...]:
        return tuple(run.owner for run in self.runs)

    def __len__(self) -> int:
        return sum(len(run) for run in self.runs)

    def lookup(self, digests: np.ndarray, fingerprints: np.ndarray) -> CacheLookup:
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


def _pair_in_run(run: CacheRun, low: np.ndarray, high: np.ndarray, fingerprints: np.ndarray) -> np.ndarray:
    """Whether each query's fingerprint is among its key's entries in the run (usually 0 or 1)."""
    width = high - low
    found = np.zeros(len(low), bool)
    single = np.flatnonzero(width == 1)
    found[single] = run.fingerprints[low[single]] == fingerprints[single]
    for i in np.flatnonzero(width > 1).tolist():  # a key emitted with several payloads (renamed copies)
        found[i] = bool((run.fingerprints[low[i]:high[i]] == fingerprints[i]).any())
    return found


@dataclass(frozen=True)
class KeyDecision:
    outcomes: np.ndarray  # Outcome per row (uint8)
    actions: np.ndarray  # Action per row (uint8)
    # Per row, the batch holding the kept copy (for an update: the superseded version), as an
    # index into owners; len(owners) stands for the batch being computed.
    holder: np.ndarray
    owners: tuple[str, ...]
    batch_id: str

    @property
    def emitted_mask(self) -> np.ndarray:
        return self.actions != Action.DROP

    def holder_batch(self, row: int) -> str:
        index = int(self.holder[row])
        return self.batch_id if index == len(self.owners) else self.owners[index]


def decide_key_group(digests: np.ndarray, fingerprints: np.ndarray, priorities: np.ndarray, cache: CacheView,
                     batch_id: str, policy: DuplicatePolicy = DuplicatePolicy()) -> KeyDecision:
    """Classify every row; `digests` (S16), `fingerprints` (uint64), `priorities` in input order."""
    n = len(digests)
    pairs = pair_bytes(digests, fingerprints)
    _, pair_of_row = np.unique(pairs, return_inverse=True)
    pair_of_row = pair_of_row.reshape(-1)
    # The representative of each distinct pair is its preferred copy.
    by_pair = np.lexsort((priorities, pair_of_row))
    pair_rep = by_pair[np.r_[True, pair_of_row[by_pair][1:] != pair_of_row[by_pair][:-1]]] if n else by_pair
    key_of_pair = np.unique(digests[pair_rep], return_inverse=True)[1].reshape(-1)
    found = cache.lookup(digests[pair_rep], fingerprints[pair_rep])
    best = _best_new_pair_per_key(key_of_pair, priorities[pair_rep], found.pair_hit)
    rep, rest = _classify_pairs(found.pair_hit, found.pair_owner, found.key_hit, found.key_first, found.key_last,
                                best, policy, this_batch=len(cache.owners))
    is_rep = pair_rep[pair_of_row] == np.arange(n)
    outcomes = np.where(is_rep, rep.outcome[pair_of_row], rest.outcome[pair_of_row]).astype(np.uint8)
    actions = np.where(is_rep, rep.action[pair_of_row], rest.action[pair_of_row]).astype(np.uint8)
    holder = np.where(is_rep, rep.holder[pair_of_row], rest.holder[pair_of_row]).astype(np.int32)
    return KeyDecision(outcomes, actions, holder, cache.owners, batch_id)


def _best_new_pair_per_key(key_of_pair: np.ndarray, rep_priority: np.ndarray, pair_hit: np.ndarray) -> np.ndarray:
    """Mask of pairs that are, for their key, the preferred pair not already in the cache."""
    best = np.zeros(len(key_of_pair), bool)
    candidates = np.flatnonzero(~pair_hit)
    if len(candidates):
        ordered = candidates[np.lexsort((rep_priority[candidates], key_of_pair[candidates]))]
        keys = key_of_pair[ordered]
        best[ordered[np.r_[True, keys[1:] != keys[:-1]]]] = True
    return best


@dataclass
class _PairFate:
    outcome: np.ndarray
    action: np.ndarray
    holder: np.ndarray

    @classmethod
    def new(cls, size: int, this_batch: int) -> _PairFate:
        return cls(np.full(size, Outcome.KEPT, np.uint8), np.full(size, Action.EMIT, np.uint8),
                   np.full(size, this_batch, np.int32))

    def set(self, mask: np.ndarray, outcome: Outcome, action: Action, holder: np.ndarray | int) -> None:
        self.outcome[mask] = outcome
        self.action[mask] = action
        self.holder[mask] = holder[mask] if isinstance(holder, np.ndarray) else holder


def _classify_pairs(pair_hit: np.ndarray, pair_owner: np.ndarray, key_hit: np.ndarray, key_first: np.ndarray,
                    key_last: np.ndarray, best: np.ndarray, policy: DuplicatePolicy,
                    this_batch: int) -> tuple[_PairFate, _PairFate]:
    """Fate of each pair's representative and of its other copies."""
    size = len(pair_hit)
    rep, rest = _PairFate.new(size, this_batch), _PairFate.new(size, this_batch)
    synthetic = policy.synthetic_action
    # Copies of an emitted pair are natural duplicates of it; copies of a dropped synthetic
    # pair share its reason, since the copy they duplicate was not emitted either.
    rest_natural_in_batch = synthetic is not Action.DROP

    rest.set(np.ones(size, bool), Outcome.IN_BATCH_NATURAL, Action.DROP, this_batch)
    seen = pair_hit
    rep.set(seen, Outcome.CROSS_BATCH_NATURAL, Action.DROP, pair_owner)
    rest.set(seen, Outcome.CROSS_BATCH_NATURAL, Action.DROP, pair_owner)

    new_version = ~pair_hit & key_hit
    if policy.changelog:
        rep.set(new_version & best, Outcome.KEPT, Action.UPDATE, key_last)
        superseded = ~pair_hit & ~best
        rep.set(superseded, Outcome.IN_BATCH_SYNTHETIC, Action.DROP, this_batch)
        rest.set(superseded, Outcome.IN_BATCH_SYNTHETIC, Action.DROP, this_batch)
        return rep, rest

    rep.set(new_version, Outcome.CROSS_BATCH_SYNTHETIC, synthetic, key_first)
    if not rest_natural_in_batch:
        rest.set(new_version, Outcome.CROSS_BATCH_SYNTHETIC, Action.DROP, key_first)
    other_version = ~key_hit & ~best
    rep.set(other_version, Outcome.IN_BATCH_SYNTHETIC, synthetic, this_batch)
    if not rest_natural_in_batch:
        rest.set(other_version, Outcome.IN_BATCH_SYNTHETIC, Action.DROP, this_batch)
    return rep, rest


def new_cache_run(batch_id: str, digests: np.ndarray, fingerprints: np.ndarray, decision: KeyDecision) -> CacheRun:
    """The pairs this batch claims for the key: exactly the rows it emits, in any form."""
    emitted = decision.emitted_mask
    return CacheRun.build(batch_id, digests[emitted], fingerprints[emitted])
