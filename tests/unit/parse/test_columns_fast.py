"""The declared columns the compiled core extracts (native/parse_core.cpp through
eventdedup.parse.columns_fast, issue 53) against the reference, one event at a time
(eventdedup.parse.columns.event_columns): the same arrays (values, nulls, mismatches) and the same
refused rows under on_mismatch = "quarantine", for random values of every type, fitting or not;
and the core itself, not the reference, converts the values that fit their type."""
from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventdedup.column_types import DeclaredColumn, declared_column
from eventdedup.parse import columns_fast, native_core
from eventdedup.parse.columns import columns_of_events

SPECS: dict[str, Any] = {
    "s": "string", "n": "long", "i": "int", "d": "double", "f": "float", "b": "boolean", "t": "timestamp",
    "day": "date", "amount": "decimal(9,2)", "wide": "decimal(38,10)", "whole": "decimal(5,0)", "unit": "decimal(38,38)", "j": "json",
    "tags": "array<string>", "times": "array<timestamp>", "prices": "array<decimal(5,1)>",
    "geo": "struct<lat:double,lon:double>", "deep": "struct<a:array<long>,m:map<string,date>>",
    "attrs": "map<string,long>", "grid": "array<array<int>>",
    "flags": "array<boolean>", "ratios": "array<float>", "docs": "array<json>", "who": "struct<name:string,at:timestamp>",
    "os": {"path": "ctx.device.os", "type": "string"}, "level": {"path": "ctx.level", "type": "long"},
}
COLUMNS: tuple[DeclaredColumn, ...] = tuple(declared_column(name, spec, "test") for name, spec in SPECS.items())
FIELDS = [name for name in SPECS if name not in ("os", "level")] + ["ctx"]

pytestmark = pytest.mark.skipif(
    not native_core.available(),
    reason=f"the compiled parse core is not built ({native_core.why_not()}); `make venv` builds it")

TEXTS = ["", "u1", "é", "a\"b\\c\n\u0001\t", "\u001f\b\f\r",
         "2026-11-22", "2026-02-30", "0000-01-01", "0001-01-01", "9999-12-31", "2026-1-01",
         "2026-11-22T05:00:00Z", "2026-11-22T05:00:00.123456+02:00", "2026-11-22T05:00:00.1234567Z",
         "2026-11-22 05:00:00Z", "2026-11-22T05:00:00+0200", "2026-11-22T05:00:00", "9999-12-31T23:59:59-01:00",
         "1000-01-01T00:00:00+01:00", "2026-02-30T00:00:00Z", "1764000000", "1764000000000", " 1764000000",
         "-5", "99999999999999999", "12.30", "-12.30", "-0", "007.5", "1e3", "12.345", "1234567.89", "12345678.9",
         "0.10000000000000000000000000000000000000001", "1" * 39, "9" * 29, "9" * 30, "9" * 38, "99999.5",
         "0.5", "0.99", "-0.000", "00000000000000000000000000000000000000001", "9" * 28 + ".5", "1." + "0" * 37,
         "0." + "9" * 37 + "0", "0." + "0" * 36 + "1", "true", "null"]
INTEGERS = [0, 1, -1, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1,
            10**11, -(10**11), 99_999_999_999, 9 * 10**15, 9 * 10**15 + 1, 10**17, 253402300799, 253402300800,
            -62135596800, -62135596801, 99999, 100000]
# Around binary32's overflow: FLT_MAX, the halfway point to 2^128 (rounds to infinity: refused) and the double below it.
HALFWAY = float.fromhex("0x1.ffffffp127")
FLOATS = [0.0, -0.0, 0.5, 1.5, 2.5, 12.3, 12.34, 12.345, 1e16, 1e-5, 3.4028235e38, 3.4028236e38, 3.4028235677973366e38,
          HALFWAY, math.nextafter(HALFWAY, 0.0), -HALFWAY, -math.nextafter(HALFWAY, 0.0),
          1e39, 1764000000.5, 1764000000000.5, 0.1, 1e11, 5.0, 99999.5, 1e308, -1e308, 2.0**63, 9e15, 9.000000000000002e15]
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.sampled_from(INTEGERS),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(FLOATS),
    st.sampled_from(TEXTS), st.text(max_size=6))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.sampled_from(["lat", "lon", "a", "m", "k", "device", "os", "level"]), inner, max_size=3)),
    max_leaves=6)
EVENTS = st.lists(st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=10), min_size=1, max_size=25)


