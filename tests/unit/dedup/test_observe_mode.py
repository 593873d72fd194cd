"""Observe mode ([dedup] mode = "observe") in the library's decision of a bucket: every row is
output as it arrived, the audit holds exactly the rows enforcing would audit with what it would
have done ("would_" + the action: would_drop, would_rename, would_keep), the counts say so, and the
cache written is the one enforcing writes, so a later switch to enforce goes on as if it had
enforced all along. Expectations come from the plain reference model (tests/support) and from
the documented rules, written out here."""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from eventdedup.cache.epochs import BucketEpochs
from eventdedup.counts import BatchCounts
from eventdedup.dedup.bucket import BucketRules, decide_bucket
from eventdedup.keys import bucket_array, key_digest
from eventdedup.tables import UTC_MICROS

from ...support.reference_model import ModelEvent, ModelPolicy, ModelStore, Verdict, decide_batch
from .test_dedup_properties import BUCKETS, HOUR, WINDOW, MemoryCache, bucket_outcomes, decide, policies, streams

# What enforcing does -> what the audit says an observing batch would have done.
WOULD = {"dropped": "would_drop", "renamed": "would_rename", "kept": "would_keep"}


def observed_rows(outcomes: list, rows: int) -> tuple[dict[int, tuple[str, str, str]], list[dict[str, Any]]]:  # type: ignore[type-arg]
    """Per row of the batch: its audit (reason, action, kept_in_batch) if it has one; and every
    output row, in input order."""
    audit: dict[int, tuple[str, str, str]] = {}
    output: list[tuple[int, dict[str, Any]]] = []
    for members, outcome in outcomes:
        for row, found in zip(outcome.duplicates.tolist(), outcome.audit.to_pylist(), strict=True):
            audit[int(members[row])] = (found["reason"], found["action"], found["kept_in_batch"])
        output += [(int(members[row]), emitted) for row, emitted in
                   zip(np.flatnonzero(outcome.emitted).tolist(), outcome.output.to_pylist(), strict=True)]
    assert len(output) == rows
    return audit, [emitted for _, emitted in sorted(output, key=lambda item: item[0])]


def as_arrived(batch: str, rows: list[tuple[str, int, int, int | None]]) -> list[dict[str, Any]]:
    """The output rows of every event as it arrived: its own id, an insert, nothing flagged."""
    return [{"event_id": key, "original_event_id": None, "duplicate_of": None, "op": "insert",
             "supersedes_batch": None, "event_time": pa.scalar((HOUR + hour) * 3_600_000_000, UTC_MICROS).as_py(),
             "batch_id": batch} for key, hour, _, _ in rows]


def expected_observe_counts(verdicts: list[Verdict]) -> dict[str, int]:
    """The counts of an observed batch, from the model's verdicts (what enforcing does)."""
    found = [v for v in verdicts if v.reason != "kept"]
    counts = {"output_rows": len(verdicts), "would_update": sum(v.action == "update" for v in verdicts),
              "would_drop_in_batch": sum(v.action == "dropped" and v.reason.startswith("in_batch") for v in found),
              "would_drop_cross_batch": sum(v.action == "dropped" and v.reason.startswith("cross_batch") for v in found),
              "would_rename": sum(v.action == "renamed" for v in found),
              "would_keep": sum(v.action == "kept" for v in found),
              "would_drop_stale": sum(v.reason == "stale_version" for v in found),
              "stale_version": sum(v.reason == "stale_version" for v in found)}
    for reason in ("in_batch_natural", "in_batch_synthetic", "cross_batch_natural", "cross_batch_synthetic"):
        counts[reason] = sum(v.reason == reason for v in found)
    return counts


def total_counts(outcomes: list) -> BatchCounts:  # type: ignore[type-arg]
    total = BatchCounts()
    for _, outcome in outcomes:
        total += outcome.counts
    return total


