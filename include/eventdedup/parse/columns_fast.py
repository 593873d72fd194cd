"""Declared columns of a whole chunk at once (issue 53): each column's values gathered from the
chunk's events (`line_columns` parses the lines the compiled core vouched for, dropping each as
soon as its top-level fields are taken; `chunk_columns` takes parsed events) and converted by
Arrow and numpy, instead of the reference's per-event, per-column Python
(eventdedup.parse.columns, which stays the reference).

A value is vouched for here only where its conversion is certainly the reference's: its Python
type is one the column takes as it is (a string for `string`, an int within range for `long`, a
number for `double`, a strict ISO-8601 string or an epoch integer or float for `timestamp`, a plain
decimal text of at most 28 digits that fits for `decimal(p,s)`, ...). A row any of whose columns
is not vouched for (a mismatch, or a value whose rule is subtle: an ISO time one step from the
strict shape, an epoch string with spaces, a float decimal spelt with an exponent, a nested path
through a non-object) goes to the reference, `event_columns`, whole: its values, its mismatches
and, under on_mismatch = "quarantine", its reason are the reference's. A vouched row has no
mismatch. tests/unit/parse/test_columns_fast.py holds the two equal on random and edge values of
every type, and holds values that fit to the fast path.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from eventdedup.column_types import ColumnType, DeclaredColumn
from eventdedup.parse.columns import MAX_TIMESTAMP_US, MIN_TIMESTAMP_US, declared_arrays, event_columns
from eventdedup.parse.event_time import EPOCH_MILLIS_THRESHOLD, InvalidEvent
from eventdedup.tables import DECLARED_PREFIX, MISMATCHED

Mask = npt.NDArray[np.bool_]
NONE = type(None)
_NOT_OBJECT = object()  # a path went through a value that is not an object: the reference says how

# The strict ISO-8601 shape Arrow converts as datetime.fromisoformat reads it (object_parser's
# STRICT_ISO_RE, which imports this module).
_STRICT_ISO = (r"^[1-9]\d{3}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?"
               r"(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$")
# A date Arrow reads as date(int(y), int(m), int(d)) does: year 0 is none (Arrow would take it).
_DATE = r"^(000[1-9]|00[1-9]\d|0[1-9]\d{2}|[1-9]\d{3})-\d{2}-\d{2}$"
# A decimal text converted here: a plain decimal of at most 28 digits. Beyond decimal128's 38 Arrow
# may cut a text instead of refusing it; beyond 28 the reference's range check rounds (abs() in
# decimal's default context, 28 digits: 9999999999999999999999999999.5 is refused by
# decimal(38,10)), so those go to the reference, which decides them as it does.
_DECIMAL = r"^-?[0-9]{1,38}(\.[0-9]{1,38})?$"
_DECIMAL_DIGITS = 28
# Epoch numbers converted here (object_parser's bound: microseconds stay within int64).
_MAX_EPOCH_NUMBER = 9 * 10**15
_EPOCH_DIGITS = r"^-?[0-9]{1,16}$"
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


def chunk_columns(events: Sequence[Any], columns: Sequence[DeclaredColumn],
                  quarantine: bool) -> tuple[dict[str, pa.Array], list[int]]:
    """declared_arrays of every event's columns, as event_columns gives them one by one, and the
    positions of the events it refuses (under `quarantine`, a mismatch: the caller leaves them to
    the reference parser, which quarantines them with their reason). The arrays hold a row per
    event not refused, in order."""
    tops = list(dict.fromkeys(column.path[0] for column in columns))
    top_values = {key: [event.get(key) for event in events] for key in tops}
    return _columns(top_values, events.__getitem__, len(events), columns, quarantine)


def line_columns(lines: Sequence[Any], columns: Sequence[DeclaredColumn],
                 quarantine: bool) -> tuple[dict[str, pa.Array], list[int]]:
    """chunk_columns of lines that are each a JSON object (bytes or memoryviews), parsed here one
    at a time and dropped as soon as their top-level fields are taken (while in the CPU's caches)."""
    loads = orjson.loads
    tops = list(dict.fromkeys(column.path[0] for column in columns))
    getter = itemgetter(*tops)
    rows: list[Any] = []
    append = rows.append
    for line in lines:
        event = loads(line)
        try:
            append(getter(event))
        except KeyError:  # a field missing: null
            append(tuple(map(event.get, tops)) if len(tops) > 1 else event.get(tops[0]))
    if len(tops) == 1:
        top_values = {tops[0]: rows}
    else:
        top_values = dict(zip(tops, map(list, zip(*rows, strict=True)), strict=True)) if rows else \
            {key: [] for key in tops}

    def event_of(row: int) -> Any:
        return loads(lines[row])
    return _columns(top_values, event_of, len(lines), columns, quarantine)


def _columns(top_values: dict[str, list[Any]], event_of: Callable[[int], Any], count: int,
             columns: Sequence[DeclaredColumn], quarantine: bool) -> tuple[dict[str, pa.Array], list[int]]:
    arrays: list[pa.Array] = []
    unsure = np.zeros(count, bool)
    for column in columns:
        values = _gathered(top_values[column.path[0]], column.path[1:])
        if len(column.path) > 1 and _NOT_OBJECT in values:  # `in` compares by identity first: cheap
            through = np.fromiter((value is _NOT_OBJECT for value in values), bool, count)
            unsure |= through
            values = [None if value is _NOT_OBJECT else value for value in values]
        array, doubtful = _convert(column.column_type, values)
        arrays.append(array)
        unsure |= doubtful
    names = [DECLARED_PREFIX + column.name for column in columns]
    if not unsure.any():
        out = dict(zip(names, arrays, strict=True))
        out[MISMATCHED.name] = pa.nulls(count, MISMATCHED.type)
        return out, []
    # The rows not vouched for: the reference's values, put in place of the fast path's.
    slow_values: list[tuple[Any, ...]] = []
    slow_mismatched: list[tuple[int, ...]] = []
    kept_slow: list[int] = []
    refused: list[int] = []
    for row in np.flatnonzero(unsure).tolist():
        try:
            row_values, misfits = event_columns(event_of(row), columns, quarantine)
        except InvalidEvent:
            refused.append(row)
            continue
        kept_slow.append(row)
        slow_values.append(row_values)
        slow_mismatched.append(misfits)
    reference = declared_arrays(columns, slow_values, slow_mismatched)
    order = np.arange(count, dtype=np.int64)
    order[kept_slow] = count + np.arange(len(kept_slow), dtype=np.int64)
    if refused:
        order = np.delete(order, refused)
    take = pa.array(order, pa.int64())
    out = {name: pa.concat_arrays([array, reference[name]]).take(take)
           for name, array in zip(names, arrays, strict=True)}
    out[MISMATCHED.name] = pa.concat_arrays([pa.nulls(count, MISMATCHED.type), reference[MISMATCHED.name]]).take(take)
    return out, refused


def _gathered(values: list[Any], path: tuple[str, ...]) -> list[Any]:
    """The value at `path` below each of `values` (a top-level field's): None where a key is
    missing or a null is on the way, _NOT_OBJECT where a value on the way is no object."""
    for key in path:
        values = [value.get(key) if type(value) is dict else value if value is None else _NOT_OBJECT
                  for value in values]
    return values


Converted = tuple[pa.Array, Mask]


def _convert(kind: ColumnType, values: list[Any]) -> Converted:
    """The column of `values` (None: null) as Arrow holds `kind`, and which rows it does not vouch
    for (their entries in the array are meaningless)."""
    return _CONVERTERS.get(kind.kind, _scalar_by_kind)(kind, values)


def _typed(values: list[Any], allowed: tuple[type, ...]) -> tuple[list[Any], Mask]:
    """`values` with those of other types than `allowed` (or None) nulled, and their mask."""
    unsure = np.zeros(len(values), bool)
    if set(map(type, values)).issubset((*allowed, NONE)):
        return values, unsure
    cleaned = list(values)
    for row, value in enumerate(values):
        if value is not None and type(value) not in allowed:
            unsure[row] = True
            cleaned[row] = None
    return cleaned, unsure


def _scalar_by_kind(kind: ColumnType, values: list[Any]) -> Converted:
    return _SCALARS[kind.kind](kind, values)


def _string(kind: ColumnType, values: list[Any]) -> Converted:
    cleaned, unsure = _typed(values, (str,))
    return _built(cleaned, unsure, pa.string())


def _boolean(kind: ColumnType, values: list[Any]) -> Converted:
    cleaned, unsure = _typed(values, (bool,))
    return _built(cleaned, unsure, pa.bool_())


def _integer(bounds: tuple[int, int], arrow: pa.DataType) -> Callable[[ColumnType, list[Any]], Converted]:
    def convert(kind: ColumnType, values: list[Any]) -> Converted:
        cleaned, unsure = _typed(values, (int,))  # type() is int: not a bool, not a float
        try:
            return pa.array(cleaned, arrow), unsure
        except (OverflowError, pa.ArrowInvalid):  # one out of range: find which
            low, high = bounds
            cleaned = list(cleaned)  # the values may be another column's too: not changed in place
            for row, value in enumerate(cleaned):
                if value is not None and not low <= value <= high:
                    unsure[row], cleaned[row] = True, None
            return pa.array(cleaned, arrow), unsure
    return convert


def _floats(values: list[Any]) -> tuple[list[Any], Mask]:
    """Numbers as Python floats (an int as float() rounds it, as the reference does)."""
    cleaned, unsure = _typed(values, (float, int))
    if int in set(map(type, cleaned)):
        cleaned = [float(value) if type(value) is int else value for value in cleaned]
    return cleaned, unsure


def _double(kind: ColumnType, values: list[Any]) -> Converted:
    cleaned, unsure = _floats(values)
    return _built(cleaned, unsure, pa.float64())


def _float(kind: ColumnType, values: list[Any]) -> Converted:
    """Rounded to binary32 as C's (float) cast rounds (struct.pack's "<f"); a number that rounds to
    infinity is a mismatch (the reference's)."""
    cleaned, unsure = _floats(values)
    wide = pa.array(cleaned, pa.float64())
    doubles = wide.fill_null(0.0).to_numpy(zero_copy_only=False)
    with np.errstate(over="ignore"):
        narrow = doubles.astype(np.float32)
    unsure |= np.isinf(narrow)  # JSON holds no infinity: each came from a finite number
    mask = np.asarray(wide.is_null().to_numpy(zero_copy_only=False), bool) | unsure
    return pa.array(narrow, pa.float32(), mask=mask), unsure


def _built(values: list[Any], unsure: Mask, arrow: pa.DataType) -> Converted:
    """pa.array of values whose types are checked; where Arrow still refuses one (a string with a
    lone surrogate, say), every row goes to the reference."""
    try:
        return pa.array(values, arrow), unsure
    except (pa.ArrowException, OverflowError, ValueError, TypeError):
        return pa.nulls(len(values), arrow), np.ones(len(values), bool)


def _strings(values: list[Any]) -> pa.Array:
    """The strings among values (anything else null)."""
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowException, ValueError, TypeError):
        return pa.array([value if type(value) is str else None for value in values], pa.string())


