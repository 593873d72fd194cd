"""A Parquet object as JSON lines, so populate (eventdedup.ops.populate) parses a table through
the same parser, keys and fingerprints as the stream.

A table with a string `raw` column (eventdedup's own output, which keeps every input line
verbatim) yields those lines: the events parse exactly as they did when they first arrived, so
their keys and fingerprints are the ones their retransmissions will have. Any other table yields
each row as a JSON object (timestamps as ISO-8601 in UTC): its key is right, but its fingerprint
is the row's, which matches a retransmission only where `fingerprint_fields` name columns that
survive the round trip.

Nothing is dropped: a row whose raw line is null, or a file that is not Parquet, is a finding
with its reason; the lines are bounded by `max_object_bytes` like an inflated gzip object.
"""
from __future__ import annotations

import base64
import io
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from eventdedup.parse.input_lines import InputLine, SplitInput, object_too_large

PARQUET_SUFFIX = ".parquet"
RAW_COLUMN = "raw"
_ROWS_PER_STEP = 65_536  # rows turned into lines at a time: the size bound is checked this often


def is_parquet_key(key: str) -> bool:
    return key.endswith(PARQUET_SUFFIX)


def parquet_lines(body: bytes, max_object_bytes: int) -> SplitInput:
    """Every row of a Parquet object as one line, numbered from 1 in row order."""
    try:
        table = pq.read_table(io.BytesIO(body))
    except (pa.ArrowException, OSError, ValueError) as exc:
        return SplitInput([], [InputLine(0, b"", f"not a readable Parquet file: {exc}")])
    if table.num_rows == 0:
        return SplitInput([], [InputLine(0, b"", "empty Parquet file: no rows")])
    raw = _raw_column(table)
    lines: list[InputLine] = []
    total = 0
    for start in range(0, table.num_rows, _ROWS_PER_STEP):
        values = (raw.slice(start, _ROWS_PER_STEP).to_pylist() if raw is not None
                  else table.slice(start, _ROWS_PER_STEP).to_pylist())
        for number, value in enumerate(values, start=start + 1):
            line = _row_line(number, value, raw is not None)
            total += len(line.raw) + 1
            lines.append(line)
        if total > max_object_bytes:
            return SplitInput([], [InputLine(0, b"", object_too_large(max_object_bytes, compressed=True))])
    if any(line.error for line in lines):  # rare: the parser takes each line with its own reason
        return SplitInput([], lines)
    return SplitInput([line.raw for line in lines], [])


def _row_line(number: int, value: Any, is_raw: bool) -> InputLine:
    if is_raw:
        if value is None:
            return InputLine(number, b"", f"row {number}: {RAW_COLUMN} is null")
        return InputLine(number, value.encode("utf-8"))
    try:
        return InputLine(number, orjson.dumps(value, default=_json_default,
                                              option=orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z))
    except (TypeError, orjson.JSONEncodeError) as exc:
        return InputLine(number, b"", f"row {number} has no JSON form: {exc}")


def _raw_column(table: pa.Table) -> pa.ChunkedArray | None:
    if RAW_COLUMN not in table.column_names:
        return None
    column = table.column(RAW_COLUMN)
    return column if pa.types.is_string(column.type) or pa.types.is_large_string(column.type) else None


def _json_default(value: Any) -> Any:
    """What orjson does not serialise itself: a decimal as the JSON number it was (a float that
    reads back as the same decimal: 12.50 as 12.5, as the stream's JSON spelled it and as a
    `min:`/`max:` survivor orders numbers), else as its exact text (more digits than a double
    holds); bytes as base64; dates and times as ISO-8601."""
    if isinstance(value, Decimal):
        number = float(value)
        return number if value.is_finite() and Decimal(repr(number)) == value else str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (date, datetime, time)):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not representable in JSON")