@given(stream=streams, policy=policies, observing=st.integers(0, 5))
def test_observed_batches_output_everything_audit_what_enforcing_would_do_and_build_its_cache(
        stream, policy, observing) -> None:
    """The first `observing` batches observe, the rest enforce: the enforcing ones decide exactly
    as the model (which never observed) says, so the observed batches left the enforced cache."""
    model = ModelStore(window_hours=WINDOW)
    cache, enforced_cache = MemoryCache(), MemoryCache()
    committed: dict[str, int] = {}
    arrival = HOUR
    for number, (rows, later, _) in enumerate(stream, start=1):  # retractions: the properties' concern
        batch, arrival = f"b{number}", arrival + later
        expected = decide_batch(model, batch, [ModelEvent(key, fingerprint, value) for key, _, fingerprint, value in rows],
                                policy, arrival)
        if number > observing:
            got, written = decide(cache, committed, arrival, batch, rows, policy)
            assert got == expected, batch
        else:
            outcomes, written = bucket_outcomes(cache, committed, arrival, batch, rows, policy, observe=True)
            audit, output = observed_rows(outcomes, len(rows))
            assert audit == {row: (v.reason, WOULD[v.action], v.holder) for row, v in enumerate(expected)
                             if v.reason != "kept"}, batch
            assert output == as_arrived(batch, rows)
            counts = total_counts(outcomes)
            assert {name: counts[name] for name in expected_observe_counts(expected)} == expected_observe_counts(
                expected)
            assert (counts.in_batch_duplicates, counts.cross_batch_duplicates, counts.renamed, counts.kept_synthetic,
                    counts.updates) == (0, 0, 0, 0, 0)
            BatchCounts.of({**dict(counts), "input_lines": len(rows)}).check_balance()
            _, enforced = bucket_outcomes(enforced_cache, committed, arrival, batch, rows, policy)
            assert written == enforced  # byte for byte: the same heads and guards
        cache.commit(written.segments, written.guards)
        enforced_cache.commit(written.segments, written.guards)
        committed[batch] = arrival


def test_one_observed_bucket_row_by_row() -> None:
    """b1 committed a/1. b2, observed under synthetic = "rename", arrives with a/1 (b1's pair), a/2
    (b1's key, a new payload), a/2 again, c/5, c/5 again and c/6 (a second payload of c)."""
    cache = MemoryCache()
    _, written = decide(cache, {}, HOUR, "b1", [("a", 0, 1, None)], ModelPolicy())
    cache.commit(written.segments, written.guards)
    rows: list[tuple[str, int, int, int | None]] = [("a", 0, 1, None), ("a", 0, 2, None), ("a", 0, 2, None),
                                                     ("c", 0, 5, None), ("c", 0, 5, None), ("c", 0, 6, None)]
    outcomes, observed = bucket_outcomes(cache, {"b1": HOUR}, HOUR + 1, "b2", rows, ModelPolicy(), observe=True)
    audit, output = observed_rows(outcomes, len(rows))
    assert audit == {0: ("cross_batch_natural", "would_drop", "b1"), 1: ("cross_batch_synthetic", "would_rename", "b1"),
                     2: ("in_batch_natural", "would_drop", "b2"), 4: ("in_batch_natural", "would_drop", "b2"),
                     5: ("in_batch_synthetic", "would_rename", "b2")}
    assert output == as_arrived("b2", rows)
    assert {name: value for name, value in total_counts(outcomes).items() if value} == {
        "output_rows": 6, "in_batch_natural": 2, "in_batch_synthetic": 1, "cross_batch_natural": 1,
        "cross_batch_synthetic": 1, "would_drop_in_batch": 2, "would_drop_cross_batch": 1, "would_rename": 2,
        "cache_keys_written": 3}  # a/2, c/5, c/6: the pairs enforcing emits
    _, enforced = bucket_outcomes(cache, {"b1": HOUR}, HOUR + 1, "b2", rows, ModelPolicy())
    assert observed == enforced


def test_a_populate_batch_is_the_same_whatever_the_mode() -> None:
    rows = pa.table({"event_id": ["a", "a", "b"], "key_digest": pa.array([key_digest(k) for k in "aab"], pa.binary(16)),
                     "fingerprint": pa.array([1, 2, 1], pa.uint64()), "event_time": pa.array([0, 0, 0], UTC_MICROS),
                     "order_key": pa.nulls(3, pa.binary()), "cache_hour": pa.array([HOUR] * 3, pa.int64())})
    digests = np.array([key_digest(k) for k in "aab"], "S16")
    for bucket in sorted(set(bucket_array(digests, BUCKETS).tolist())):
        members = pa.array(np.flatnonzero(bucket_array(digests, BUCKETS) == bucket))
        outcomes = [decide_bucket(BucketRules("p1", {}, frozenset(), HOUR, (HOUR,), (HOUR // 24,), BucketEpochs(BUCKETS),
                                              populate=True, observe=observe), bucket, rows.take(members),
                                  MemoryCache()) for observe in (False, True)]
        enforced, observed = outcomes
        assert observed.counts == enforced.counts and observed.counts.output_rows == 0
        assert observed.emitted.tolist() == enforced.emitted.tolist()
        assert observed.output.equals(enforced.output) and observed.audit.equals(enforced.audit)
        assert observed.segments == enforced.segments