def _matching(strings: pa.Array, pattern: str) -> Mask:
    found = pc.fill_null(pc.match_substring_regex(strings, pattern), False)
    return np.asarray(found.to_numpy(zero_copy_only=False), bool).copy()


def _cast_rows(strings: pa.Array, rows: npt.NDArray[np.intp], arrow: pa.DataType,
               out: list[tuple[npt.NDArray[np.intp], pa.Array]]) -> None:
    """Arrow's cast of `rows` of `strings` to `arrow`, appended to `out` per run of rows it takes;
    a refused array is halved until the refused rows are alone, which are left out."""
    if not len(rows):
        return
    try:
        out.append((rows, pc.cast(strings.take(pa.array(rows, pa.int64())), arrow)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if len(rows) > 1:
            half = len(rows) // 2
            _cast_rows(strings, rows[:half], arrow, out)
            _cast_rows(strings, rows[half:], arrow, out)


def _placed(count: int, parts: list[tuple[npt.NDArray[np.intp], pa.Array]], arrow: pa.DataType) -> pa.Array:
    """A column of `count` rows holding each part's values at its rows, null elsewhere."""
    if not parts:
        return pa.nulls(count, arrow)
    rows = np.concatenate([part_rows for part_rows, _ in parts])
    values = pa.concat_arrays([part.cast(arrow) for _, part in parts] + [pa.nulls(1, arrow)])
    order = np.full(count, len(rows), np.int64)  # the trailing null
    order[rows] = np.arange(len(rows), dtype=np.int64)
    return values.take(pa.array(order, pa.int64()))


def _timestamp(kind: ColumnType, values: list[Any]) -> Converted:
    """Strict ISO-8601 strings by Arrow; epoch integers (and strings of up to 16 digits, no space)
    exactly, epoch floats scaled in float64 and rounded half to even, as parse_event_time does;
    within the years 1 to 9999. Anything else (a time one step from the strict shape, say) is left
    to the reference."""
    count = len(values)
    arrow = pa.timestamp("us", tz="UTC")
    present = np.fromiter((value is not None for value in values), bool, count)
    strings = _strings(values)
    strict = np.flatnonzero(_matching(strings, _STRICT_ISO))
    parts: list[tuple[npt.NDArray[np.intp], pa.Array]] = []
    _cast_rows(strings, strict, arrow, parts)
    done = np.zeros(count, bool)
    for rows, _ in parts:
        done[rows] = True
    if (present & ~done).any():  # not all ISO strings (the usual case): epoch numbers
        _epochs(values, strings, present, done, parts)
    column = _placed(count, parts, arrow)
    micros = np.asarray(column.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False))
    done &= (micros >= MIN_TIMESTAMP_US) & (micros <= MAX_TIMESTAMP_US)
    return column, present & ~done


def _epochs(values: list[Any], strings: pa.Array, present: Mask, done: Mask,
            parts: list[tuple[npt.NDArray[np.intp], pa.Array]]) -> None:
    """Of the present rows not `done`, the epoch numbers (_timestamp's), appended to `parts` as
    timestamps and marked `done`."""
    digits = _matching(strings, _EPOCH_DIGITS) & ~done
    numbers = [row for row in np.flatnonzero(present & ~done & ~digits).tolist()
               if type(values[row]) in (int, float) and -_MAX_EPOCH_NUMBER <= values[row] <= _MAX_EPOCH_NUMBER]
    whole_rows = [row for row in numbers if type(values[row]) is int]
    float_rows = [row for row in numbers if type(values[row]) is float]
    digit_rows = np.flatnonzero(digits)
    whole = np.concatenate([np.array([values[row] for row in whole_rows], np.int64),
                            strings.take(pa.array(digit_rows, pa.int64())).cast(pa.int64())
                            .to_numpy(zero_copy_only=False).astype(np.int64)])
    whole_at = np.concatenate([np.array(whole_rows, np.intp), digit_rows.astype(np.intp)])
    millis = np.abs(whole) >= EPOCH_MILLIS_THRESHOLD
    whole_micros = np.where(millis, whole * 1_000, whole * 1_000_000)
    fractional = np.array([values[row] for row in float_rows], np.float64)
    scaled = np.where(np.abs(fractional) >= EPOCH_MILLIS_THRESHOLD, fractional * 1_000.0, fractional * 1_000_000.0)
    epoch_rows = np.concatenate([whole_at, np.array(float_rows, np.intp)])
    epoch_micros = np.concatenate([whole_micros, np.rint(scaled).astype(np.int64)])
    if len(epoch_rows):
        parts.append((epoch_rows, pa.array(epoch_micros, pa.int64()).cast(pa.timestamp("us", tz="UTC"))))
        done[epoch_rows] = True


def _date(kind: ColumnType, values: list[Any]) -> Converted:
    count = len(values)
    present = np.fromiter((value is not None for value in values), bool, count)
    strings = _strings(values)
    parts: list[tuple[npt.NDArray[np.intp], pa.Array]] = []
    _cast_rows(strings, np.flatnonzero(_matching(strings, _DATE)), pa.date32(), parts)
    done = np.zeros(count, bool)
    for rows, _ in parts:
        done[rows] = True
    return _placed(count, parts, pa.date32()), present & ~done


def _decimal(kind: ColumnType, values: list[Any]) -> Converted:
    """Each number's text (an int's digits, a float's repr: its shortest spelling, the
    reference's), or a string as it is, when it is a plain decimal of at most 28 digits that fits
    (_fitting_decimal: the reference's rule), cast by Arrow; any other goes to the reference."""
    count = len(values)
    arrow = pa.decimal128(kind.precision, kind.scale)
    present = np.fromiter((value is not None for value in values), bool, count)
    texts = [value if type(value) is str else repr(value) if type(value) in (int, float) else None
             for value in values]
    strings = _strings(texts)
    plain = _matching(strings, _DECIMAL) & _matching(strings, _fitting_decimal(kind.precision, kind.scale))
    digits = pc.subtract(pc.utf8_length(strings), pc.add(pc.count_substring(strings, "-"),
                                                         pc.count_substring(strings, ".")))
    plain &= np.asarray(pc.fill_null(pc.less_equal(digits, _DECIMAL_DIGITS), False)
                        .to_numpy(zero_copy_only=False), bool)
    parts: list[tuple[npt.NDArray[np.intp], pa.Array]] = []
    _cast_rows(strings, np.flatnonzero(plain), arrow, parts)
    done = np.zeros(count, bool)
    for rows, _ in parts:
        done[rows] = True
    return _placed(count, parts, arrow), present & ~done


def _fitting_decimal(precision: int, scale: int) -> str:
    """A plain decimal text with at most precision - scale digits before the point (leading zeros
    aside) and at most scale after it (trailing zeros aside): the reference's fit, checked here as
    Arrow's cast does not check it reliably (rescaling up to a wide scale can overflow silently)."""
    return rf"^-?0*[0-9]{{0,{precision - scale}}}(\.[0-9]{{0,{scale}}}0*)?$"


def _json(kind: ColumnType, values: list[Any]) -> Converted:
    dumps = orjson.dumps
    try:
        texts = [None if value is None else dumps(value) for value in values]
    except orjson.JSONEncodeError:  # too deep for orjson: the reference says the same, one by one
        return pa.nulls(len(values), pa.string()), np.fromiter((v is not None for v in values), bool, len(values))
    return pa.array(texts, pa.binary()).cast(pa.string()), np.zeros(len(values), bool)


def _offsets(values: list[Any]) -> npt.NDArray[np.int64]:
    """Where each value's members start in their concatenation (a null holds none), and the end."""
    lengths = np.fromiter((0 if value is None else len(value) for value in values), np.int64, len(values))
    offsets = np.zeros(len(values) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def _array(kind: ColumnType, values: list[Any]) -> Converted:
    assert kind.element is not None
    lists, unsure = _typed(values, (list,))
    offsets = _offsets(lists)
    flat = [item for value in lists if value is not None for item in value]
    items, doubtful = _convert(kind.element, flat)
    unsure |= _rows_of(doubtful, offsets)
    if offsets[-1] >= 2**31:  # beyond a list's int32 offsets: the reference's rows would not fit either
        return pa.nulls(len(values), kind.arrow), np.fromiter((v is not None for v in values), bool, len(values))
    nulls = pa.array(np.fromiter((value is None for value in lists), bool, len(lists)))
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), items, type=kind.arrow, mask=nulls), unsure


