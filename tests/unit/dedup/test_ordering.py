"""The newest version wins across batches by the event's own order (issue 54), case by case.

The properties (test_dedup_properties.py) hold the stage to the reference model on random streams;
these pin each documented rule with a hand-written expectation, so that a rule the random streams
rarely reach (a tie, two missing values, a value cut at 255 bytes) cannot change unnoticed:

- survivor "max" (or "min"): a version follows the current one when its value orders after it or
  ties with it: ties go to commit order, the later batch wins;
- a version without a value never follows one with a value; one with a value always follows one
  without; two without tie;
- numbers order before strings; strings by their UTF-8 bytes; an order key is cut at 255 bytes;
- changelog on: a version that does not follow is a stale_version, dropped, held by the current
  version's batch; changelog off: the audit says whether it would have superseded the kept one.
"""
from __future__ import annotations

from eventdedup.cache.segment import ORDER_KEY_BYTES
from eventdedup.parse.order_keys import order_key_of_value

from ...support.reference_model import ModelPolicy, Verdict
from .test_dedup_properties import HOUR, MemoryCache, bucket_outcomes, decide

MAX = ModelPolicy(survivor="max", changelog=True)
MIN = ModelPolicy(survivor="min", changelog=True)

Row = tuple[str, int, int, "int | str | None"]


def run(policy: ModelPolicy, *batches: list[Row], retract: tuple[str, ...] = ()) -> list[list[Verdict]]:
    """Each batch decided against the ones committed before it, an hour apart; a batch named in
    `retract` leaves the committed view right after its commit."""
    cache, committed, verdicts = MemoryCache(), {}, []
    for number, rows in enumerate(batches, start=1):
        batch, arrival = f"b{number}", HOUR + number
        got, written = decide(cache, committed, arrival, batch, rows, policy)
        verdicts.append(got)
        cache.commit(written.segments, written.guards)
        committed[batch] = arrival
        if batch in retract:
            del committed[batch]
    return verdicts


def update(of: str) -> Verdict:
    return Verdict("kept", "update", of)


def stale(held_by: str) -> Verdict:
    return Verdict("stale_version", "dropped", held_by)


def emit(batch: str) -> Verdict:
    return Verdict("kept", "emit", batch)


def test_under_max_an_older_version_is_stale_a_newer_one_updates_a_tie_goes_to_the_later_batch() -> None:
    assert run(MAX, [("a", 0, 1, 5)], [("a", 0, 2, 3)], [("a", 0, 3, 7)], [("a", 0, 4, 7)], [("a", 0, 4, 9)]) == [
        [emit("b1")],
        [stale("b1")],  # 3 < 5
        [update("b1")],  # 7 > 5: b2 committed no version
        [update("b3")],  # 7 ties 7: the later batch wins
        [Verdict("cross_batch_natural", "dropped", "b4")],  # b4's own payload again, whatever its value
    ]


def test_under_min_the_smaller_value_wins() -> None:
    assert run(MIN, [("a", 0, 1, 5)], [("a", 0, 2, 7)], [("a", 0, 3, 3)]) == [
        [emit("b1")], [stale("b1")], [update("b1")]]


def test_missing_values_never_follow_present_ones_and_tie_with_each_other() -> None:
    assert run(MAX, [("a", 0, 1, None)], [("a", 0, 2, None)], [("a", 0, 3, -4)], [("a", 0, 4, None)]) == [
        [emit("b1")],
        [update("b1")],  # both missing: a tie, commit order
        [update("b2")],  # a value follows no value, however small
        [stale("b3")],  # no value never follows one
    ]


def test_numbers_order_before_strings_and_strings_by_their_bytes() -> None:
    assert run(MAX, [("a", 0, 1, "m")], [("a", 0, 2, 1000)], [("a", 0, 3, "n")], [("a", 0, 4, "mz")]) == [
        [emit("b1")], [stale("b1")], [update("b1")], [stale("b3")]]


def test_values_that_agree_on_their_first_255_bytes_tie() -> None:
    # An order key is a tag byte and the string's bytes, cut at 255 bytes: these differ after it.
    prefix = "x" * (ORDER_KEY_BYTES - 1)
    high, low = prefix + "b", prefix + "a"
    assert order_key_of_value(high, "p") > order_key_of_value(low, "p")  # in a batch, the whole values
    assert run(MAX, [("a", 0, 1, high)], [("a", 0, 2, low)]) == [[emit("b1")], [update("b1")]]
    assert run(MAX, [("a", 0, 1, prefix[:-1] + "b")], [("a", 0, 2, prefix[:-1] + "a")]) == [
        [emit("b1")], [stale("b1")]]  # a difference inside the first 255 bytes still orders


