"""Decide, for the events of one cache key, which survive and why the others are dropped.

Pure and vectorised: numpy over fixed-width digests, no per-row Python. Rows must arrive in
input order (manifest object order, then line number); the first occurrence of an id wins
unless a batch committed earlier already claimed it.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from .cache_segment import DIGEST_DTYPE, CacheRun


class Outcome(IntEnum):
    KEPT = 0
    IN_BATCH_NATURAL = 1  # same id, same payload fingerprint, earlier in this batch
    IN_BATCH_SYNTHETIC = 2  # same id, different payload, earlier in this batch
    CROSS_BATCH_NATURAL = 3  # same id and payload claimed by an earlier committed batch
    CROSS_BATCH_SYNTHETIC = 4  # same id, different payload, claimed by an earlier batch

    @property
    def reason(self) -> str:
        return self.name.lower()

    @property
    def is_in_batch(self) -> bool:
        return self in (Outcome.IN_BATCH_NATURAL, Outcome.IN_BATCH_SYNTHETIC)


@dataclass(frozen=True)
class CacheView:
    """Committed entries of one cache key visible to a batch, sorted by digest for lookups."""

    digests: np.ndarray
    fingerprints: np.ndarray
    owner_index: np.ndarray
    owners: tuple[str, ...]

    @classmethod
    def empty(cls) -> CacheView:
        return cls(np.empty(0, DIGEST_DTYPE), np.empty(0, np.uint64), np.empty(0, np.int32), ())

    @classmethod
    def from_runs(cls, runs: Sequence[CacheRun], visible_owners: Collection[str]) -> CacheView:
        """Keep only runs of batches committed before the one being computed: a rerun must not
        see its own earlier claims, nor claims made by batches committed after it."""
        kept = [run for run in runs if run.owner in visible_owners and len(run)]
        if not kept:
            return cls.empty()
        digests = np.concatenate([run.digests for run in kept])
        fps = np.concatenate([run.fingerprints for run in kept])
        owner_index = np.concatenate([np.full(len(run), i, np.int32) for i, run in enumerate(kept)])
        order = np.argsort(digests, kind="stable")
        return cls(digests[order], fps[order], owner_index[order], tuple(run.owner for run in kept))

    def __len__(self) -> int:
        return len(self.digests)


@dataclass(frozen=True)
class KeyDecision:
    outcomes: np.ndarray  # Outcome per row (uint8)
    kept_in_batch: list[str]  # per row: the batch holding the surviving copy

    @property
    def kept_mask(self) -> np.ndarray:
        return self.outcomes == Outcome.KEPT


def decide_key_group(
    digests: np.ndarray, fingerprints: np.ndarray, cache: CacheView, batch_id: str
) -> KeyDecision:
    """Classify every row; `digests` (S16) and `fingerprints` (uint64) are in input order."""
    n = len(digests)
    uniq, first_index, inverse = np.unique(digests, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    first_of_row = first_index[inverse]
    is_first = first_of_row == np.arange(n)

    outcomes = np.full(n, Outcome.KEPT, np.uint8)
    same_as_first = fingerprints == fingerprints[first_of_row]
    outcomes[~is_first & same_as_first] = Outcome.IN_BATCH_NATURAL
    outcomes[~is_first & ~same_as_first] = Outcome.IN_BATCH_SYNTHETIC
    kept_in_batch = [batch_id] * n

    if len(cache):
        position = np.minimum(np.searchsorted(cache.digests, uniq), len(cache) - 1)
        hit = cache.digests[position] == uniq
        row_hit = hit[inverse]
        row_position = position[inverse]
        same_as_cached = fingerprints == cache.fingerprints[row_position]
        outcomes[row_hit & same_as_cached] = Outcome.CROSS_BATCH_NATURAL
        outcomes[row_hit & ~same_as_cached] = Outcome.CROSS_BATCH_SYNTHETIC
        for row in np.flatnonzero(row_hit):
            kept_in_batch[row] = cache.owners[cache.owner_index[row_position[row]]]
    return KeyDecision(outcomes, kept_in_batch)


def new_cache_run(batch_id: str, digests: np.ndarray, fingerprints: np.ndarray, decision: KeyDecision) -> CacheRun:
    """The ids this batch claims for the key: exactly its surviving rows."""
    kept = decision.kept_mask
    return CacheRun.build(batch_id, digests[kept], fingerprints[kept])