def _map(kind: ColumnType, values: list[Any]) -> Converted:
    assert kind.element is not None
    objects, unsure = _typed(values, (dict,))
    offsets = _offsets(objects)
    keys = pa.array([key for value in objects if value is not None for key in value], pa.string())
    items, doubtful = _convert(kind.element, [item for value in objects if value is not None
                                              for item in value.values()])
    unsure |= _rows_of(doubtful, offsets)
    if offsets[-1] >= 2**31:  # beyond a map's int32 offsets: the reference's rows would not fit either
        return pa.nulls(len(values), kind.arrow), np.fromiter((v is not None for v in values), bool, len(values))
    nulls = pa.array(np.fromiter((value is None for value in objects), bool, len(objects)))
    mapped = pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), keys, items, type=kind.arrow, mask=nulls)
    return mapped, unsure


def _struct(kind: ColumnType, values: list[Any]) -> Converted:
    objects, unsure = _typed(values, (dict,))
    children = []
    for name, member in kind.fields:
        child, doubtful = _convert(member, [None if value is None else value.get(name) for value in objects])
        children.append(child)
        unsure |= doubtful
    nulls = pa.array(np.fromiter((value is None for value in objects), bool, len(objects)))
    fields = [pa.field(name, child.type) for (name, _), child in zip(kind.fields, children, strict=True)]
    if not fields:
        return pa.array([None if value is None else {} for value in objects], kind.arrow), unsure
    return pa.StructArray.from_arrays(children, fields=fields, mask=nulls), unsure


def _rows_of(doubtful: Mask, offsets: npt.NDArray[np.int64]) -> Mask:
    """Which rows hold an element not vouched for, from the elements' mask and the rows' offsets."""
    rows = np.zeros(len(offsets) - 1, bool)
    if doubtful.any():
        rows[np.searchsorted(offsets, np.flatnonzero(doubtful), side="right") - 1] = True
    return rows


_SCALARS: dict[str, Callable[[ColumnType, list[Any]], Converted]] = {
    "string": _string, "boolean": _boolean, "long": _integer(INT64, pa.int64()), "int": _integer(INT32, pa.int32()),
    "double": _double, "float": _float, "timestamp": _timestamp, "date": _date, "decimal": _decimal, "json": _json}
_CONVERTERS: dict[str, Callable[[ColumnType, list[Any]], Converted]] = {
    **_SCALARS, "array": _array, "map": _map, "struct": _struct}