def loaded(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events as the parser holds them: orjson's parse of orjson's text."""
    return [orjson.loads(orjson.dumps(event)) for event in events]


def reference(events: Sequence[dict[str, Any]], columns: Sequence[DeclaredColumn],
              quarantine: bool) -> tuple[dict[str, pa.Array], list[int]]:
    return columns_of_events(events, columns, quarantine)


def core_columns(events: list[dict[str, Any]], quarantine: bool,
                 counted: list[int] | None = None) -> tuple[list[int], dict[str, pa.Array], list[int]]:
    """The core's columns of the events' lines (orjson's text, as producers write it): which lines
    it finds canonical (it leaves the others' rows whole to the reference), the columns of every
    line, and the rows it refuses. `counted` gets each row the reference decides."""
    lines = [orjson.dumps(event) for event in events]
    rows, found = native_core.columns(lines, COLUMNS)

    def event_of(row: int) -> Any:
        if counted is not None:
            counted.append(row)
        return orjson.loads(lines[row])
    arrays, refused = columns_fast.core_columns(found, len(lines), COLUMNS, event_of, quarantine)
    return rows.tolist(), arrays, refused


def assert_same(events: list[dict[str, Any]], quarantine: bool) -> list[int]:
    """The core's columns of the events are the reference's; the events whose lines it found canonical."""
    kept, fast, fast_refused = core_columns(events, quarantine)
    slow, slow_refused = reference(events, COLUMNS, quarantine)
    assert fast_refused == slow_refused
    assert list(fast) == list(slow)
    for name, array in slow.items():
        fast[name].validate(full=True)
        assert fast[name].type == array.type, name
        assert fast[name].to_pylist() == array.to_pylist(), name
        assert fast[name].equals(array), name
    return kept


@pytest.mark.parametrize("quarantine", [False, True])
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(events=EVENTS)
def test_the_fast_path_gives_the_references_columns_for_any_values(quarantine: bool,
                                                                   events: list[dict[str, Any]]) -> None:
    assert_same(loaded(events), quarantine)


@pytest.mark.parametrize("quarantine", [False, True])
def test_every_listed_value_in_every_column_and_inside_every_shape(quarantine: bool) -> None:
    """The listed edge values (ranges, roundings, spellings), each alone in every field, as an
    array's element, as an object's member and down the nested paths: the reference's columns."""
    specials: list[Any] = [None, True, False, *INTEGERS, *FLOATS, *TEXTS, [], {}, [1, "a"], {"lat": 1}]
    events: list[dict[str, Any]] = []
    for value in specials:
        for name in FIELDS:
            events.append({name: value})
        shapes = [[value], [value, None], {"lat": value, "lon": value, "a": [value], "m": {"k": value}, "k": value},
                  [[value]], {"device": {"os": value}, "level": value}, {"device": value}]
        events.extend({name: shape} for name in FIELDS for shape in shapes)
    assert_same(loaded(events), quarantine)


# Values that fit their column, as producers send them: the core must convert these itself.
FITTING: dict[str, st.SearchStrategy[Any]] = {
    "s": st.text(max_size=8), "n": st.integers(-(2**63), 2**63 - 1), "i": st.integers(-(2**31), 2**31 - 1),
    "d": st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-(2**63), 2**63 - 1)),
    "f": st.floats(-1e30, 1e30), "b": st.booleans(),
    "t": st.one_of(st.integers(0, 4 * 10**12), st.floats(0, 4e12),
                   st.datetimes(datetime(1970, 1, 1), datetime(2100, 1, 1)).map(lambda moment: moment.isoformat() + "Z"),
                   st.integers(0, 4 * 10**9).map(str)),
    "day": st.dates().map(lambda day: day.isoformat()),
    "amount": st.one_of(st.integers(-9_999_999, 9_999_999), st.decimals(-9_999_999, 9_999_999, places=2)
                        .map(lambda number: format(number, "f")), st.sampled_from([12.5, 0.25, -3.75, 100.0])),
    "wide": st.decimals(-(10**17), 10**17, places=10).map(lambda number: format(number, "f")),
    "whole": st.integers(-99_999, 99_999),
    "unit": st.decimals(-1, 1, places=27).filter(lambda number: abs(number) < 1).map(lambda number: format(number, "f")),
    "j": VALUES, "tags": st.lists(st.one_of(st.none(), st.text(max_size=4)), max_size=3),
    "times": st.lists(st.integers(0, 2 * 10**9), max_size=3),
    "prices": st.lists(st.decimals(-9999, 9999, places=1).map(lambda number: format(number, "f")), max_size=3),
    "geo": st.fixed_dictionaries({"lat": st.floats(-90, 90), "lon": st.floats(-180, 180)}),
    "deep": st.fixed_dictionaries({"a": st.lists(st.integers(-5, 5), max_size=3),
                                   "m": st.dictionaries(st.text(max_size=3), st.dates().map(str), max_size=2)}),
    "attrs": st.dictionaries(st.text(max_size=3), st.integers(-(2**63), 2**63 - 1), max_size=3),
    "grid": st.lists(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=2), max_size=2),
    "flags": st.lists(st.one_of(st.none(), st.booleans()), max_size=3),
    "ratios": st.lists(st.floats(-1e6, 1e6, width=32), max_size=3), "docs": st.lists(VALUES, max_size=2),
    "who": st.fixed_dictionaries({"name": st.text(max_size=4)},
                                 optional={"at": st.datetimes(datetime(1000, 1, 2), datetime(9999, 12, 30))
                                           .map(lambda moment: moment.isoformat() + "+00:00")}),
    "ctx": st.fixed_dictionaries({"device": st.fixed_dictionaries({"os": st.sampled_from(["ios", "android"])}),
                                  "level": st.integers(0, 9)}),
}


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(st.fixed_dictionaries({}, optional=FITTING), min_size=1, max_size=25))
def test_values_that_fit_are_converted_by_the_core_not_the_reference(events: list[dict[str, Any]]) -> None:
    """Of the lines the core finds canonical (a float orjson spells with an exponent leaves its
    whole line to the reference), none goes to the reference: the core converted every value."""
    events = loaded(events)
    calls: list[int] = []
    kept, fast, refused = core_columns(events, True, calls)
    slow, slow_refused = reference(events, COLUMNS, True)
    assert refused == slow_refused == []  # nothing here mismatches
    assert all(fast[name].equals(array) for name, array in slow.items())
    assert calls == [row for row in range(len(events)) if row not in kept]  # the core vouched for the rest itself


