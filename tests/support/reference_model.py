"""A deliberately plain reference model of eventdedup's semantics, for property tests.

Written from the README's policy table with dicts and loops, sharing no code with
include/eventdedup: per committed batch, in commit order, per key (the dedup key within its
event hour), decide each row's reason, action and the batch holding the kept copy.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ModelEvent:
    key: Hashable  # what the engine keys on: (hour, normalised id)
    fingerprint: Hashable  # anything equal exactly when the engine's fingerprints are equal
    order_value: int | None = None  # the min:/max: survivor field


@dataclass(frozen=True)
class ModelPolicy:
    synthetic: str = "rename"  # rename | drop | keep
    survivor: str = "first"  # first | last | min | max
    changelog: bool = False


@dataclass(frozen=True)
class Verdict:
    reason: str  # kept | in_batch_natural | in_batch_synthetic | cross_batch_natural | cross_batch_synthetic
    action: str  # emit | dropped | renamed | kept | update
    holder: str  # the batch holding the kept copy (for an update: the superseded version)


@dataclass
class ModelStore:
    """What the committed cache means: every emitted (key, fingerprint) and who emitted it."""

    pair_owner: dict[tuple[Hashable, Hashable], str] = field(default_factory=dict)
    key_owners: dict[Hashable, list[str]] = field(default_factory=lambda: defaultdict(list))


def decide_batch(store: ModelStore, batch: str, events: list[ModelEvent], policy: ModelPolicy) -> list[Verdict]:
    """Verdicts in input order; records the batch's emitted pairs in `store` (its commit)."""
    verdicts: list[Verdict | None] = [None] * len(events)
    rows_by_key: dict[Hashable, list[int]] = defaultdict(list)
    for index, event in enumerate(events):
        rows_by_key[event.key].append(index)
    emitted: list[int] = []
    for key, rows in rows_by_key.items():
        for index in rows:
            owner = store.pair_owner.get((key, events[index].fingerprint))
            if owner is not None:
                verdicts[index] = Verdict("cross_batch_natural", "dropped", owner)
        fresh = sorted((i for i in rows if verdicts[i] is None), key=lambda i: _preference(events, i, policy))
        if not fresh:
            continue
        seen_before = bool(store.key_owners.get(key))
        if policy.changelog:
            best = fresh[0]
            if seen_before:
                verdicts[best] = Verdict("kept", "update", store.key_owners[key][-1])
            else:
                verdicts[best] = Verdict("kept", "emit", batch)
            emitted.append(best)
            for index in fresh[1:]:
                same = events[index].fingerprint == events[best].fingerprint
                verdicts[index] = Verdict("in_batch_natural" if same else "in_batch_synthetic", "dropped", batch)
            continue
        action = {"rename": "renamed", "drop": "dropped", "keep": "kept"}[policy.synthetic]
        representative: dict[Hashable, int] = {}
        for index in fresh:  # in preference order: the first of each fingerprint represents it
            fingerprint = events[index].fingerprint
            if fingerprint not in representative:
                representative[fingerprint] = index
                if seen_before:
                    verdicts[index] = Verdict("cross_batch_synthetic", action, store.key_owners[key][0])
                elif len(representative) == 1:
                    verdicts[index] = Verdict("kept", "emit", batch)
                else:
                    verdicts[index] = Verdict("in_batch_synthetic", action, batch)
                if verdicts[index].action != "dropped":
                    emitted.append(index)
            else:
                rep_verdict = verdicts[representative[fingerprint]]
                assert rep_verdict is not None
                if rep_verdict.action == "dropped":
                    verdicts[index] = Verdict(rep_verdict.reason, "dropped", rep_verdict.holder)
                else:
                    verdicts[index] = Verdict("in_batch_natural", "dropped", batch)
    for index in emitted:
        event = events[index]
        store.pair_owner[(event.key, event.fingerprint)] = batch
        if batch not in store.key_owners[event.key]:
            store.key_owners[event.key].append(batch)
    assert all(v is not None for v in verdicts)
    return verdicts  # type: ignore[return-value]


def _preference(events: list[ModelEvent], index: int, policy: ModelPolicy) -> tuple[Any, ...]:
    """Sort key: smaller is preferred. Missing values never win; ties go to input order."""
    if policy.survivor == "first":
        return (index,)
    if policy.survivor == "last":
        return (-index,)
    value = events[index].order_value
    if value is None:
        return (1, 0, index)
    return (0, value if policy.survivor == "min" else -value, index)
