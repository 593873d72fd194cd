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

import uuid
from dataclasses import dataclass
from enum import IntEnum
from types import ModuleType

import numpy as np
import numpy.typing as npt

from eventdedup import native_dedup
from eventdedup.cache.segment import CacheRun
from eventdedup.cache.view import CacheView, IndexArray
from eventdedup.keys import DIGEST_DTYPE, FINGERPRINT_BYTES, KEY_DIGEST_BYTES
from eventdedup.sorting import order_by_group_then_rank, unique_inverse

Digests = npt.NDArray[np.bytes_]
Fingerprints = npt.NDArray[np.uint64]
Mask = npt.NDArray[np.bool_]
Codes = npt.NDArray[np.uint8]

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


class Action(IntEnum):
    EMIT = 0  # output under its own key (op = insert)
    DROP = 1  # not output; audited
    RENAME = 2  # synthetic = rename: output under a derived id, original id in original_event_id
    KEEP = 3  # synthetic = keep: output under its own key, flagged in duplicate_of
    UPDATE = 4  # changelog: output as op = update of the version an earlier batch holds

    @property
    def label(self) -> str:
        """The audit's `action` column: dropped | renamed | kept | emit | update."""
        return {Action.DROP: "dropped", Action.RENAME: "renamed", Action.KEEP: "kept"}.get(self, self.name.lower())

    @property
    def would_label(self) -> str:
        """The audit's `action` column in observe mode, where nothing is done: would_drop |
        would_rename | would_keep (an emitted row or an update is not audited)."""
        return f"would_{self.name.lower()}"


_SYNTHETIC_ACTIONS = {"rename": Action.RENAME, "keep": Action.KEEP, "drop": Action.DROP}

# Namespace of derived ids: uuid5(NAMESPACE_URL, "https://github.com/eventdedup/synthetic-duplicate").
SYNTHETIC_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/eventdedup/synthetic-duplicate")


def renamed_event_id(original_key: str, payload_fingerprint: int) -> str:
    """The new id of a renamed synthetic duplicate: a UUIDv5 of the original key and the copy's
    fingerprint, so every rerun (and every retransmission of that copy) derives the same id."""
    return str(uuid.uuid5(SYNTHETIC_ID_NAMESPACE, f"{original_key}\n{payload_fingerprint:016x}"))


@dataclass(frozen=True)
class DuplicatePolicy:
    """What happens to synthetic duplicates and whether a later batch may update a key."""

    synthetic: str = "rename"
    changelog: bool = False

    @property
    def synthetic_action(self) -> Action:
        return _SYNTHETIC_ACTIONS[self.synthetic]


def pair_bytes(digests: Digests, fingerprints: Fingerprints) -> npt.NDArray[np.bytes_]:
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
class KeyHours:
    """Which hours may hold each key of the rows being decided: `keys` sorted and distinct,
    `key_of_row` each row's index in them, and per hour a mask over them."""

    keys: Digests
    key_of_row: npt.NDArray[np.intp]
    hours: dict[int, Mask]

    def numbering_of(self, digests: Digests) -> npt.NDArray[np.intp]:
        """`key_of_row`, once it is certain to number these rows: rows are grouped by it, so key
        hours of other rows would merge or split keys (one comparison a row)."""
        if len(self.key_of_row) != len(digests) or not np.array_equal(self.keys[self.key_of_row], digests):
            raise ValueError("these key hours were built for other rows than the ones being decided")
        return self.key_of_row

    def queries_by_hour(self, queried_keys: npt.NDArray[np.intp]) -> dict[int, npt.NDArray[np.intp]]:
        """Per hour, the queries (given as key indexes) whose key it may hold."""
        return {hour: np.flatnonzero(mask[queried_keys]) for hour, mask in self.hours.items()}


@dataclass(frozen=True)
class KeyDecision:
    outcomes: Codes  # Outcome per row
    actions: Codes  # Action per row
    # Per row, the batch holding the kept copy (for an update: the superseded version), as an
    # index into owners; len(owners) stands for the batch being computed.
    holder: IndexArray
    owners: tuple[str, ...]
    batch_id: str

    @property
    def emitted_mask(self) -> Mask:
        mask: Mask = self.actions != Action.DROP
        return mask

    def holder_batch(self, row: int) -> str:
        index = int(self.holder[row])
        return self.batch_id if index == len(self.owners) else self.owners[index]


