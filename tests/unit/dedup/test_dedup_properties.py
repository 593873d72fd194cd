"""Property: for any stream split into batches, the library's decision of a bucket
(eventdedup.dedup.bucket.decide_bucket, the one the Spark stage calls) equals the plain reference
model row by row, for every policy, with copies of an id in other hours (found through the id
guards), batches arriving hours or days apart under a window, and the cache written and read
back as the encoded segments and guards a commit leaves. Recomputing any committed batch later,
against segments and guards that by then also hold later batches' entries, reproduces its
decisions exactly.

The cache is a dict of the encoded objects (a `BucketCache` over memory, not S3); what the test
reads back of each row is its output and audit columns, the ones the job writes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from eventdedup.cache.epochs import BucketEpochs
from eventdedup.cache.guard import IdGuard, decode_guard, encode_guard
from eventdedup.cache.heads import ChainPolicy
from eventdedup.cache.segment import CacheRun, decode_segment
from eventdedup.cache.segment_parts import runs_holding
from eventdedup.dedup.bucket import BucketOutcome, BucketRules, NewSegment, decide_bucket
from eventdedup.dedup.decide import DuplicatePolicy
from eventdedup.dedup.survivor import SurvivorPolicy
from eventdedup.keys import bucket_array, guard_head_key, key_digest
from eventdedup.parse.order_keys import order_key_of_value
from eventdedup.tables import UTC_MICROS

from ...support.helpers import COMPILED
from ...support.reference_model import ModelEvent, ModelPolicy, ModelStore, Verdict, decide_batch

HOUR = 490_000  # hours since the epoch
DEFAULT_CHAINS = ChainPolicy()
WINDOW = 24
BUCKETS = 2
# An event: its id, the hour its cache key falls in (the same hour, the next, a day later, or
# eight days back: older than the window by event time, which is never what expires), its
# payload fingerprint and its survivor field.
events = st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from([0, 1, 24, -190]), st.integers(1, 3),
                   st.none() | st.integers(-2, 2) | st.sampled_from(["m", "n"]))
# min and max survivors in an ordered store (ordered None) and in one made before ordered stores
# (ordered False: order within batches only).
policies = st.builds(ModelPolicy, synthetic=st.sampled_from(["rename", "drop", "keep"]),
                     survivor=st.sampled_from(["first", "last", "min", "max"]), changelog=st.booleans(),
                     ordered=st.sampled_from([None, None, False]))
# Each batch: its events, how many hours after the batch before it it arrives, and whether it is
# retracted once committed (before the next batch).
streams = st.lists(st.tuples(st.lists(events, min_size=1, max_size=12), st.sampled_from([0, 1, 30]),
                             st.sampled_from([False, False, False, True])),
                   min_size=1, max_size=5)


@dataclass
class MemoryCache:
    """The committed chains, as the encoded objects commits leave: (hour, bucket) segments, oldest
    first, and guards by the state's head name. A commit replaces a key's chain from where its new
    head builds on (`commit`)."""

    segments: dict[tuple[int, int], list[bytes]] = field(default_factory=dict)
    guards: dict[str, bytes] = field(default_factory=dict)

    def runs(self, hour: int, bucket: int, newest: int) -> list[CacheRun]:
        chain = self.segments.get((hour, bucket), [])
        return [run for data in chain[len(chain) - newest:] for run in decode_segment(data, f"{hour}/{bucket}")]

    def runs_holding(self, hour: int, bucket: int, digests: np.ndarray) -> list[CacheRun]:
        """Read in parts, as from S3: a tail of 100 bytes of each object, then the ranges the
        reader asks for."""
        found = []
        for data in self.segments.get((hour, bucket), []):
            runs = runs_holding(data[-100:], len(data), lambda start, stop, data=data: data[start:stop],
                                f"{hour}/{bucket}", digests)
            assert runs is not None  # every segment here is format 2
            found += runs
        return found

    def chain_sizes(self, hour: int, bucket: int) -> list[int]:
        return [len(data) for data in self.segments.get((hour, bucket), [])]

    def commit(self, written: dict[tuple[int, int], NewSegment], guards: dict[str, bytes]) -> None:
        for key, segment in written.items():
            self.segments[key] = [*self.segments.get(key, [])[:segment.builds_on], segment.data]
        self.guards.update(guards)

    def guard(self, head: str) -> IdGuard:
        data = self.guards.get(head)
        return IdGuard.empty() if data is None else decode_guard(data, head)


@dataclass
class Written:
    """What a batch's commit would write: new heads and guards."""

    segments: dict[tuple[int, int], NewSegment] = field(default_factory=dict)
    guards: dict[str, bytes] = field(default_factory=dict)


