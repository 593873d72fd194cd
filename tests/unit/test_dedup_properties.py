"""Property: for any stream split into batches, the vectorised per-key decision equals the plain
reference model, row by row, for every policy -- and recomputing any committed batch later,
against segments that by then also hold later batches' runs, reproduces its decisions exactly.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from eventdedup.cache.segment import decode_segment, encode_segment
from eventdedup.cache.view import CacheView
from eventdedup.dedup.decide import Action, DuplicatePolicy, Outcome, decide_key_group, new_cache_run
from eventdedup.dedup.survivor import SurvivorPolicy
from eventdedup.keys import DIGEST_DTYPE, key_digest
from eventdedup.parse.order_keys import order_key_of_value

from ..support.reference_model import ModelEvent, ModelPolicy, ModelStore, Verdict, decide_batch

events = st.builds(ModelEvent, key=st.tuples(st.sampled_from([3, 4]), st.sampled_from(["a", "b", "c"])),
                   fingerprint=st.integers(1, 3), order_value=st.none() | st.integers(-2, 2))
policies = st.builds(ModelPolicy, synthetic=st.sampled_from(["rename", "drop", "keep"]),
                     survivor=st.sampled_from(["first", "last", "min", "max"]), changelog=st.booleans())
streams = st.lists(st.lists(events, min_size=1, max_size=12), min_size=1, max_size=5)

_ACTION_NAMES = {Action.EMIT: "emit", Action.DROP: "dropped", Action.RENAME: "renamed", Action.KEEP: "kept",
                 Action.UPDATE: "update"}


def engine_verdicts(segments: dict, committed: list[str], batch: str, rows: list[ModelEvent],
                    policy: ModelPolicy) -> tuple[list[Verdict], dict]:
    """Decide one batch the way dedup_stage does: per cache key (here: per hour), against the
    runs of the batches committed before it; returns verdicts and the segments it would write."""
    survivor = SurvivorPolicy.parse(policy.survivor if policy.survivor in ("first", "last") else f"{policy.survivor}:p")
    verdicts: list[Verdict | None] = [None] * len(rows)
    written = {}
    by_hour = defaultdict(list)
    for index, event in enumerate(rows):
        by_hour[event.key[0]].append(index)
    for hour, indexes in by_hour.items():
        runs = decode_segment(segments[hour], "segment") if hour in segments else []
        visible = [run for run in runs if run.owner in committed]
        digests = np.array([key_digest(rows[i].key[1]) for i in indexes], DIGEST_DTYPE)
        fps = np.array([rows[i].fingerprint for i in indexes], np.uint64)
        order_keys = pa.array([order_key_of_value(rows[i].order_value, "p") for i in indexes], pa.binary())
        decision = decide_key_group(digests, fps, survivor.priorities(order_keys, len(indexes)),
                                    CacheView.from_runs(runs, {owner: i for i, owner in enumerate(committed)}), batch,
                                    DuplicatePolicy(policy.synthetic, policy.changelog))
        for row, index in enumerate(indexes):
            verdicts[index] = Verdict(Outcome(int(decision.outcomes[row])).reason,
                                      _ACTION_NAMES[Action(int(decision.actions[row]))], decision.holder_batch(row))
        if decision.emitted_mask.any():
            written[hour] = encode_segment(visible + [new_cache_run(batch, digests, fps, decision)])
    return verdicts, written  # type: ignore[return-value]


@given(stream=streams, policy=policies, rerun_choices=st.lists(st.integers(0, 4), max_size=3))
def test_vectorised_decisions_equal_the_reference_model_and_reruns_reproduce_them(stream, policy, rerun_choices) -> None:
    model = ModelStore()
    segments: dict = {}
    committed: list[str] = []
    decided: dict[str, list[Verdict]] = {}
    for number, rows in enumerate(stream, start=1):
        batch = f"b{number}"
        expected = decide_batch(model, batch, rows, policy)
        got, written = engine_verdicts(segments, committed, batch, rows, policy)
        assert got == expected, batch
        segments.update(written)  # the commit: new heads replace old ones
        committed.append(batch)
        decided[batch] = got
        for choice in rerun_choices:  # recompute an earlier batch against today's segments
            earlier = committed[choice % len(committed)]
            before = committed[:committed.index(earlier)]
            again, _ = engine_verdicts(segments, before, earlier, stream[int(earlier[1:]) - 1], policy)
            assert again == decided[earlier], f"rerun of {earlier} after {batch}"
