"""The declared columns of one event: the reference rules by which a JSON value becomes a column's
value, or is a mismatch (docs/delta-table.md, "Typed columns", states them for users).

A column's field is found by its path from the event's top: a missing key, or a null on the way,
is a null column (not a mismatch); a value on the way that is not an object is a mismatch. A
value present and not null is converted by its column's type:

- string: a JSON string, as it is. Nothing else (a number is not turned into text).
- long / int: a JSON integer within int64 / int32. Not a float, even 5.0, nor a string of digits.
- double: any JSON number, as binary64 (an integer rounded to the nearest double).
- float: any JSON number rounded to binary32; one beyond binary32's range is a mismatch.
- boolean: JSON true or false.
- timestamp: as the [events] time field is read (ISO-8601 with an offset; epoch seconds, or
  milliseconds from 1e11 on, as a number or a string of digits), within years 1 to 9999.
- date: a JSON string YYYY-MM-DD naming a calendar day.
- decimal(p,s): a JSON number, by its shortest spelling as binary64 (what a JSON parser reads: an
  integer exactly, a float by the fewest digits that read back as it), or a JSON string of a
  plain decimal number (-12.30), exactly; a mismatch when it has more than s decimal places
  (after dropping trailing zeros) or more than p - s digits before the point.
- json: any value, as the compact JSON orjson writes of it (keys in the event's order).
- array<T>: a JSON array, each element by T (null elements stay null); struct<a:T,...>: a JSON
  object, each member by its type (missing or null: null; other keys ignored); map<string,T>: a
  JSON object, each value by T. Any element or member that mismatches makes the whole value one.

With [table] on_mismatch = "null" a mismatch is null in its column and counted; with
"quarantine" the line is quarantined with the first mismatch's reason ("column <name>: ...").
"""
from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable, Iterable, Sequence
from datetime import date
from decimal import Context, Decimal, InvalidOperation
from functools import cache
from typing import Any

import orjson
import pyarrow as pa

from eventdedup.column_types import ColumnType, DeclaredColumn, parse_type
from eventdedup.parse.event_time import InvalidEvent, parse_event_time
from eventdedup.tables import MISMATCHED

# datetime's range, which Delta, Spark and Parquet readers all hold: 0001-01-01 to 9999-12-31.
MIN_TIMESTAMP_US = -62_135_596_800_000_000
MAX_TIMESTAMP_US = 253_402_300_799_999_999
_EPOCH_DAY = date(1970, 1, 1).toordinal()
_DATE_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DECIMAL_TEXT = re.compile(r"-?[0-9]{1,100}(\.[0-9]{1,100})?")
_EXACT = Context(prec=400)  # wider than any JSON number a decimal column takes: quantising never rounds
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


class ColumnMismatch(ValueError):
    """A value that does not fit its column's type; the message says how (without the column)."""


Converter = Callable[[Any], Any]


def column_value(event: dict[str, Any], column: DeclaredColumn) -> Any:
    """The column's value in an event: None where its field is missing or null; ColumnMismatch
    where the value does not fit."""
    value: Any = event
    for depth, key in enumerate(column.path):
        if type(value) is not dict:
            raise ColumnMismatch(f"{'.'.join(column.path[:depth])} is {_shown(value)}, not an object")
        value = value.get(key)
        if value is None:
            return None
    return converter(column.data_type)(value)


@cache
def converter(type_text: str) -> Converter:
    """The conversion of present, non-null values to a type (its canonical spelling), built once."""
    return _converter(parse_type(type_text))


def _converter(kind: ColumnType) -> Converter:
    simple: dict[str, Converter] = {
        "string": _string, "json": _json, "long": _integer(INT64, "long"), "int": _integer(INT32, "int"),
        "double": _double, "float": _float, "boolean": _boolean, "timestamp": _timestamp, "date": _date}
    if kind.kind in simple:
        return simple[kind.kind]
    if kind.kind == "decimal":
        return _decimal(kind.precision, kind.scale)
    if kind.kind == "array":
        assert kind.element is not None
        return _array(_converter(kind.element))
    if kind.kind == "map":
        assert kind.element is not None
        return _map(_converter(kind.element))
    return _struct(tuple((name, _converter(member)) for name, member in kind.fields))


