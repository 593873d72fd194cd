"""The dedup stage's distinct (hour, key) and (hour, bucket) pairs: the packed fast path and the
row-wise fallback both give exactly the sorted set of pairs."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from eventdedup.dedup.bucket import distinct_pairs

small = st.integers(-500_000, 500_000)
huge = st.integers(-(1 << 62), (1 << 62))  # spans no int64 packing can hold: the fallback


@given(st.lists(st.tuples(small | huge, small | huge), max_size=60))
def test_distinct_pairs_are_the_sorted_set_of_pairs(pairs: list[tuple[int, int]]) -> None:
    major = np.array([a for a, _ in pairs], np.int64)
    minor = np.array([b for _, b in pairs], np.int64)
    got_major, got_minor = distinct_pairs(major, minor)
    assert list(zip(got_major.tolist(), got_minor.tolist(), strict=True)) == sorted(set(pairs))
    assert got_major.dtype == got_minor.dtype == np.int64


def test_hours_and_row_indices_take_the_packed_path_and_keep_their_order() -> None:
    hours = np.array([493_210, 493_190, 493_210, 493_190, 493_211], np.int64)
    keys = np.array([7, 2, 7, 0, 2], np.intp)
    got_hours, got_keys = distinct_pairs(hours, keys)
    assert got_hours.tolist() == [493_190, 493_190, 493_210, 493_211]
    assert got_keys.tolist() == [0, 2, 7, 2]