def bucket_outcomes(cache: MemoryCache, committed: dict[str, int], arrival: int, batch: str,
                    rows: list[tuple[str, int, int, int | None]], policy: ModelPolicy,
                    chains: ChainPolicy = DEFAULT_CHAINS, observe: bool = False,
                    compiled: bool = COMPILED) -> tuple[list[tuple[np.ndarray, BucketOutcome]], Written]:
    """Decide a batch bucket by bucket as the Spark stage does; returns each bucket's rows (indices
    into `rows`, in input order) with its outcome, and the heads its commit would write.
    `committed`: batch -> arrival, in commit order, of the batches committed before it; `compiled`:
    with the compiled dedup core where it is built (the reference, Python, without)."""
    start = arrival - WINDOW
    visible = {owner: i for i, (owner, at) in enumerate(committed.items()) if at >= start}
    last = max([arrival, *(committed[owner] for owner in visible)])
    rules = BucketRules(
        batch, visible_owners=visible, kept_owners=frozenset(committed), arrival_hour=arrival,
        guard_hours=tuple(range(start, last + 1)), guard_days=tuple(range(start // 24, last // 24 + 1)),
        epochs=BucketEpochs(BUCKETS),
        survivor=SurvivorPolicy.parse(policy.survivor if policy.survivor in ("first", "last") else f"{policy.survivor}:p"),
        policy=DuplicatePolicy(policy.synthetic, policy.changelog, policy.survivor if policy.orders_versions else None),
        chains=chains, observe=observe, compiled=compiled)
    table = pa.table({
        "event_id": [key for key, _, _, _ in rows],
        "key_digest": pa.array([key_digest(key) for key, _, _, _ in rows], pa.binary(16)),
        "fingerprint": pa.array([fingerprint for _, _, fingerprint, _ in rows], pa.uint64()),
        "event_time": pa.array([(HOUR + hour) * 3_600_000_000 for _, hour, _, _ in rows], UTC_MICROS),
        "order_key": pa.array([order_key_of_value(value, "p") for _, _, _, value in rows], pa.binary()),
        "cache_hour": pa.array([HOUR + hour for _, hour, _, _ in rows], pa.int64()),
    })
    digests = np.array([key_digest(key) for key, _, _, _ in rows], "S16")
    outcomes = []
    written = Written()
    for bucket in range(BUCKETS):
        members = np.flatnonzero(bucket_array(digests, BUCKETS) == bucket)
        if not len(members):
            continue
        outcome = decide_bucket(rules, bucket, table.take(pa.array(members)), cache)
        outcomes.append((members, outcome))
        written.segments.update(outcome.segments)
        if outcome.guard is not None:
            written.guards[guard_head_key(rules.arrival_hour, bucket)] = encode_guard(outcome.guard)
    return outcomes, written


def decide(cache: MemoryCache, committed: dict[str, int], arrival: int, batch: str,
           rows: list[tuple[str, int, int, int | None]], policy: ModelPolicy,
           chains: ChainPolicy = DEFAULT_CHAINS) -> tuple[list[Verdict], Written]:
    """Decide a batch (enforced) as the Spark stage does; returns its verdicts in input order, read
    off its output and audit columns, and the heads its commit would write."""
    outcomes, written = bucket_outcomes(cache, committed, arrival, batch, rows, policy, chains)
    verdicts: list[Verdict | None] = [None] * len(rows)
    for members, outcome in outcomes:
        for row, audit in zip(outcome.duplicates.tolist(), outcome.audit.to_pylist(), strict=True):
            verdicts[members[row]] = Verdict(audit["reason"], audit["action"], audit["kept_in_batch"],
                                             audit["would_supersede"])
        for row, output in zip(np.flatnonzero(outcome.emitted).tolist(), outcome.output.to_pylist(), strict=True):
            if verdicts[members[row]] is None:
                update = output["op"] == "update"
                verdicts[members[row]] = Verdict("kept", "update" if update else "emit",
                                                 output["supersedes_batch"] if update else batch)
    assert all(verdict is not None for verdict in verdicts)
    return verdicts, written  # type: ignore[return-value]


# Chains of a few tiny objects: no object counts as small, merges by ratio and by chain length.
chain_policies = st.builds(ChainPolicy, merge_ratio=st.sampled_from([1, 2, 8]), small_bytes=st.just(0),
                           max_chain=st.integers(1, 4)) | st.just(ChainPolicy())


@given(stream=streams, policy=policies, rerun_choices=st.lists(st.integers(0, 4), max_size=3), chains=chain_policies)
def test_bucket_decisions_equal_the_reference_model_and_reruns_reproduce_them(stream, policy, rerun_choices,
                                                                              chains) -> None:
    model = ModelStore(window_hours=WINDOW)
    cache = MemoryCache()
    committed: dict[str, int] = {}  # batch -> arrival hour, in commit order
    decided: dict[str, list[Verdict]] = {}
    arrival = HOUR
    for number, (rows, later, retract) in enumerate(stream, start=1):
        batch, arrival = f"b{number}", arrival + later
        expected = decide_batch(model, batch, [ModelEvent(key, fingerprint, value) for key, _, fingerprint, value in rows],
                                policy, arrival)
        got, written = decide(cache, committed, arrival, batch, rows, policy, chains)
        assert got == expected, batch
        cache.commit(written.segments, written.guards)
        assert all(len(chain) <= chains.max_chain for chain in cache.segments.values())
        committed[batch] = arrival
        decided[batch] = got
        if retract:  # the newest batch leaves the view (nothing decided against it yet): its versions go
            model.retract(batch)
            del committed[batch], decided[batch]
            continue
        for choice in rerun_choices:  # recompute an earlier batch against today's heads
            earlier = list(committed)[choice % len(committed)]
            before = dict(list(committed.items())[:list(committed).index(earlier)])
            again, _ = decide(cache, before, committed[earlier], earlier, stream[int(earlier[1:]) - 1][0], policy,
                              chains)
            assert again == decided[earlier], f"rerun of {earlier} after {batch}"


def test_a_copy_in_another_hour_is_found_through_the_guard_and_loads_that_hour() -> None:
    cache = MemoryCache()
    first, written = decide(cache, {}, HOUR, "b1", [("a", 0, 1, None)], ModelPolicy())
    cache.commit(written.segments, written.guards)
    within, _ = decide(cache, {"b1": HOUR}, HOUR + 5, "b2", [("a", 24, 1, None)], ModelPolicy())
    expired, _ = decide(cache, {"b1": HOUR}, HOUR + WINDOW + 1, "b2", [("a", 24, 1, None)], ModelPolicy())
    assert first == [Verdict("kept", "emit", "b1")]
    assert within == [Verdict("cross_batch_natural", "dropped", "b1")]
    assert expired == [Verdict("kept", "emit", "b2")]  # b1 arrived more than a window before


def test_the_counts_of_a_bucket_name_what_was_found_done_and_loaded() -> None:
    cache = MemoryCache()
    _, written = decide(cache, {}, HOUR, "b1", [("a", 0, 1, None)], ModelPolicy())
    cache.commit(written.segments, written.guards)
    bucket = int(bucket_array(np.array([key_digest("a")], "S16"), BUCKETS)[0])
    rules = BucketRules("b2", {"b1": 0}, frozenset({"b1"}), HOUR, tuple(range(HOUR - WINDOW, HOUR + 1)),
                        ((HOUR - WINDOW) // 24, HOUR // 24), BucketEpochs(BUCKETS))
    rows = pa.table({"event_id": ["a", "a"], "key_digest": pa.array([key_digest("a")] * 2, pa.binary(16)),
                     "fingerprint": pa.array([1, 2], pa.uint64()), "event_time": pa.array([0, 0], UTC_MICROS),
                     "order_key": pa.nulls(2, pa.binary()), "cache_hour": pa.array([HOUR + 5] * 2, pa.int64())})
    counts = decide_bucket(rules, bucket, rows, cache).counts
    # a/1 is b1's pair (dropped), a/2 a new payload of b1's key (renamed); both kept copies lie in
    # hour 0, which only b1's guard names; the renamed pair is the one entry b2 adds.
    assert {name: value for name, value in counts.items() if value} == {
        "cross_batch_natural": 1, "cross_batch_duplicates": 1, "cross_batch_synthetic": 1, "renamed": 1,
        "output_rows": 1, "cross_hour_duplicates": 2, "guard_hours_loaded": 1, "cache_keys_written": 1}
