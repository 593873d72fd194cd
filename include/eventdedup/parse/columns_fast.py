"""Declared columns at speed (issue 53): the compiled core (native/parse_core.cpp) converts each
column's values while it reads a line, as eventdedup.parse.columns (the reference) converts them,
into Arrow's buffers (arrays, maps and structs too: their entries, offsets and members), and Arrow
builds the columns from those buffers in place, with no Python object per value.

A batch extracts them once, for its output rows only: after the dedup decided which rows are
output, from their raw lines (`columns_of_raw`): the values never cross the shuffle, and no
duplicate's are read. Under on_mismatch = "quarantine" the parse also checks that every value fits
(`refused_rows`, of the lines the core vouches for; the reference parser checks the rest), since a
line quarantined there is never deduplicated.

A value is vouched for only where its conversion is certainly the reference's. Anything the core
leaves (a line it does not find canonical, a mismatch anywhere in a value, or a value whose rule is
subtle: an ISO time one step from the strict shape, an epoch string with spaces, a decimal spelt
with an exponent, a path through a non-object) sends its row to the reference, `event_columns`,
whole: its values, its mismatches and, under on_mismatch = "quarantine", its reason are the
reference's. A vouched row has no mismatch. tests/unit/parse/test_columns_fast.py holds the two
equal on random and edge values of every type and shape, and holds values that fit to the core;
the fuzzer (fuzz/parse_core_fuzz.py) holds the core's columns to the reference on any bytes.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa

from eventdedup.column_types import ColumnType, DeclaredColumn
from eventdedup.parse import native_core
from eventdedup.parse.columns import columns_of_events
from eventdedup.parse.native_core import COLUMN_UNSURE, COLUMN_VALUE, CoreColumn
from eventdedup.tables import MISMATCHED

Mask = npt.NDArray[np.bool_]

# The most bytes of lines one call of the core (or of the reference) reads: every text built of
# them (a string's, a map's keys, a json value's) stays far inside Arrow's int32 offsets (a string
# and a key are never longer than their lines; a json value's text is orjson's, whose floats may be
# longer than the line spelt them, 1e15 as 1000000000000000.0: at most ~4.5x, 1.2 GiB); and what a
# call holds at once stays bounded however large the hour.
SLICE_BYTES = 1 << 28


def columns_of_raw(raw: pa.Array | pa.ChunkedArray, columns: Sequence[DeclaredColumn],
                   compiled: bool = True) -> dict[str, pa.ChunkedArray]:
    """The declared columns of output rows from their raw lines (an Arrow string array, or chunked:
    each line a JSON object the parse accepted), under their own names in declared order, then
    `mismatched`: a value that does not fit is null and listed there, never refused (the parse
    quarantined the lines on_mismatch = "quarantine" refuses). By the compiled core for the lines
    it finds canonical and the reference for the rest; by the reference alone where the core is not
    built or `compiled` ([events] compiled_parser) is off. The lines are read SLICE_BYTES at a time
    (a larger chunk in slices, read in place; smaller chunks together), never all in one array (an
    hour's lines may pass 2 GiB, which one Arrow string array cannot hold): the columns come back
    chunked, a chunk a call."""
    if raw.type != pa.string():
        raise TypeError(f"raw lines must be an Arrow string array, not {raw.type}")
    if raw.null_count:
        raise ValueError("an output row has no raw line")
    core = native_core.in_use(compiled)
    parts = [_columns_of_slice(lines, columns, core) for lines in _slices(raw)]
    if not parts:
        parts = [_columns_of_slice(pa.array([], pa.string()), columns, core)]
    return {name: pa.chunked_array([part[name] for part in parts], parts[0][name].type) for name in parts[0]}


def _columns_of_slice(lines: pa.Array, columns: Sequence[DeclaredColumn], core: bool) -> dict[str, pa.Array]:
    if not core:
        arrays, _ = columns_of_events((orjson.loads(line) for line in lines.to_pylist()), columns, False)
        return arrays
    _, found = native_core.columns(lines, columns)
    arrays, _ = core_columns(found, len(lines), columns, _line_parser(lines), False)
    return arrays


def _line_parser(lines: pa.Array) -> Callable[[int], Any]:
    """A row's event, for the rows the reference decides: its line parsed again (few)."""
    def event_of(row: int) -> Any:
        return orjson.loads(lines[row].as_py())
    return event_of


def _slices(raw: pa.Array | pa.ChunkedArray) -> Iterator[pa.Array]:
    """The lines as arrays of consecutive lines of at most SLICE_BYTES between them (a longer line
    alone): a chunk that fits whole as it is, a larger one in slices of it (no copy), consecutive
    smaller ones (the shuffle's pieces: a partition's lines arrive in many) joined into one (a copy
    of at most SLICE_BYTES), so that a call's fixed cost is paid per SLICE_BYTES, not per piece."""
    group: list[pa.Array] = []
    size = 0
    for piece, piece_bytes in _pieces(raw):
        if group and size + piece_bytes > SLICE_BYTES:
            yield group[0] if len(group) == 1 else pa.concat_arrays(group)
            group, size = [], 0
        group.append(piece)
        size += piece_bytes
    if group:
        yield group[0] if len(group) == 1 else pa.concat_arrays(group)


def _pieces(raw: pa.Array | pa.ChunkedArray) -> Iterator[tuple[pa.Array, int]]:
    """Each non-empty chunk (whole where it holds at most SLICE_BYTES of lines, else in slices of at
    most that, a longer line alone), with its bytes of lines."""
    for chunk in raw.chunks if isinstance(raw, pa.ChunkedArray) else [raw]:
        if not len(chunk):
            continue
        offsets = native_core.line_offsets(chunk)
        total = int(offsets[-1]) - int(offsets[0])
        if total <= SLICE_BYTES:
            yield chunk, total
            continue
        ends = offsets[1:].astype(np.int64) - int(offsets[0])
        start, before = 0, 0
        while start < len(chunk):
            stop = max(int(np.searchsorted(ends, before + SLICE_BYTES, side="right")), start + 1)
            yield chunk.slice(start, stop - start), int(ends[stop - 1]) - before
            start, before = stop, int(ends[stop - 1])


def refused_rows(found: Sequence[CoreColumn], count: int, columns: Sequence[DeclaredColumn],
                 event_of: Callable[[int], Any]) -> list[int]:
    """Of `count` rows the core vouched for (native_core.scan's `columns`), those with a value that
    does not fit its column (on_mismatch = "quarantine": the caller leaves them to the reference
    parser, which quarantines them with the reason). A row the core vouched for fits; the
    reference decides the others (`event_of(row)`: a row's parsed event)."""
    slow_rows = np.flatnonzero(_unsure(found, count)).tolist()
    _, refused = columns_of_events((event_of(row) for row in slow_rows), columns, True)
    return [slow_rows[position] for position in refused]


def core_columns(found: Sequence[CoreColumn], count: int, columns: Sequence[DeclaredColumn],
                 event_of: Callable[[int], Any], quarantine: bool) -> tuple[dict[str, pa.Array], list[int]]:
    """declared_arrays of the core's columns of `count` rows (native_core.columns' or scan's), as
    event_columns gives them one by one, and the rows it refuses (under `quarantine`, a
    mismatch). `event_of(row)` is a row's parsed event, for the rows the reference decides. The
    arrays hold a row per row not refused, in order."""
    arrays = [_arrow_of(column.column_type, count, np.frombuffer(entries[0], np.uint8), entries)
              for column, entries in zip(columns, found, strict=True)]
    unsure = _unsure(found, count)
    names = [column.name for column in columns]
    if not unsure.any():
        out = dict(zip(names, arrays, strict=True))
        out[MISMATCHED.name] = pa.nulls(count, MISMATCHED.type)
        return out, []
    # The rows not vouched for: the reference's values, put in place of the core's.
    slow_rows = np.flatnonzero(unsure).tolist()
    reference, refused_slow = columns_of_events((event_of(row) for row in slow_rows), columns, quarantine)
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


def _unsure(found: Sequence[CoreColumn], count: int) -> Mask:
    """The rows of `count` the core left to the reference: unsure in any column (a row is unsure in
    a column where anything in its value is)."""
    unsure = np.zeros(count, bool)
    for entries in found:
        unsure |= np.frombuffer(entries[0], np.uint8) == COLUMN_UNSURE
    return unsure


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
