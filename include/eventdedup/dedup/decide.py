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

In an ordered store (its identity records a min:/max: survivor: eventdedup.cache.identity) the
cache keeps each entry's order key, and the survivor's order holds across batches too (Flink's
keep-last deduplication by an ordering attribute, Hudi's precombine field): in changelog mode the
preferred new version of a committed key is an update only where it orders after the key's
current version (the latest committed run holding the key) or ties with it; one that orders
before it is a stale version, dropped, with every other new copy of the key (`newer_or_tied`
says how values compare). Without changelog the first version stays, and each cross-batch
synthetic copy is marked with whether changelog would have emitted it (`would_supersede`).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import IntEnum
from types import ModuleType

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from eventdedup import native_dedup
from eventdedup.cache.segment import CacheRun, stored_order_keys
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
    # Changelog in an ordered store: a new version that orders before the key's current one (an
    # older updated_at redelivered late, a replayed backfill), and every other new copy of the key.
    STALE_VERSION = 5

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
    # An ordered store's survivor ("min" or "max"): the order versions follow across batches; None
    # for a store that keeps no order keys (then commit order).
    ordering: str | None = None

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
    # Without changelog, in an ordered store: per row, whether changelog would have emitted the row
    # as an update of the version the audit names as kept (meaningful for cross-batch synthetic
    # rows only). None elsewhere.
    would_supersede: Mask | None = None
    # With it: per row, whether the row is its key's preferred new version (the survivor's, the one
    # changelog would emit) and would supersede: what changelog_would_update counts, per key.
    would_update: Mask | None = None

    @property
    def emitted_mask(self) -> Mask:
        mask: Mask = self.actions != Action.DROP
        return mask

    def holder_batch(self, row: int) -> str:
        index = int(self.holder[row])
        return self.batch_id if index == len(self.owners) else self.owners[index]


def decide_key_group(digests: Digests, fingerprints: Fingerprints, priorities: npt.NDArray[np.int64], cache: CacheView,
                     batch_id: str, policy: DuplicatePolicy = DuplicatePolicy(),
                     key_hours: KeyHours | None = None, core: ModuleType | None = None,
                     order_keys: pa.Array | pa.ChunkedArray | None = None) -> KeyDecision:
    """Classify every row; `digests` (S16), `fingerprints` (uint64), `priorities` in input order.
    `key_hours` says which hours of the cache may hold each key (eventdedup.cache.guard); None:
    any hour of the view. `core`: decided by the compiled dedup core, exactly as below (not in an
    ordered store: `policy.ordering`, which needs `order_keys`, each row's)."""
    if core is not None and policy.ordering is None:
        if key_hours is not None:
            key_hours.numbering_of(digests)
        run_hours = cache.hours or (0,) * len(cache.runs)
        outcomes, actions, holders = native_dedup.decide(
            core, digests, fingerprints, priorities,
            [(run.digests, run.fingerprints, hour) for run, hour in zip(cache.runs, run_hours, strict=True)],
            None if key_hours is None else key_hours.hours, policy.synthetic_action, policy.changelog)
        return KeyDecision(outcomes, actions, holders, cache.owners, batch_id)
    if policy.ordering is not None and order_keys is None:
        raise ValueError("an ordered store's decision needs each row's order key")
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
    found = cache.lookup(digests[pair_rep], fingerprints[pair_rep], queries_by_hour, policy.ordering)
    best = _best_new_pair_per_key(key_of_pair, priorities[pair_rep], found.pair_hit)
    rep_order = (None if policy.ordering is None or order_keys is None
                 else stored_order_keys(order_keys).take(pa.array(pair_rep, pa.int64())))
    rep, rest = _classify_pairs(found.pair_hit, found.pair_owner, found.key_hit, found.key_first, found.key_last,
                                best, policy, this_batch=len(cache.owners))
    is_rep = pair_rep[pair_of_row] == np.arange(n)
    would_supersede = would_update = None
    if rep_order is not None and found.last_order is not None and found.first_order is not None:
        if policy.changelog:
            _mark_stale(rep, rest, key_of_pair, found.pair_hit, found.key_last,
                        ~newer_or_tied(rep_order, found.last_order, policy.ordering) & ~found.pair_hit
                        & found.key_hit & best)
        else:
            superseding = newer_or_tied(rep_order, found.first_order, policy.ordering)
            would_supersede = superseding[pair_of_row]
            would_update = (superseding & best & found.key_hit & ~found.pair_hit)[pair_of_row] & is_rep
    outcomes = np.where(is_rep, rep.outcome[pair_of_row], rest.outcome[pair_of_row]).astype(np.uint8)
    actions = np.where(is_rep, rep.action[pair_of_row], rest.action[pair_of_row]).astype(np.uint8)
    holder = np.where(is_rep, rep.holder[pair_of_row], rest.holder[pair_of_row]).astype(np.int32)
    return KeyDecision(outcomes, actions, holder, cache.owners, batch_id, would_supersede, would_update)


def newer_or_tied(new: pa.Array, current: pa.Array, ordering: str | None) -> Mask:
    """Per position, whether a version with order key `new` may follow one with `current` across
    batches: it orders after it (greater under max, smaller under min) or ties with it (equal
    keys, or neither has one: then commit order decides). A version without a key never follows
    one with a key; one with a key always follows one without."""
    new_held = pc.is_valid(new).to_numpy(zero_copy_only=False)
    current_held = pc.is_valid(current).to_numpy(zero_copy_only=False)
    after = pc.greater(new, current) if ordering == "max" else pc.less(new, current)
    after_or_equal = pc.fill_null(pc.or_(after, pc.equal(new, current)), False).to_numpy(zero_copy_only=False)
    result: Mask = (new_held & ~current_held) | (~new_held & ~current_held) | (new_held & current_held & after_or_equal)
    return result


def _mark_stale(rep: _PairFate, rest: _PairFate, key_of_pair: npt.NDArray[np.intp], pair_hit: Mask,
                key_last: IndexArray, stale_best: Mask) -> None:
    """Keys whose preferred new version orders before their current one: every new copy of them
    (each new pair's representative and its copies) is a stale version, held by the current one."""
    if not stale_best.any():
        return
    stale_key = np.zeros(int(key_of_pair.max()) + 1, bool)
    stale_key[key_of_pair[stale_best]] = True
    stale = stale_key[key_of_pair] & ~pair_hit
    rep.set(stale, Outcome.STALE_VERSION, Action.DROP, key_last)
    rest.set(stale, Outcome.STALE_VERSION, Action.DROP, key_last)


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
                  within: Mask | None = None, core: ModuleType | None = None,
                  order_keys: pa.Array | pa.ChunkedArray | None = None) -> CacheRun:
    """The pairs this batch claims: exactly the rows it emits, in any form (of the rows `within`:
    one hour's, for that hour's segment); in an ordered store (`order_keys`, each row's) with
    their order keys."""
    emitted = decision.emitted_mask if within is None else decision.emitted_mask & within
    keys = None if order_keys is None else stored_order_keys(order_keys).filter(pa.array(emitted))
    return CacheRun.build(batch_id, digests[emitted], fingerprints[emitted], core, keys)
