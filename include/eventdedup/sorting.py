"""Sorting the job's keys fast and exactly, where numpy's general paths are slow for them.

Fixed-width byte strings (key digests S16, key-fingerprint pairs S24): numpy sorts them by
comparing whole strings, and `np.unique(..., return_inverse=True)` does so with a merge sort:
several times slower than sorting the strings' first eight bytes as one unsigned integer.
Big-endian words compare like the bytes they hold, so the first word's order is the strings'
order except among strings sharing it (copies of one key, mostly); only those are ordered
again, by their remaining words and their position. The result is exactly numpy's stable
order, which the tests hold it to.

Integers: numpy 2's `np.unique` finds distinct values with a hash table before sorting them,
about twenty times slower than one sort and a comparison of neighbours when most values are
distinct (packed hour-key pairs, guard entries).
"""
from __future__ import annotations

from types import ModuleType
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from eventdedup import native_dedup

_WORD = 8

Order = npt.NDArray[np.intp]
Integers = TypeVar("Integers", bound=np.integer[Any])


def lex_order(values: npt.NDArray[np.bytes_], core: ModuleType | None = None) -> Order:
    """The indexes that sort `values` (an `S<n>` array), as `np.argsort(values, kind="stable")`;
    `core`: by the compiled dedup core (eventdedup.native_dedup)."""
    width = values.dtype.itemsize
    if core is not None and width and width % _WORD == 0:
        return native_dedup.sort_order(core, values)
    if width == 0 or width % _WORD or len(values) < 2:
        stable: Order = np.argsort(values, kind="stable")
        return stable
    words = _words(values)
    order: Order = np.argsort(words[0])
    first = words[0][order]
    tied_after = first[1:] == first[:-1]
    if not tied_after.any():
        return order
    tied = np.zeros(len(order), bool)  # sorted positions whose first word another string shares
    tied[1:] |= tied_after
    tied[:-1] |= tied_after
    positions = np.flatnonzero(tied)
    rows = order[positions]
    # lexsort's last key is its primary: first word, then the rest, then the original position.
    resorted = np.lexsort([rows, *(word[rows] for word in reversed(words[1:])), first[positions]])
    order[positions] = rows[resorted]
    return order


def unique_inverse(values: npt.NDArray[np.bytes_],
                   core: ModuleType | None = None) -> tuple[npt.NDArray[np.bytes_], Order]:
    """The distinct values, sorted, and each value's index among them: what
    `np.unique(values, return_inverse=True)` returns for a one-dimensional array."""
    order = lex_order(values, core)
    ordered = values[order]
    starts = np.ones(len(ordered), bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    inverse: Order = np.empty(len(values), np.intp)
    inverse[order] = np.cumsum(starts) - 1
    return ordered[starts], inverse


def sorted_bounds(ordered: npt.NDArray[np.bytes_], wanted: npt.NDArray[np.bytes_],
                  first_words: npt.NDArray[np.uint64] | None = None) -> tuple[Order, Order]:
    """Where each wanted string falls among sorted ones: `np.searchsorted(ordered, wanted)` with
    side="left" and side="right", exactly. numpy searches `S<n>` arrays by comparing whole strings
    (a lookup's ~20 comparisons a query, each a call); here the strings' first words are searched
    as integers, and only a query whose first word `ordered` holds is compared further: by whole
    strings when one entry shares it, by numpy's search of that entry's slice when several do.
    `first_words` may pass `ordered`'s first words, computed once for many searches."""
    width = ordered.dtype.itemsize
    if width == 0 or width % _WORD or wanted.dtype.itemsize != width:
        return (np.searchsorted(ordered, wanted, side="left").astype(np.intp),
                np.searchsorted(ordered, wanted, side="right").astype(np.intp))
    first = first_word(ordered) if first_words is None else first_words
    wanted_first = first_word(wanted)
    low: Order = np.searchsorted(first, wanted_first, side="left").astype(np.intp)
    high: Order = np.searchsorted(first, wanted_first, side="right").astype(np.intp)
    sharing = high - low
    one = np.flatnonzero(sharing == 1)
    if len(one):
        entry, query = ordered[low[one]], wanted[one]
        below, equal = entry < query, entry == query
        found_at = low[one]
        low[one] = found_at + below
        high[one] = found_at + (below | equal)
    for row in np.flatnonzero(sharing > 1).tolist():  # a first word many entries share: rare
        start, stop = int(low[row]), int(high[row])
        low[row] = start + int(np.searchsorted(ordered[start:stop], wanted[row], side="left"))
        high[row] = start + int(np.searchsorted(ordered[start:stop], wanted[row], side="right"))
    return low, high


def first_word(values: npt.NDArray[np.bytes_]) -> npt.NDArray[np.uint64]:
    """Each string's first 8 bytes as an unsigned integer that compares as the bytes do."""
    if not len(values):
        return np.zeros(0, np.uint64)
    return _words(values, 1)[0]


def distinct_sorted(values: npt.NDArray[Integers]) -> npt.NDArray[Integers]:
    """The distinct values of an integer array, sorted: `np.unique(values)`."""
    ordered = np.sort(values, axis=None)
    if len(ordered) < 2:
        return ordered
    distinct: npt.NDArray[Integers] = ordered[np.r_[True, ordered[1:] != ordered[:-1]]]
    return distinct


def order_by_group_then_rank(groups: npt.NDArray[np.integer[Any]], ranks: npt.NDArray[np.integer[Any]]) -> Order:
    """The indexes that sort rows by group, then by rank: `np.lexsort((ranks, groups))`.

    Made for non-negative integers with distinct ranks (a survivor priority is a row's place in
    the preference order): each row's (group, rank) packs into one distinct integer, and sorting
    distinct integers needs no stable sort, a quarter of lexsort's two stable passes. Any other
    input (a negative, a tie, a pack that would overflow) is found and sorted by lexsort."""
    if len(groups) == 0:
        return np.zeros(0, np.intp)
    bound = int(ranks.max()) + 1
    if int(ranks.min()) < 0 or int(groups.min()) < 0 or (int(groups.max()) + 1) * bound >= 1 << 62:
        return _lexsorted(groups, ranks)
    packed = groups.astype(np.int64) * bound + ranks
    order: Order = np.argsort(packed)
    ordered = packed[order]
    if len(ordered) > 1 and bool((ordered[1:] == ordered[:-1]).any()):  # a tie: its rows' order matters
        return _lexsorted(groups, ranks)
    return order


def _lexsorted(groups: npt.NDArray[np.integer[Any]], ranks: npt.NDArray[np.integer[Any]]) -> Order:
    order: Order = np.lexsort((ranks, groups))
    return order


def _words(values: npt.NDArray[np.bytes_], count: int | None = None) -> list[npt.NDArray[np.uint64]]:
    """Each string's 8-byte words (its first `count`, or all), read big-endian (so they compare as
    the bytes do), in order."""
    raw = np.ascontiguousarray(values).view(np.uint8).reshape(len(values), -1)
    columns = raw.view(">u8")
    return [columns[:, i].astype(np.uint64) for i in range(columns.shape[1] if count is None else count)]
