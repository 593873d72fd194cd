"""A deliberately plain reference model of eventdedup's semantics, for property tests.

Written from the README's policy table with dicts and loops, sharing no code with
include/eventdedup: per committed batch, in commit order, per key (the dedup key, whatever the
hour its copies fall in), decide each row's reason, action and the batch holding the kept copy.
A batch sees what batches that arrived within `window_hours` before it emitted (retention by
arrival, README "Dedup window").

An ordered store (a min:/max: survivor, unless `ModelPolicy.ordered` says otherwise) keeps each
claim's order value, and in changelog mode a key's versions follow it across batches as Flink's
keep-last deduplication by an ordering attribute emits them (an append-only changelog): a new
version replaces the current one (the key's latest claim) only when it orders after it or ties
with it (commit order breaks ties; a missing value never follows a present one, and both missing
tie); otherwise it and every other new copy of its key are stale versions. Without changelog the
first version stays, and each cross-batch synthetic copy says whether changelog would have
emitted it (`Verdict.would_supersede`).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ModelEvent:
    key: Hashable  # what the engine keys on: the normalised id
    fingerprint: Hashable  # anything equal exactly when the engine's fingerprints are equal
    order_value: int | str | None = None  # the min:/max: survivor field


@dataclass(frozen=True)
class ModelPolicy:
    synthetic: str = "rename"  # rename | drop | keep
    survivor: str = "first"  # first | last | min | max
    changelog: bool = False
    ordered: bool | None = None  # whether the store keeps order values; None: for min and max

    @property
    def orders_versions(self) -> bool:
        by_field = self.survivor in ("min", "max")
        return by_field and (self.ordered is None or self.ordered)


@dataclass(frozen=True)
class Verdict:
    reason: str  # kept | in_batch_natural | in_batch_synthetic | cross_batch_natural | cross_batch_synthetic
    action: str  # emit | dropped | renamed | kept | update
    holder: str  # the batch holding the kept copy (for an update: the superseded version)
    # An ordered store without changelog, for a cross_batch_synthetic row: whether changelog would
    # have emitted its version as an update of the kept one. None otherwise.
    would_supersede: bool | None = None


@dataclass
class ModelStore:
    """What the committed cache means: every emitted (key, fingerprint), who emitted it, and when
    that batch arrived (hours), in commit order."""

    # (key, fingerprint, owner, the owner's arrival, the claimed copy's order value)
    claims: list[tuple[Hashable, Hashable, str, int, int | str | None]] = field(default_factory=list)
    window_hours: int | None = None  # None: nothing expires

    def visible(self, arrival: int) -> tuple[dict[tuple[Hashable, Hashable], str], dict[Hashable, list[str]]]:
        """The earliest owner of each pair and the owners of each key, among what a batch arriving
        at `arrival` sees."""
        pair_owner: dict[tuple[Hashable, Hashable], str] = {}
        key_owners: dict[Hashable, list[str]] = defaultdict(list)
        for key, fingerprint, owner, claimed_at, _ in self.claims:
            if self.window_hours is not None and claimed_at < arrival - self.window_hours:
                continue
            pair_owner.setdefault((key, fingerprint), owner)
            if owner not in key_owners[key]:
                key_owners[key].append(owner)
        return pair_owner, key_owners

    def value_of(self, key: Hashable, owner: str, survivor: str) -> int | str | None:
        """The order value of `owner`'s version of a key: its preferred claim's (several claims of
        a key in one batch are renamed copies); None when none of them has one."""
        values = [value for k, _, o, _, value in self.claims if k == key and o == owner and value is not None]
        if not values:
            return None
        return max(values, key=_value_rank) if survivor == "max" else min(values, key=_value_rank)

    def retract(self, batch: str) -> None:
        """The batch leaves the committed view: its claims are nobody's any more."""
        self.claims = [claim for claim in self.claims if claim[2] != batch]


def _value_rank(value: int | str) -> tuple[int, int | str]:
    """Numbers before strings, as eventdedup.parse.order_keys orders them."""
    return (0, value) if isinstance(value, int) else (1, value)


def follows(new: int | str | None, current: int | str | None, survivor: str) -> bool:
    """Whether a version valued `new` replaces one valued `current` (survivor min or max): it
    orders after it or ties with it; missing values never follow present ones, and tie with each other."""
    if new is None or current is None:
        return current is None
    if survivor == "max":
        return _value_rank(new) >= _value_rank(current)
    return _value_rank(new) <= _value_rank(current)


def decide_batch(store: ModelStore, batch: str, events: list[ModelEvent], policy: ModelPolicy,
                 arrival: int = 0) -> list[Verdict]:
    """Verdicts in input order; records the batch's emitted pairs in `store` (its commit)."""
    pair_owner, key_owners = store.visible(arrival)
    verdicts: list[Verdict | None] = [None] * len(events)
    rows_by_key: dict[Hashable, list[int]] = defaultdict(list)
    for index, event in enumerate(events):
        rows_by_key[event.key].append(index)
    emitted: list[int] = []
    for key, rows in rows_by_key.items():
        for index in rows:
            owner = pair_owner.get((key, events[index].fingerprint))
            if owner is not None:
                verdicts[index] = Verdict("cross_batch_natural", "dropped", owner)
        fresh = sorted((i for i in rows if verdicts[i] is None), key=lambda i: _preference(events, i, policy))
        if not fresh:
            continue
        seen_before = bool(key_owners.get(key))
        if policy.changelog:
            best = fresh[0]
            if seen_before and policy.orders_versions:
                current = key_owners[key][-1]
                if not follows(events[best].order_value, store.value_of(key, current, policy.survivor),
                               policy.survivor):
                    for index in fresh:
                        verdicts[index] = Verdict("stale_version", "dropped", current)
                    continue
            if seen_before:
                verdicts[best] = Verdict("kept", "update", key_owners[key][-1])
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
                    would = (follows(events[index].order_value, store.value_of(key, key_owners[key][0],
                                                                               policy.survivor), policy.survivor)
                             if policy.orders_versions else None)
                    verdicts[index] = Verdict("cross_batch_synthetic", action, key_owners[key][0], would)
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
                    verdicts[index] = Verdict(rep_verdict.reason, "dropped", rep_verdict.holder,
                                              rep_verdict.would_supersede)
                else:
                    verdicts[index] = Verdict("in_batch_natural", "dropped", batch)
    for index in emitted:
        value = events[index].order_value if policy.orders_versions else None
        store.claims.append((events[index].key, events[index].fingerprint, batch, arrival, value))
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
    ranks = {v: r for r, v in enumerate(sorted({e.order_value for e in events if e.order_value is not None},
                                               key=_value_rank))}
    return (0, ranks[value] if policy.survivor == "min" else -ranks[value], index)
