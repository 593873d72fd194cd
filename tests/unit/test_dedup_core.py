"""Table-driven checks of the per-key decision: which copy survives and why each other is dropped."""
from __future__ import annotations

import numpy as np
import pytest

from eventdedup.cache_segment import DIGEST_DTYPE, CacheRun
from eventdedup.dedup_core import CacheView, decide_key_group, new_cache_run
from eventdedup.keys import key_digest

K, D, S, X = "kept", "in_batch_natural", "in_batch_synthetic", "cross"


def rows(*pairs: tuple[str, int]) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([key_digest(i) for i, _ in pairs], DIGEST_DTYPE), np.array([fp for _, fp in pairs], np.uint64))


def cache(*runs: tuple[str, list[tuple[str, int]]], visible: set[str] | None = None) -> CacheView:
    built = [CacheRun.build(owner, *rows(*entries)) for owner, entries in runs]
    return CacheView.from_runs(built, visible if visible is not None else {owner for owner, _ in runs})


@pytest.mark.parametrize("events, view, expected", [
    pytest.param([("a", 1), ("b", 1), ("a", 1)], CacheView.empty(),
                 [("kept", "B"), ("kept", "B"), ("in_batch_natural", "B")], id="in-batch natural"),
    pytest.param([("a", 1), ("a", 2), ("a", 1)], CacheView.empty(),
                 [("kept", "B"), ("in_batch_synthetic", "B"), ("in_batch_natural", "B")], id="in-batch synthetic"),
    pytest.param([("a", 1), ("b", 5)], cache(("A0", [("a", 1)])),
                 [("cross_batch_natural", "A0"), ("kept", "B")], id="cross-batch natural"),
    pytest.param([("a", 9), ("a", 1)], cache(("A0", [("a", 1)])),
                 [("cross_batch_synthetic", "A0"), ("cross_batch_natural", "A0")], id="cross-batch beats in-batch"),
    pytest.param([("a", 1), ("c", 3)], cache(("A0", [("b", 2)]), ("A1", [("c", 3)])),
                 [("kept", "B"), ("cross_batch_natural", "A1")], id="owner of the claiming run"),
    pytest.param([("a", 1)], cache(("B", [("a", 1)]), visible=set()),
                 [("kept", "B")], id="own earlier claim is invisible to a rerun"),
])
def test_each_row_gets_its_outcome_and_the_batch_holding_the_survivor(events, view, expected) -> None:
    digests, fps = rows(*events)
    decision = decide_key_group(digests, fps, view, "B")
    got = [("kept" if o == 0 else {1: D, 2: S, 3: "cross_batch_natural", 4: "cross_batch_synthetic"}[int(o)], b)
           for o, b in zip(decision.outcomes, decision.kept_in_batch)]
    assert got == expected


def test_new_cache_run_holds_exactly_the_survivors() -> None:
    digests, fps = rows(("a", 1), ("b", 2), ("a", 1), ("c", 3))
    view = cache(("A0", [("c", 3)]))
    new_run = new_cache_run("B", digests, fps, decide_key_group(digests, fps, view, "B"))
    assert new_run.owner == "B"
    assert sorted(zip([d for d in new_run.digests.tolist()], new_run.fingerprints.tolist())) == sorted(
        [(key_digest("a"), 1), (key_digest("b"), 2)])
