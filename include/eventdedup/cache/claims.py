"""What a rerun must reproduce of the cache objects its batch committed.

A rerun builds on today's chains, not the ones its batch read: since then later batches have
added their objects and runs (hidden from the rerun), merged objects and dropped runs of
batches that left the state (arrived before the horizon). So a recomputed segment may differ in
bytes, and in what it merges, from the committed one while the batch's decision is the same.
What must hold: the batch's own run is identical, and every other run the rerun's segment
carries is one the commit's chain (its segment and the objects it built on) carried; a
recomputed id guard holds every (id, hour) the committed one held, and every id the rerun
claimed, in its hour. A committed chain maintenance has deleted part of since (a later head
merged it) is judged by the key's chain today: it carries the batch's own run forward.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from eventdedup.cache.guard import IdGuard, decode_guard, guard_hashes
from eventdedup.cache.heads import load_chain_runs
from eventdedup.cache.segment import CacheRun, decode_segment
from eventdedup.keys import CacheKey, guard_head_key
from eventdedup.layout import is_guard_object
from eventdedup.s3store import S3Store

GuardEntries = set[tuple[int, int]]  # (hash, hour)
CommittedChain = tuple[str, tuple[str, ...]]  # an object, and the objects it builds on (oldest first)


def own_guard_entries(store: S3Store, recomputed_segments: dict[str, str], batch_id: str,
                      arrival_hour: int, coarse_buckets: int) -> dict[str, GuardEntries]:
    """Per guard head, the (64-bit hash, hour) of every id the recomputed batch claimed in its
    segments (`recomputed_segments`: cache key -> staged segment). Guards are per coarse bucket
    (eventdedup.cache.epochs), which holds a segment's fine bucket."""
    entries: dict[str, GuardEntries] = {}
    for name, staged_key in recomputed_segments.items():
        key = CacheKey.parse(name)
        for run in decode_segment(store.get_bytes(staged_key), staged_key):
            if run.owner == batch_id:
                pairs = entries.setdefault(guard_head_key(arrival_hour, key.bucket % coarse_buckets), set())
                pairs.update((int(h), key.hour_index) for h in guard_hashes(run.digests).tolist())
    return entries


def lacking_from_guard(guard: IdGuard, own_entries: GuardEntries) -> int:
    """How many of a batch's (64-bit hash, hour) claims a guard does not hold, at its hash width."""
    shift = 64 - guard.hash_bits
    return len({(h >> shift, hour) for h, hour in own_entries} - guard.entries())


def cache_claim_differences(store: S3Store, committed: CommittedChain, recomputed_key: str, batch_id: str,
                            current_chain: Sequence[str], own_entries: GuardEntries) -> list[str]:
    """How a recomputed cache object differs from the committed one in what matters (above): the
    committed object with the objects it built on; the staged one alone (what it builds on is
    today's chain, which the rerun's decision read); `current_chain`, the key's chain today."""
    committed_key = committed[0]
    if is_guard_object(committed_key):
        return _guard_differences(store, committed_key, recomputed_key, current_chain, own_entries)
    committed_runs = _chain_runs_or_none(store, (*committed[1], committed_key))
    superseded = committed_runs is None
    if committed_runs is None:  # merged into a later head since, and deleted: judged by today's chain
        if not current_chain:
            return [f"{committed_key}: committed, but neither it nor a head of its key exists any more"]
        committed_runs = load_chain_runs(store, current_chain)
    old_runs = {run.owner: run for run in committed_runs}
    new_runs = {run.owner: run for run in decode_segment(store.get_bytes(recomputed_key), recomputed_key)}
    problems = []
    if not _same_run(old_runs.get(batch_id), new_runs.get(batch_id)):
        problems.append(f"{committed_key}: the rerun claims other ids than the commit did")
    for owner, run in new_runs.items():
        if owner != batch_id and not superseded and not _same_run(old_runs.get(owner), run):
            problems.append(f"{committed_key}: the rerun carries a run of {owner} the commit did not")
    return problems


def _guard_differences(store: S3Store, committed_key: str, recomputed_key: str, current_chain: Sequence[str],
                       own_entries: GuardEntries) -> list[str]:
    committed = store.get_bytes_or_none(committed_key)
    superseded = committed is None
    if committed is None:
        if not current_chain:
            return [f"{committed_key}: committed, but neither it nor a head of its key exists any more"]
        committed_key, committed = current_chain[-1], store.get_bytes(current_chain[-1])
    held = decode_guard(committed, committed_key)  # the commit's guard, or the head after it
    problems = []
    lacking = lacking_from_guard(held, own_entries)
    if lacking:
        problems.append(f"{committed_key}: the committed id guard lacks {lacking} ids the batch claims")
    if not superseded:  # a later head holds more than the commit did; the rerun copies that head forward
        missing = len(held.entries() - decode_guard(store.get_bytes(recomputed_key), recomputed_key).entries())
        if missing:
            problems.append(f"{committed_key}: the rerun's id guard lacks {missing} ids the commit holds")
    return problems


def _chain_runs_or_none(store: S3Store, chain: Sequence[str]) -> list[CacheRun] | None:
    """The runs of a chain as committed; None once any of its objects is gone."""
    runs = []
    for key in chain:
        data = store.get_bytes_or_none(key)
        if data is None:
            return None
        runs += decode_segment(data, key)
    return runs


def _same_run(a: CacheRun | None, b: CacheRun | None) -> bool:
    """The same entries, and in an ordered store the same order keys (a claim whose key differs
    would make the key's current version order otherwise)."""
    if a is None or b is None:
        return a is b
    same_keys = ((a.order_keys is None) == (b.order_keys is None)
                 and (a.order_keys is None or b.order_keys is None or a.order_keys.equals(b.order_keys)))
    return bool(np.array_equal(a.digests, b.digests) and np.array_equal(a.fingerprints, b.fingerprints)
                and same_keys)
