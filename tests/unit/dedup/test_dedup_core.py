"""Table-driven checks of the per-key decision: which copy survives, in what form, and why.

Each case lists rows as (id, fingerprint) in input order and the expected (reason, action,
batch holding the kept copy) per row; "B" is the batch being computed.
"""
from __future__ import annotations

import numpy as np
import pytest

from eventdedup.cache.segment import CacheRun
from eventdedup.cache.view import CacheView
from eventdedup.dedup.decide import Action, DuplicatePolicy, Outcome, decide_key_group, new_cache_run
from eventdedup.keys import DIGEST_DTYPE, key_digest

KEPT, IBN, IBS, CBN, CBS = (o.reason for o in list(Outcome)[:5])
EMIT, DROP, RENAME, FLAG, UPDATE = (a.label for a in Action)


def rows(*pairs: tuple[str, int]) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([key_digest(i) for i, _ in pairs], DIGEST_DTYPE), np.array([fp for _, fp in pairs], np.uint64))


def cache(*runs: tuple[str, list[tuple[str, int]]], hidden: frozenset[str] = frozenset()) -> CacheView:
    built = [CacheRun.build(owner, *rows(*entries)) for owner, entries in runs]
    visible = {run.owner: version for version, run in enumerate(built) if run.owner not in hidden}
    return CacheView.from_runs(built, visible)


def decide(events, view, policy=None, priorities=None):  # type: ignore[no-untyped-def]
    policy = policy or DuplicatePolicy()
    digests, fps = rows(*events)
    if priorities is None:
        priorities = np.arange(len(events))
    decision = decide_key_group(digests, fps, np.asarray(priorities, np.int64), view, "B", policy)
    got = [(Outcome(int(o)).reason, Action(int(a)).label, decision.holder_batch(i))
           for i, (o, a) in enumerate(zip(decision.outcomes, decision.actions, strict=False))]
    return got, decision


NONE = CacheView.empty()
RENAMING, DROPPING, KEEPING = DuplicatePolicy("rename"), DuplicatePolicy("drop"), DuplicatePolicy("keep")
CHANGELOG = DuplicatePolicy("rename", changelog=True)


@pytest.mark.parametrize("events, view, policy, expected", [
    pytest.param([("a", 1), ("b", 1), ("a", 1)], NONE, RENAMING,
                 [(KEPT, EMIT, "B"), (KEPT, EMIT, "B"), (IBN, DROP, "B")], id="in-batch natural"),
    pytest.param([("a", 1), ("a", 2), ("a", 1), ("a", 2)], NONE, RENAMING,
                 [(KEPT, EMIT, "B"), (IBS, RENAME, "B"), (IBN, DROP, "B"), (IBN, DROP, "B")],
                 id="in-batch synthetic, rename: its own copies are natural duplicates of the renamed one"),
    pytest.param([("a", 1), ("a", 2), ("a", 2)], NONE, KEEPING,
                 [(KEPT, EMIT, "B"), (IBS, FLAG, "B"), (IBN, DROP, "B")], id="in-batch synthetic, keep"),
    pytest.param([("a", 1), ("a", 2), ("a", 2)], NONE, DROPPING,
                 [(KEPT, EMIT, "B"), (IBS, DROP, "B"), (IBS, DROP, "B")], id="in-batch synthetic, drop"),
    pytest.param([("a", 1), ("b", 5)], cache(("A0", [("a", 1)])), RENAMING,
                 [(CBN, DROP, "A0"), (KEPT, EMIT, "B")], id="cross-batch natural"),
    pytest.param([("a", 9), ("a", 1), ("a", 9)], cache(("A0", [("a", 1)])), RENAMING,
                 [(CBS, RENAME, "A0"), (CBN, DROP, "A0"), (IBN, DROP, "B")], id="cross-batch synthetic, rename"),
    pytest.param([("a", 9), ("a", 9)], cache(("A0", [("a", 1)])), KEEPING,
                 [(CBS, FLAG, "A0"), (IBN, DROP, "B")], id="cross-batch synthetic, keep"),
    pytest.param([("a", 9), ("a", 9)], cache(("A0", [("a", 1)])), DROPPING,
                 [(CBS, DROP, "A0"), (CBS, DROP, "A0")], id="cross-batch synthetic, drop"),
    pytest.param([("a", 2)], cache(("A0", [("a", 1)]), ("A1", [("a", 2)])), RENAMING,
                 [(CBN, DROP, "A1")], id="a renamed copy seen again is a natural duplicate of the batch that renamed it"),
    pytest.param([("a", 1), ("c", 3)], cache(("A0", [("b", 2)]), ("A1", [("c", 3)])), RENAMING,
                 [(KEPT, EMIT, "B"), (CBN, DROP, "A1")], id="owner of the claiming run"),
    pytest.param([("a", 1)], cache(("B", [("a", 1)]), hidden=frozenset({"B"})), RENAMING,
                 [(KEPT, EMIT, "B")], id="own earlier claim is invisible to a rerun"),
    pytest.param([("a", 3), ("a", 3), ("a", 4)], cache(("A0", [("a", 1)]), ("A1", [("a", 2)])), CHANGELOG,
                 [(KEPT, UPDATE, "A1"), (IBN, DROP, "B"), (IBS, DROP, "B")],
                 id="changelog: the preferred new version updates the latest committed one"),
    pytest.param([("a", 1), ("a", 2)], cache(("A0", [("a", 1)]), ("A1", [("a", 2)])), CHANGELOG,
                 [(CBN, DROP, "A0"), (CBN, DROP, "A1")], id="changelog: a redelivered old version is no update"),
    pytest.param([("a", 1), ("a", 2)], NONE, CHANGELOG,
                 [(KEPT, EMIT, "B"), (IBS, DROP, "B")], id="changelog: in-batch versions collapse to the survivor"),
])
def test_each_row_gets_its_reason_action_and_the_batch_holding_the_kept_copy(events, view, policy, expected) -> None:
    got, _ = decide(events, view, policy)
    assert got == expected


