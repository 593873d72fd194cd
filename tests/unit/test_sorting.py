"""Sorting fixed-width byte strings: the word-wise fast path orders exactly as the bytes compare,
ties kept in input order, whatever the strings share (first words, whole strings, zero bytes)."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from eventdedup.sorting import (
    distinct_sorted,
    first_word,
    lex_order,
    order_by_group_then_rank,
    sorted_bounds,
    unique_inverse,
)


def _strings(width: int) -> st.SearchStrategy[list[bytes]]:
    # A two-letter alphabet with a zero byte makes shared first words, shared whole strings and
    # trailing zeros (which numpy's S type strips) common, not luck.
    byte = st.sampled_from([0, 1, 255])
    return st.lists(st.lists(byte, min_size=width, max_size=width).map(bytes), max_size=40)


def _array(strings: list[bytes], width: int) -> np.ndarray:
    return np.frombuffer(b"".join(strings), f"S{width}", len(strings)) if strings else np.zeros(0, f"S{width}")


@given(st.sampled_from([8, 16, 24, 12]).flatmap(lambda width: st.tuples(st.just(width), _strings(width))))
def test_lex_order_sorts_by_bytes_and_keeps_ties_in_input_order(case: tuple[int, list[bytes]]) -> None:
    width, strings = case
    expected = sorted(range(len(strings)), key=lambda i: (strings[i], i))
    assert lex_order(_array(strings, width)).tolist() == expected


@given(st.sampled_from([16, 24]).flatmap(lambda width: st.tuples(st.just(width), _strings(width))))
def test_unique_inverse_gives_the_sorted_distinct_strings_and_each_ones_index(case: tuple[int, list[bytes]]) -> None:
    width, strings = case
    distinct = sorted(set(strings))
    values, inverse = unique_inverse(_array(strings, width))
    assert [bytes(value).ljust(width, b"\0") for value in values.tolist()] == distinct
    assert inverse.tolist() == [distinct.index(s) for s in strings]


def test_strings_sharing_their_first_word_are_ordered_by_the_rest() -> None:
    shared = b"\x07" * 8
    strings = [shared + b"\x02" * 8, shared + b"\x01" * 8, b"\x00" * 16, shared + b"\x02" * 8]
    assert lex_order(_array(strings, 16)).tolist() == [2, 1, 0, 3]


@given(st.lists(st.integers(-(1 << 62), 1 << 62) | st.integers(0, 5), max_size=60))
def test_distinct_sorted_is_the_sorted_set(values: list[int]) -> None:
    assert distinct_sorted(np.array(values, np.int64)).tolist() == sorted(set(values))


@given(st.lists(st.integers(0, 6), max_size=60).flatmap(
    lambda groups: st.tuples(st.just(groups), st.permutations(range(len(groups))))))
def test_rows_ordered_by_group_then_rank(case: tuple[list[int], list[int]]) -> None:
    groups, ranks = case
    expected = sorted(range(len(groups)), key=lambda row: (groups[row], ranks[row]))
    assert order_by_group_then_rank(np.array(groups, np.int64), np.array(ranks, np.int64)).tolist() == expected


@given(st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), max_size=40))
def test_any_groups_and_ranks_are_ordered_as_lexsort_orders_them(rows: list[tuple[int, int]]) -> None:
    """Ties and negatives are outside what the packing is for: they are still ordered exactly,
    ties in input order."""
    groups = np.array([g for g, _ in rows], np.int64)
    ranks = np.array([r for _, r in rows], np.int64)
    expected = sorted(range(len(rows)), key=lambda row: (rows[row][0], rows[row][1], row))
    assert order_by_group_then_rank(groups, ranks).tolist() == expected


def test_groups_too_wide_to_pack_are_still_ordered() -> None:
    groups, ranks = np.array([1 << 61, 0, 1 << 61], np.int64), np.array([2, 1, 0], np.int64)
    assert order_by_group_then_rank(groups, ranks).tolist() == [1, 2, 0]


@given(st.sampled_from([16, 24, 12]).flatmap(lambda width: st.tuples(st.just(width), _strings(width), _strings(width))))
def test_sorted_bounds_are_numpys_searchsorted_left_and_right(case: tuple[int, list[bytes], list[bytes]]) -> None:
    width, haystack, needles = case
    ordered = np.sort(_array(haystack, width))
    wanted = _array(needles + haystack[:5], width)  # present and absent strings
    low, high = sorted_bounds(ordered, wanted)
    # numpy's own search, and the definition: entries strictly below, and below or equal.
    assert low.tolist() == np.searchsorted(ordered, wanted, side="left").tolist()
    assert high.tolist() == np.searchsorted(ordered, wanted, side="right").tolist()
    padded = [bytes(v).ljust(width, b"\0") for v in ordered.tolist()]
    assert low.tolist() == [sum(p < n for p in padded) for n in needles + haystack[:5]]
    assert high.tolist() == [sum(p <= n for p in padded) for n in needles + haystack[:5]]


def test_sorted_bounds_with_one_and_many_entries_sharing_a_first_word() -> None:
    shared = b"\x07" * 8
    ordered = np.array(sorted([shared + b"\x01" * 8, shared + b"\x03" * 8, shared + b"\x05" * 8,
                               b"\x08" * 8 + b"\x00" * 8, b"\x09" * 16]), "S16")
    wanted = np.array([shared + b"\x03" * 8, shared + b"\x04" * 8, b"\x08" * 8 + b"\x00" * 8,
                       b"\x08" * 8 + b"\x01" * 8, b"\x00" * 16, b"\xff" * 16], "S16")
    low, high = sorted_bounds(ordered, wanted, first_word(ordered))
    assert low.tolist() == [1, 2, 3, 4, 0, 5]
    assert high.tolist() == [2, 2, 4, 4, 0, 5]
