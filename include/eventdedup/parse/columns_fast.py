"""Declared columns of a whole chunk at once (issue 53), for the rows the compiled core vouched for:
the core (native/parse_core.cpp) converts each column's values while it reads the line, as
eventdedup.parse.columns (the reference) converts them, into Arrow's buffers (arrays, maps and
structs too: their entries, offsets and members), and Arrow builds the columns from those buffers
in place, with no Python object per value.

A value is vouched for only where its conversion is certainly the reference's. Anything the core
leaves (a mismatch anywhere in a value, or a value whose rule is subtle: an ISO time one step from
the strict shape, an epoch string with spaces, a decimal spelt with an exponent, a path through a
non-object) sends its row to the reference, `event_columns`, whole: its values, its mismatches
and, under on_mismatch = "quarantine", its reason are the reference's. A vouched row has no
mismatch. tests/unit/parse/test_columns_fast.py holds the two equal on random and edge values of
every type and shape, and holds values that fit to the core; the fuzzer
(fuzz/parse_core_fuzz.py) holds the core's columns to the reference on any bytes.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from eventdedup.column_types import ColumnType, DeclaredColumn
from eventdedup.parse.columns import columns_of_events
from eventdedup.parse.native_core import COLUMN_UNSURE, COLUMN_VALUE, CoreColumn
from eventdedup.tables import DECLARED_PREFIX, MISMATCHED

Mask = npt.NDArray[np.bool_]
Converted = tuple[pa.Array, Mask]


def core_columns(found: Sequence[CoreColumn], count: int, columns: Sequence[DeclaredColumn],
                 event_of: Callable[[int], Any], quarantine: bool) -> tuple[dict[str, pa.Array], list[int]]:
    """declared_arrays of the core's columns of `count` vouched rows (native_core.scan's
    `columns`), as event_columns gives them one by one, and the rows it refuses (under
    `quarantine`, a mismatch: the caller leaves them to the reference parser, which quarantines
    them with their reason). `event_of(row)` is a row's parsed event, for the rows the reference
    decides. The arrays hold a row per row not refused, in order."""
    arrays: list[pa.Array] = []
    unsure = np.zeros(count, bool)
    for column, entries in zip(columns, found, strict=True):
        array, doubtful = _from_core(column.column_type, count, np.frombuffer(entries[0], np.uint8), entries)
        arrays.append(array)
        unsure |= doubtful
    names = [DECLARED_PREFIX + column.name for column in columns]
    if not unsure.any():
        out = dict(zip(names, arrays, strict=True))
        out[MISMATCHED.name] = pa.nulls(count, MISMATCHED.type)
        return out, []
    # The rows not vouched for: the reference's values, put in place of the core's.
    slow_rows = np.flatnonzero(unsure).tolist()
    reference, refused_slow = columns_of_events([event_of(row) for row in slow_rows], columns, quarantine)
    refused = [slow_rows[position] for position in refused_slow]
    kept_slow = sorted(set(slow_rows).difference(refused))
    order = np.arange(count, dtype=np.int64)
    order[kept_slow] = count + np.arange(len(kept_slow), dtype=np.int64)
    if refused:
        order = np.delete(order, refused)
    take = pa.array(order, pa.int64())
    out = {name: pa.concat_arrays([array, reference[name]]).take(take)
           for name, array in zip(names, arrays, strict=True)}
    out[MISMATCHED.name] = pa.concat_arrays([pa.nulls(count, MISMATCHED.type), reference[MISMATCHED.name]]).take(take)
    return out, refused


def _from_core(kind: ColumnType, count: int, status: npt.NDArray[np.uint8], found: CoreColumn) -> Converted:
    """One column from the core's entries, and the rows it left to the reference."""
    return _arrow_of(kind, count, status, found), status == COLUMN_UNSURE


def _arrow_of(kind: ColumnType, count: int, status: npt.NDArray[np.uint8], found: CoreColumn) -> pa.Array:
    """The Arrow array of `count` entries the core wrote (its buffers, in place): null where an
    entry holds no value (a null, or one the reference decides)."""
    _, values, offsets, keys, key_offsets, children = found
    valid = status == COLUMN_VALUE
    valid_count = int(np.count_nonzero(valid))
    nulls = count - valid_count
    bitmap = None if nulls == 0 else pa.py_buffer(np.packbits(valid, bitorder="little"))
    if kind.kind in ("string", "json"):
        return pa.StringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(values), bitmap, nulls)
    if kind.kind in ("array", "map"):
        assert kind.element is not None
        child_status = np.frombuffer(children[0][0], np.uint8)
        items = _arrow_of(kind.element, len(child_status), child_status, children[0])
        buffers = [bitmap, pa.py_buffer(offsets)]
        if kind.kind == "array":
            return pa.Array.from_buffers(kind.arrow, count, buffers, nulls, children=[items])
        names = pa.StringArray.from_buffers(len(child_status), pa.py_buffer(key_offsets), pa.py_buffer(keys))
        entries = pa.StructArray.from_arrays([names, items], fields=[kind.arrow.key_field, kind.arrow.item_field])
        return pa.Array.from_buffers(kind.arrow, count, buffers, nulls, children=[entries])
    if kind.kind == "struct":
        members = [_arrow_of(member, count, np.frombuffer(child[0], np.uint8), child)
                   for (_, member), child in zip(kind.fields, children, strict=True)]
        return pa.Array.from_buffers(kind.arrow, count, [bitmap], nulls, children=members)
    data = pa.py_buffer(values)
    if kind.kind == "boolean":
        data = pa.py_buffer(np.packbits(np.frombuffer(values, np.uint8).view(np.bool_), bitorder="little"))
    return pa.Array.from_buffers(kind.arrow, count, [bitmap, data], nulls)