def _string(value: Any) -> str:
    if type(value) is not str:
        raise ColumnMismatch(f"{_shown(value)} is not a string")
    return value


def _json(value: Any) -> str:
    return orjson.dumps(value).decode("utf-8")


def _integer(bounds: tuple[int, int], name: str) -> Converter:
    def convert(value: Any) -> int:
        if type(value) is not int:
            raise ColumnMismatch(f"{_shown(value)} is not an integer")
        if not bounds[0] <= value <= bounds[1]:
            raise ColumnMismatch(f"{value} is outside {name}'s range")
        return value
    return convert


def _double(value: Any) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)  # a JSON integer (orjson reads at most 64 bits) always has a nearest double
    raise ColumnMismatch(f"{_shown(value)} is not a number")


def _float(value: Any) -> float:
    number = _double(value)
    try:
        rounded: float = struct.unpack("<f", struct.pack("<f", number))[0]
    except OverflowError:
        raise ColumnMismatch(f"{number!r} is outside float's range") from None
    return rounded


def _boolean(value: Any) -> bool:
    if type(value) is not bool:
        raise ColumnMismatch(f"{_shown(value)} is not true or false")
    return value


def _timestamp(value: Any) -> int:
    try:
        micros = parse_event_time(value, "value")
    except InvalidEvent as exc:
        raise ColumnMismatch(str(exc)) from None
    if not MIN_TIMESTAMP_US <= micros <= MAX_TIMESTAMP_US:
        raise ColumnMismatch(f"{_shown(value)} is outside the years 1 to 9999")
    return micros


def _date(value: Any) -> int:
    if type(value) is not str or not _DATE_TEXT.fullmatch(value):
        raise ColumnMismatch(f"{_shown(value)} is not a date written YYYY-MM-DD")
    try:
        day = date(int(value[:4]), int(value[5:7]), int(value[8:]))
    except ValueError:
        raise ColumnMismatch(f"{_shown(value)} is no calendar day") from None
    return day.toordinal() - _EPOCH_DAY


def _decimal(precision: int, scale: int) -> Converter:
    step = Decimal(1).scaleb(-scale)
    limit = Decimal(10) ** (precision - scale)

    def convert(value: Any) -> Decimal:
        if type(value) is int:
            number = Decimal(value)
        elif type(value) is float:
            number = Decimal(repr(value))  # the shortest spelling that reads back as it
        elif type(value) is str and _DECIMAL_TEXT.fullmatch(value):
            number = Decimal(value)
        else:
            raise ColumnMismatch(f"{_shown(value)} is not a number or a string of a decimal number")
        try:
            fitted = number.quantize(step, context=_EXACT)
        except InvalidOperation:
            raise ColumnMismatch(f"{_shown(value)} does not fit decimal({precision},{scale})") from None
        if fitted != number:
            raise ColumnMismatch(f"{_shown(value)} has more than {scale} decimal places")
        if fitted.copy_abs() >= limit:  # abs() would round to the default context's 28 digits
            raise ColumnMismatch(f"{_shown(value)} has more than {precision - scale} digits before the point")
        return fitted
    return convert


def _array(element: Converter) -> Converter:
    def convert(value: Any) -> list[Any]:
        if type(value) is not list:
            raise ColumnMismatch(f"{_shown(value)} is not an array")
        try:
            return [None if item is None else element(item) for item in value]
        except ColumnMismatch as exc:
            index = next(i for i, item in enumerate(value) if item is not None and not _fits(element, item))
            raise ColumnMismatch(f"element {index}: {exc}") from None
    return convert