def test_a_random_mix_is_mostly_converted_by_the_core() -> None:
    """Coverage over a fixed mix: of 2,000 events, one in ten with one value that mismatches, all
    canonical lines: the reference sees only those with the mismatch."""
    events = loaded([{"s": f"u{row}", "n": row * 7919, "i": row, "d": row / 8, "f": row / 4, "b": row % 2 == 0,
                      "t": ("2026-11-22T05:00:00.123+00:00", 1_764_000_000 + row, "1764000000000", 1.7e9 + row / 3)[row % 4],
                      "day": "2026-11-22", "amount": (row / 100, str(Decimal(row) / 100), row)[row % 3],
                      "wide": "12345.6789", "whole": row, "j": {"a": [row]}, "tags": ["a", None],
                      "times": [row], "prices": ["1.5"], "geo": {"lat": 1.5, "lon": -2.25},
                      "deep": {"a": [1], "m": {"x": "2026-01-01"}}, "attrs": {"k": row}, "grid": [[1], []],
                      "flags": [True, None], "ratios": [row / 2], "docs": [{"k": row}, "x"],
                      "who": {"name": "a\"b", "at": 1_764_000_000 + row},
                      "ctx": {"device": {"os": "ios"}, "level": row % 10},
                      **({"n": "not a number"} if row % 10 == 0 else {})} for row in range(2_000)])
    calls: list[int] = []
    kept, fast, refused = core_columns(events, False, calls)
    slow, _ = reference(events, COLUMNS, False)
    assert kept == list(range(2_000))
    assert refused == [] and all(fast[name].equals(array) for name, array in slow.items())
    assert calls == list(range(0, 2_000, 10))
    assert fast["mismatched"].null_count == 1_800
    assert assert_same(events, True) == kept


def test_a_path_through_a_value_that_is_no_object_is_the_references_mismatch() -> None:
    assert_same(loaded([{"ctx": "ios"}, {"ctx": {"device": 5}}, {"ctx": {"device": None}}, {"ctx": None}, {}]), True)
    assert_same(loaded([{"ctx": [1]}, {"ctx": {"device": {"os": "ios"}}}]), False)


def test_an_empty_chunk() -> None:
    kept, fast, refused = core_columns([], False)
    slow, _ = reference([], COLUMNS, False)
    assert kept == refused == [] and all(fast[name].equals(array) for name, array in slow.items())


