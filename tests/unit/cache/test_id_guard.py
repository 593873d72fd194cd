"""The id guard: every id added is found, with the hour that holds it; damage is refused; a
format-1 guard (one per arrival day, 32-bit hashes, before 2026-11-26) is still read."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventdedup.cache.guard import HASH_BITS, GuardProbe, IdGuard, decode_guard, encode_guard, guard_hashes
from eventdedup.errors import CorruptStateError
from eventdedup.keys import DIGEST_DTYPE

from ...support.format_1 import format_1_guard


def random_digests(count: int, seed: int) -> np.ndarray:
    return np.frombuffer(np.random.default_rng(seed).bytes(16 * count), DIGEST_DTYPE).copy()


def test_every_added_id_is_found_with_its_hour_after_a_round_trip() -> None:
    first, second = random_digests(5000, 1), random_digests(3000, 2)
    guard = IdGuard.empty().with_ids(first, np.full(5000, 490_000)).with_ids(second, np.arange(3000) % 7 + 490_001)
    guard = decode_guard(encode_guard(guard), "g")
    query, hours = guard.candidate_hours(np.concatenate([first, second]))
    found: dict[int, set[int]] = {}
    for q, h in zip(query.tolist(), hours.tolist(), strict=True):
        found.setdefault(q, set()).add(h)
    expected = {**{i: 490_000 for i in range(5000)}, **{5000 + i: i % 7 + 490_001 for i in range(3000)}}
    assert all(expected[q] in found.get(q, set()) for q in expected)
    # Hash collisions aside, a hit names only its own hour (a 46-bit hash over 8,000 ids).
    assert sum(len(hours_of) for hours_of in found.values()) == 8000


def test_ids_never_added_are_rarely_hits_and_an_added_id_twice_is_one_entry() -> None:
    added = random_digests(20_000, 3)
    guard = IdGuard.empty().with_ids(added, np.full(20_000, 5)).with_ids(added[:10], np.full(10, 5))
    assert len(guard) == 20_000
    query, _ = guard.candidate_hours(random_digests(100_000, 4))
    assert len(query) == 0  # expected 20,000 x 100,000 / 2^46 = 3e-5


def test_colliding_hashes_name_both_hours() -> None:
    digests = random_digests(2, 5)
    same = np.repeat(digests[:1], 2)
    guard = IdGuard.empty().with_ids(same, np.array([10, 20]))
    assert sorted(guard.candidate_hours(digests[:1])[1].tolist()) == [10, 20]
    assert guard_hashes(digests[:1])[0] >> np.uint64(64 - HASH_BITS) == guard.hashes[0]


def test_one_probe_serves_every_guard_it_is_held_against() -> None:
    """A batch hashes and sorts a bucket's ids once and probes each day's guard with them."""
    first, second = random_digests(4000, 11), random_digests(2000, 12)
    day_one = IdGuard.empty().with_ids(first, np.full(4000, 10))
    day_two = IdGuard.empty().with_ids(second, np.full(2000, 20)).with_ids(first[:500], np.full(500, 30))
    queried = np.concatenate([second, first])  # query i < 2000: second[i]; else first[i - 2000]
    probe = GuardProbe.of(queried)
    expected_one = {(2000 + i, 10) for i in range(4000)}
    expected_two = {(i, 20) for i in range(2000)} | {(2000 + i, 30) for i in range(500)}
    for guard, expected in ((day_one, expected_one), (day_two, expected_two)):
        query, hours = guard.candidate_hours(probe)
        hits = set(zip(query.tolist(), hours.tolist(), strict=True))
        assert hits == expected  # 46-bit hashes over 6,000 ids: no collision


def test_a_day_holding_more_than_65536_hours_round_trips_with_wider_slots() -> None:
    count = 70_128  # eight years of hours, arriving in one day (a backfill)
    digests = random_digests(count, 6)
    guard = decode_guard(encode_guard(IdGuard.empty().with_ids(digests, np.arange(count) + 200_000)), "g")
    query, hours = guard.candidate_hours(digests[-3:])
    assert set(zip(query.tolist(), hours.tolist(), strict=True)) >= {(0, 270_125), (1, 270_126), (2, 270_127)}


@pytest.mark.parametrize("damage", ["truncate", "flip", "magic"])
def test_a_damaged_guard_is_refused_not_read_as_empty(damage: str) -> None:
    data = bytearray(encode_guard(IdGuard.empty().with_ids(random_digests(10, 7), np.arange(10))))
    if damage == "truncate":
        data = data[:-9]
    elif damage == "flip":
        data[30] ^= 1
    else:
        data[:4] = b"EDCS"
    with pytest.raises(CorruptStateError, match="id guard g"):
        decode_guard(bytes(data), "g")


def test_adding_batch_by_batch_equals_building_the_guard_at_once() -> None:
    rng = np.random.default_rng(8)
    batches = [(random_digests(n, 10 + n), rng.integers(100, 100 + spread, size=n))
               for n, spread in ((3000, 5), (10, 40), (2500, 2))]
    batches.append((batches[0][0][:100], batches[0][1][:100]))  # ids re-added in their hours
    stepwise = IdGuard.empty()
    for digests, hours in batches:
        stepwise = stepwise.with_ids(digests, hours)
    at_once = IdGuard.empty().with_ids(np.concatenate([d for d, _ in batches]), np.concatenate([h for _, h in batches]))
    expected = sorted({(int(h) >> (64 - HASH_BITS), int(hour)) for digests, hours in batches
                       for h, hour in zip(guard_hashes(digests).tolist(), hours.tolist(), strict=True)})
    for guard in (stepwise, at_once):
        entries = sorted(zip(guard.hashes.tolist(), guard.hours[guard.slots.astype(np.int64)].tolist(), strict=True))
        assert entries == expected


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), max_size=30, unique=True),
       st.lists(st.integers(0, 6), max_size=20))
def test_a_probe_names_exactly_the_hours_of_the_entries_sharing_its_hash(entries: list[tuple[int, int]],
                                                                         wanted: list[int]) -> None:
    """Entries with few distinct hashes (runs of equal hashes, at either end of the guard)."""
    hours = np.array([100, 200, 300, 400], np.int64)
    ordered = sorted(entries)
    guard = IdGuard(hours, np.array([h for h, _ in ordered], np.uint64), np.array([s for _, s in ordered], np.uint32))
    order = np.argsort(np.array(wanted, np.uint64), kind="stable")
    probe = GuardProbe(order, np.array(wanted, np.uint64)[order] << np.uint64(64 - HASH_BITS))
    query, named = guard.candidate_hours(probe)
    expected = sorted((q, int(hours[slot])) for q, value in enumerate(wanted) for h, slot in entries if h == value)
    assert sorted(zip(query.tolist(), named.tolist(), strict=True)) == expected


def test_an_id_in_many_hours_is_named_in_each() -> None:
    """A run of equal hashes longer than the step-by-step count: the binary search finishes it."""
    digest = random_digests(1, 21)
    guard = IdGuard.empty().with_ids(np.repeat(digest, 50), np.arange(50) + 1000)
    query, hours = guard.candidate_hours(np.concatenate([random_digests(3, 22), digest]))
    assert sorted(zip(query.tolist(), hours.tolist(), strict=True)) == [(3, 1000 + h) for h in range(50)]


def test_a_guard_costs_under_four_bytes_an_id_at_production_density() -> None:
    """An arrival hour's guard of one bucket at 1M events per 5 minutes and 16 buckets: 750k ids,
    1 % of them stragglers in 24 other hours (bench/scale_history.py's stream)."""
    count = 750_000
    rng = np.random.default_rng(30)
    hours = np.where(rng.random(count) < 0.01, 490_000 - rng.integers(24, 49, count), 490_000)
    data = encode_guard(IdGuard.empty().with_ids(random_digests(count, 31), hours))
    assert len(data) / count < 3.8


def test_a_format_1_day_guard_is_read_with_its_32_bit_hashes() -> None:
    digests = random_digests(3000, 32)
    hours = np.arange(3000) % 5 + 490_000
    hashes = (guard_hashes(digests) >> np.uint64(32)).astype(np.uint32)
    order = np.lexsort((hours, hashes))
    distinct = np.unique(hours)
    guard = decode_guard(format_1_guard(distinct, hashes[order], np.searchsorted(distinct, hours[order])), "old")
    assert guard.hash_bits == 32 and len(guard) == 3000
    query, named = guard.candidate_hours(GuardProbe.of(digests))
    assert set(zip(query.tolist(), named.tolist(), strict=True)) >= set(enumerate(hours.tolist()))
    with pytest.raises(ValueError, match="46-bit"):  # never copied forward into a format-2 guard
        encode_guard(guard.with_ids(digests[:1], hours[:1]))


@given(st.integers(0, 70), st.integers(1, 60))
def test_every_size_and_hour_spread_round_trips(count: int, spread: int) -> None:
    digests = random_digests(count, count * 100 + spread)
    hours = (np.arange(count) * 7919) % spread + 1000
    guard = IdGuard.empty().with_ids(digests, hours)
    again = decode_guard(encode_guard(guard), "g")
    assert again.entries() == guard.entries() and len(again) == len(guard)