def _map(member: Converter) -> Converter:
    def convert(value: Any) -> list[tuple[str, Any]]:
        if type(value) is not dict:
            raise ColumnMismatch(f"{_shown(value)} is not an object")
        pairs = []
        for key, item in value.items():
            try:
                pairs.append((key, None if item is None else member(item)))
            except ColumnMismatch as exc:
                raise ColumnMismatch(f"key {_shown(key)}: {exc}") from None
        return pairs
    return convert


def _struct(members: tuple[tuple[str, Converter], ...]) -> Converter:
    def convert(value: Any) -> dict[str, Any]:
        if type(value) is not dict:
            raise ColumnMismatch(f"{_shown(value)} is not an object")
        out = {}
        for name, member in members:
            item = value.get(name)
            try:
                out[name] = None if item is None else member(item)
            except ColumnMismatch as exc:
                raise ColumnMismatch(f"member {_shown(name)}: {exc}") from None
        return out
    return convert


def _fits(convert: Converter, value: Any) -> bool:
    try:
        convert(value)
    except ColumnMismatch:
        return False
    return True


def _shown(value: Any) -> str:
    """A value as a reason quotes it: its JSON, bounded."""
    if type(value) is float and not math.isfinite(value):
        return repr(value)
    text = orjson.dumps(value).decode("utf-8")
    kind = "an object " if type(value) is dict else "an array " if type(value) is list else ""
    return kind + (text if len(text) <= 64 else f"{text[:64]}... ({len(text)} characters)")


def mismatch_reason(column: DeclaredColumn, exc: ColumnMismatch) -> str:
    """A quarantine reason (on_mismatch = "quarantine"): the column, its type and what did not fit;
    eventdedup.parse.quarantine_reasons classes it by its opening."""
    return f"column {column.name} ({column.data_type}): {exc}"


def event_columns(event: dict[str, Any], columns: Sequence[DeclaredColumn],
                  quarantine: bool) -> tuple[tuple[Any, ...], tuple[int, ...]]:
    """Every declared column's value in an event, and which columns mismatched (their positions;
    their values None). Under `quarantine`, the first mismatch raises InvalidEvent with its reason."""
    values: list[Any] = []
    mismatched: list[int] = []
    for position, column in enumerate(columns):
        try:
            values.append(column_value(event, column))
        except ColumnMismatch as exc:
            if quarantine:
                raise InvalidEvent(mismatch_reason(column, exc)) from None
            values.append(None)
            mismatched.append(position)
    return tuple(values), tuple(mismatched)


def declared_arrays(columns: Sequence[DeclaredColumn], values: Sequence[tuple[Any, ...]],
                    mismatched: Sequence[tuple[int, ...]]) -> dict[str, pa.Array]:
    """The declared columns of rows (under their own names, in declared order) from the rows' values
    and mismatches as event_columns gives them, then `mismatched` (eventdedup.tables.MISMATCHED)."""
    arrays = {column.name: pa.array([row[position] for row in values], column.column_type.arrow)
              for position, column in enumerate(columns)}
    arrays[MISMATCHED.name] = pa.array([list(row) if row else None for row in mismatched], MISMATCHED.type)
    return arrays


def columns_of_events(events: Iterable[dict[str, Any]], columns: Sequence[DeclaredColumn],
                      quarantine: bool) -> tuple[dict[str, pa.Array], list[int]]:
    """declared_arrays of the events by event_columns, one at a time (an iterable: each may be
    parsed as it is needed and dropped once converted), and the positions of those it refuses
    (under `quarantine`, a mismatch), which hold no row in the arrays."""
    values, mismatched, refused = [], [], []
    for position, event in enumerate(events):
        try:
            row, misfits = event_columns(event, columns, quarantine)
        except InvalidEvent:
            refused.append(position)
            continue
        values.append(row)
        mismatched.append(misfits)
    return declared_arrays(columns, values, mismatched), refused