def test_columns_of_raw_reads_an_arrays_lines_in_place_in_slices_and_leaves_odd_lines_to_the_reference(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch's output rows take their columns from their raw lines (columns_of_raw): lines in any
    spelling orjson reads (spaces, escapes, key order), a sliced array (an offset into its
    buffers), a chunked one, one of the shuffle's many small pieces, and lines over several of the
    core's calls all give the reference's columns of each line, chunked a call a chunk: as many
    lines as fit in SLICE_BYTES (never all combined: an hour's lines may pass what one string array
    holds; small pieces joined, so a call's fixed cost is not paid per piece)."""
    events = loaded([{"s": f"u{row}", "n": row if row % 7 else "seven", "tags": ["a"] * (row % 3),
                      "geo": {"lat": row / 2, "lon": -1.5}, "ctx": {"device": {"os": "ios"}, "level": row}}
                     for row in range(300)])
    texts = [orjson.dumps(event).decode() for event in events]
    texts[1] = texts[1].replace(",", ", ")  # not canonical: the reference reads the whole row
    texts[2] = texts[2].replace('"s"', '"\\u0073"')
    expected, _ = reference([orjson.loads(text) for text in texts], COLUMNS, False)
    lines = pa.array(["padding", *texts], pa.string()).slice(1)
    assert native_core.columns(lines, COLUMNS)[0].tolist() == [row for row in range(300) if row not in (1, 2)]
    chunked = pa.chunked_array([lines.slice(0, 100), lines.slice(100, 0), lines.slice(100)])
    pieces = pa.chunked_array([lines.slice(row, 1) for row in range(300)])  # the shuffle's many small pieces
    whole = columns_fast.SLICE_BYTES
    sizes = [len(text.encode()) for text in texts]
    for raw, compiled in ((lines, True), (chunked, True), (pieces, True), (chunked, False)):
        for slice_bytes in (whole, 1, 2_000, sizes[0] + sizes[1]):
            monkeypatch.setattr(columns_fast, "SLICE_BYTES", slice_bytes)
            found = columns_fast.columns_of_raw(raw, COLUMNS, compiled)
            assert list(found) == list(expected)
            assert all(found[name].combine_chunks().equals(array) for name, array in expected.items()), slice_bytes
            # A chunk a call: at most SLICE_BYTES of lines (or one longer line), and no more calls than
            # packing the lines greedily takes, plus one at each boundary of the input's chunks.
            lengths = [len(chunk) for chunk in found["s"].chunks]
            bounds = [sum(lengths[:k]) for k in range(len(lengths) + 1)]
            assert all(sum(sizes[a:b]) <= slice_bytes or b - a == 1 for a, b in zip(bounds[:-1], bounds[1:], strict=True)), slice_bytes
            greedy, size = 0, slice_bytes
            for line in sizes:
                if size + line > slice_bytes:
                    greedy, size = greedy + 1, 0
                size += line
            boundaries = raw.num_chunks - 1 if isinstance(raw, pa.ChunkedArray) and raw is not pieces else 0
            assert greedy <= len(lengths) <= greedy + boundaries, slice_bytes
    n = [column.name for column in COLUMNS].index("n")  # a string in a long: the one mismatch, every 7th row
    assert expected["mismatched"].to_pylist() == [[n] if row % 7 == 0 else None for row in range(300)]
    for empty in (pa.array([], pa.string()), pa.chunked_array([], pa.string())):
        assert all(len(array) == 0 for array in columns_fast.columns_of_raw(empty, COLUMNS).values())
    with pytest.raises(ValueError, match="no raw line"):
        columns_fast.columns_of_raw(pa.array([texts[0], None], pa.string()), COLUMNS)
    with pytest.raises(TypeError, match="must be an Arrow string array"):
        columns_fast.columns_of_raw(lines.cast(pa.large_string()), COLUMNS)


@pytest.mark.parametrize("offsets", [[0, 5, 3], [-1, 2], [0, 99], [], [0, 12]])
def test_the_core_refuses_offsets_outside_the_lines(offsets: list[int]) -> None:
    import numpy as np

    from eventdedup.parse.native_core import _CORE, column_specs
    assert _CORE is not None
    with pytest.raises(ValueError, match="offsets must be ascending"):
        _CORE.columns(b'{"s":"abc"}', np.array(offsets, np.int32), column_specs(COLUMNS))