@pytest.mark.parametrize("priorities, expected", [
    pytest.param([0, 1, 2], [(KEPT, EMIT, "B"), (IBS, RENAME, "B"), (IBN, DROP, "B")], id="first"),
    pytest.param([2, 1, 0], [(IBN, DROP, "B"), (IBS, RENAME, "B"), (KEPT, EMIT, "B")], id="last"),
    pytest.param([1, 0, 2], [(IBS, RENAME, "B"), (KEPT, EMIT, "B"), (IBN, DROP, "B")], id="min/max picks row 2"),
])
def test_the_survivor_policy_decides_which_copy_keeps_the_id(priorities, expected) -> None:
    got, _ = decide([("a", 1), ("a", 2), ("a", 1)], NONE, RENAMING, priorities)
    assert got == expected


def test_the_new_cache_run_holds_every_emitted_pair_and_nothing_dropped() -> None:
    events = [("a", 1), ("b", 2), ("a", 1), ("a", 7), ("c", 3), ("c", 4)]
    digests, fps = rows(*events)
    _, decision = decide(events, cache(("A0", [("c", 3)])), RENAMING)
    new_run = new_cache_run("B", digests, fps, decision)
    assert new_run.owner == "B"
    assert sorted(zip(new_run.digests.tolist(), new_run.fingerprints.tolist(), strict=False)) == sorted(
        [(key_digest("a"), 1), (key_digest("b"), 2), (key_digest("a"), 7), (key_digest("c"), 4)])
    _, dropping = decide(events, cache(("A0", [("c", 3)])), DROPPING)
    dropped_run = new_cache_run("B", digests, fps, dropping)
    assert sorted(zip(dropped_run.digests.tolist(), dropped_run.fingerprints.tolist(), strict=False)) == sorted(
        [(key_digest("a"), 1), (key_digest("b"), 2)])


def test_key_hours_built_for_other_rows_are_refused() -> None:
    from eventdedup.dedup.decide import KeyHours

    a, b = b"a" * 16, b"b" * 16
    digests = np.array([a, a], DIGEST_DTYPE)
    other = KeyHours(np.array([a, b], DIGEST_DTYPE), np.array([0, 1], np.intp), {})
    with pytest.raises(ValueError, match="other rows"):
        decide_key_group(digests, np.array([1, 2], np.uint64), np.arange(2, dtype=np.int64), CacheView.empty(), "B",
                         key_hours=other)