def test_every_copy_of_a_stale_batch_is_stale_and_the_batch_best_version_decides() -> None:
    # b2's best version under max is its value 3 (fingerprint 2), older than b1's 5: all of b2's
    # copies of key a are stale, its copies of that payload and its other payload alike.
    assert run(MAX, [("a", 0, 1, 5)], [("a", 0, 2, 3), ("a", 0, 2, 3), ("a", 0, 6, 1), ("b", 0, 1, 1)]) == [
        [emit("b1")], [stale("b1"), stale("b1"), stale("b1"), emit("b2")]]
    # With a newer version among them, that one updates and the rest are its in-batch duplicates.
    assert run(MAX, [("a", 0, 1, 5)], [("a", 0, 2, 3), ("a", 0, 6, 8), ("a", 0, 6, 8)]) == [
        [emit("b1")], [Verdict("in_batch_synthetic", "dropped", "b2"), update("b1"),
                       Verdict("in_batch_natural", "dropped", "b2")]]


def test_a_copy_in_another_hour_is_ordered_against_the_version_in_its_first_hour() -> None:
    assert run(MAX, [("a", 0, 1, 5)], [("a", 1, 2, 3)], [("a", 24, 3, 6)]) == [
        [emit("b1")], [stale("b1")], [update("b1")]]


def test_the_current_version_is_the_newest_committed_one_and_a_retraction_restores_the_one_before() -> None:
    # b2 (7) is retracted: b1's 5 is current again, so 6 updates it and 4 is stale against it.
    assert run(MAX, [("a", 0, 1, 5)], [("a", 0, 2, 7)], [("a", 0, 3, 6)], retract=("b2",)) == [
        [emit("b1")], [update("b1")], [update("b1")]]
    assert run(MAX, [("a", 0, 1, 5)], [("a", 0, 2, 7)], [("a", 0, 3, 4)], retract=("b2",)) == [
        [emit("b1")], [update("b1")], [stale("b1")]]
    assert run(MAX, [("a", 0, 1, 5)], [("a", 0, 2, 7)], [("a", 0, 3, 6)]) == [
        [emit("b1")], [update("b1")], [stale("b2")]]


def test_without_changelog_the_audit_says_whether_a_version_would_have_superseded_the_kept_one() -> None:
    policy = ModelPolicy(survivor="max", changelog=False, synthetic="rename")
    assert run(policy, [("a", 0, 1, 5)], [("a", 0, 2, 3)], [("a", 0, 3, 5)], [("a", 0, 4, 9)]) == [
        [emit("b1")],
        [Verdict("cross_batch_synthetic", "renamed", "b1", False)],
        [Verdict("cross_batch_synthetic", "renamed", "b1", True)],  # a tie would have superseded
        [Verdict("cross_batch_synthetic", "renamed", "b1", True)],  # against the kept copy, b1's
    ]


def test_a_store_made_before_ordered_stores_orders_within_batches_only() -> None:
    policy = ModelPolicy(survivor="max", changelog=False, synthetic="drop", ordered=False)
    assert run(policy, [("a", 0, 1, 5)], [("a", 0, 2, 3), ("a", 0, 3, 4)]) == [
        [emit("b1")], [Verdict("cross_batch_synthetic", "dropped", "b1"),
                       Verdict("cross_batch_synthetic", "dropped", "b1")]]


def test_integers_beyond_a_double_order_by_their_digits_across_batches() -> None:
    assert run(MAX, [("a", 0, 1, 1_700_000_000_000_000_001)], [("a", 0, 2, 1_700_000_000_000_000_000)],
               [("a", 0, 3, 1_700_000_000_000_000_002)]) == [[emit("b1")], [stale("b1")], [update("b1")]]


def test_changelog_would_update_counts_keys_whose_preferred_version_would_supersede() -> None:
    """b2 brings a at 7 twice and at 6, and b at 1 (older than b1's 2): changelog would emit one
    update (a's 7, the survivor) and none for b, whatever the synthetic policy does with the copies."""
    for synthetic in ("drop", "rename", "keep"):
        policy = ModelPolicy(survivor="max", changelog=False, synthetic=synthetic)
        cache = MemoryCache()
        _, written = decide(cache, {}, HOUR + 1, "b1", [("a", 0, 1, 5), ("b", 0, 1, 2)], policy)
        cache.commit(written.segments, written.guards)
        outcomes, _ = bucket_outcomes(cache, {"b1": HOUR + 1}, HOUR + 2, "b2",
                                      [("a", 0, 2, 7), ("a", 0, 2, 7), ("a", 0, 3, 6), ("b", 0, 2, 1)], policy)
        assert sum(outcome.counts.changelog_would_update for _, outcome in outcomes) == 1, synthetic