def decide_key_group(digests: Digests, fingerprints: Fingerprints, priorities: npt.NDArray[np.int64], cache: CacheView,
                     batch_id: str, policy: DuplicatePolicy = DuplicatePolicy(),
                     key_hours: KeyHours | None = None, core: ModuleType | None = None) -> KeyDecision:
    """Classify every row; `digests` (S16), `fingerprints` (uint64), `priorities` in input order.
    `key_hours` says which hours of the cache may hold each key (eventdedup.cache.guard); None:
    any hour of the view. `core`: decided by the compiled dedup core, exactly as below."""
    if core is not None:
        if key_hours is not None:
            key_hours.numbering_of(digests)
        run_hours = cache.hours or (0,) * len(cache.runs)
        outcomes, actions, holders = native_dedup.decide(
            core, digests, fingerprints, priorities,
            [(run.digests, run.fingerprints, hour) for run, hour in zip(cache.runs, run_hours, strict=True)],
            None if key_hours is None else key_hours.hours, policy.synthetic_action, policy.changelog)
        return KeyDecision(outcomes, actions, holders, cache.owners, batch_id)
    n = len(digests)
    pairs = pair_bytes(digests, fingerprints)
    _, pair_of_row = unique_inverse(pairs)
    # The representative of each distinct pair is its preferred copy.
    by_pair = order_by_group_then_rank(pair_of_row, priorities)
    pair_rep = by_pair[np.r_[True, pair_of_row[by_pair][1:] != pair_of_row[by_pair][:-1]]] if n else by_pair
    # Every key has a pair, so numbering the pairs' keys is numbering the rows' keys.
    key_of_row = unique_inverse(digests)[1] if key_hours is None else key_hours.numbering_of(digests)
    key_of_pair = key_of_row[pair_rep]
    queries_by_hour = None if key_hours is None else key_hours.queries_by_hour(key_of_pair)
    found = cache.lookup(digests[pair_rep], fingerprints[pair_rep], queries_by_hour)
    best = _best_new_pair_per_key(key_of_pair, priorities[pair_rep], found.pair_hit)
    rep, rest = _classify_pairs(found.pair_hit, found.pair_owner, found.key_hit, found.key_first, found.key_last,
                                best, policy, this_batch=len(cache.owners))
    is_rep = pair_rep[pair_of_row] == np.arange(n)
    outcomes = np.where(is_rep, rep.outcome[pair_of_row], rest.outcome[pair_of_row]).astype(np.uint8)
    actions = np.where(is_rep, rep.action[pair_of_row], rest.action[pair_of_row]).astype(np.uint8)
    holder = np.where(is_rep, rep.holder[pair_of_row], rest.holder[pair_of_row]).astype(np.int32)
    return KeyDecision(outcomes, actions, holder, cache.owners, batch_id)


def _best_new_pair_per_key(key_of_pair: npt.NDArray[np.intp], rep_priority: npt.NDArray[np.int64],
                           pair_hit: Mask) -> Mask:
    """Mask of pairs that are, for their key, the preferred pair not already in the cache."""
    best = np.zeros(len(key_of_pair), bool)
    candidates = np.flatnonzero(~pair_hit)
    if len(candidates):
        ordered = candidates[order_by_group_then_rank(key_of_pair[candidates], rep_priority[candidates])]
        keys = key_of_pair[ordered]
        best[ordered[np.r_[True, keys[1:] != keys[:-1]]]] = True
    return best


@dataclass
class _PairFate:
    outcome: Codes
    action: Codes
    holder: IndexArray

    @classmethod
    def new(cls, size: int, this_batch: int) -> _PairFate:
        return cls(np.full(size, Outcome.KEPT, np.uint8), np.full(size, Action.EMIT, np.uint8),
                   np.full(size, this_batch, np.int32))

    def set(self, mask: Mask, outcome: Outcome, action: Action, holder: IndexArray | int) -> None:
        self.outcome[mask] = outcome
        self.action[mask] = action
        self.holder[mask] = holder[mask] if isinstance(holder, np.ndarray) else holder


def _classify_pairs(pair_hit: Mask, pair_owner: IndexArray, key_hit: Mask, key_first: IndexArray,
                    key_last: IndexArray, best: Mask, policy: DuplicatePolicy,
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


def new_cache_run(batch_id: str, digests: Digests, fingerprints: Fingerprints, decision: KeyDecision,
                  within: Mask | None = None, core: ModuleType | None = None) -> CacheRun:
    """The pairs this batch claims: exactly the rows it emits, in any form (of the rows `within`:
    one hour's, for that hour's segment)."""
    emitted = decision.emitted_mask if within is None else decision.emitted_mask & within
    return CacheRun.build(batch_id, digests[emitted], fingerprints[emitted], core)
