"""Which producer sent a duplicate: the value of one top-level field of its raw line
([report] producer_field), recorded in the audit so a report ranks producers without reading
raw lines.

Read for audit rows only (the duplicates: a few percent of a batch's lines), each parsed once
more with orjson. A line that cannot hold the field is never parsed: without a backslash, a
member named `field` appears in the line as its JSON string followed by a colon, so a vectorised
substring search over the whole column rules out most lines first.
"""
from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc


def producer_values(lines: pa.Array | pa.ChunkedArray, field: str) -> pa.Array:
    """Per raw line, the value of its top-level member `field`: a string as it is, a number or a
    boolean as JSON writes it (orjson, as the line parses), null where the member is absent or
    null, holds an object or array, or the line is no JSON object; all null when `field` is ""."""
    if not field or len(lines) == 0:
        return pa.nulls(len(lines), pa.string())
    column = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
    name = orjson.dumps(field).decode()
    # Whitespace may stand between the name and its colon: the name alone rules a line out, and a
    # name found inside a value only costs a parse.
    may_hold = pc.fill_null(pc.or_(pc.match_substring(column, name), pc.match_substring(column, "\\")), False)
    values = pa.array([_value_of(line, field) for line in pc.filter(column, may_hold).to_pylist()], pa.string())
    placed: pa.Array = pc.replace_with_mask(pa.nulls(len(column), pa.string()), may_hold, values)
    return placed


def _value_of(line: str, field: str) -> str | None:
    try:
        event: Any = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(event, dict):
        return None
    value = event.get(field)
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return orjson.dumps(value).decode()
    return None
