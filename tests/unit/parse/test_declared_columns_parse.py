"""Declared columns through the parse and the output (issue 53): a chunk parses to the same rows
(CHUNK_SCHEMA: no column values cross the shuffle) and the same quarantine with the compiled core on
or off, under on_mismatch = "null" and "quarantine", for any JSON values in the declared fields,
each quarantine reason parse_event's; and the columns the batch then reads from the rows' raw lines
(columns_of_raw) are, core on or off, each line's by the reference's rules (event_columns, one line
at a time)."""
from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from typing import Any

import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventdedup.config import config_from_mapping
from eventdedup.parse import native_core
from eventdedup.parse.columns import declared_arrays, event_columns
from eventdedup.parse.columns_fast import columns_of_raw
from eventdedup.parse.event_parser import InvalidEvent, parse_event
from eventdedup.parse.input_lines import split_input
from eventdedup.parse.object_parser import parse_lines
from eventdedup.parse.rules import ParseRules
from eventdedup.tables import CHUNK_SCHEMA

COLUMNS = {"user_id": "string", "n": "long", "small": "int", "ratio": "double", "f": "float", "ok": "boolean",
           "at": "timestamp", "day": "date", "amount": "decimal(9,2)", "extra": "json", "tags": "array<string>",
           "geo": "struct<lat:double,lon:double>", "attrs": "map<string,long>",
           "os": {"path": "ctx.device.os", "type": "string"}}
NOW = datetime(2026, 11, 22, 6, tzinfo=timezone.utc)


def rules_for(on_mismatch: str, compiled: bool) -> ParseRules:
    config = config_from_mapping({"s3": {"bucket": "events"}, "events": {"compiled_parser": compiled},
                                  "table": {"columns": COLUMNS, "on_mismatch": on_mismatch}}, source="test")
    return ParseRules.for_batch(config, NOW, fingerprint_hash="xxh3-64")


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.floats(allow_nan=False),
                    st.sampled_from(["u1", "2026-11-22", "2026-02-30", "2026-11-22T05:00:00Z", "1764000000",
                                     "-12.30", "1e3", "", "é"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                        st.dictionaries(st.sampled_from(["lat", "lon", "k", "os",
                                                                                         "device"]), inner,
                                                                        max_size=3)), max_leaves=6)
FIELDS = st.dictionaries(st.sampled_from(["user_id", "n", "small", "ratio", "f", "ok", "at", "day", "amount", "extra",
                                          "tags", "geo", "attrs", "ctx"]), VALUES, max_size=8)


def lines_of(events: list[dict[str, Any]]) -> bytes:
    lines = []
    for number, fields in enumerate(events):
        try:
            lines.append(orjson.dumps({"event_id": f"e{number}", "created_at": "2026-11-22T05:00:00Z", **fields}))
        except orjson.JSONEncodeError:  # an integer beyond 64 bits: orjson writes none
            lines.append(b'{"event_id":"e%d","created_at":"2026-11-22T05:00:00Z","n":%d}' % (number, 2**64))
    plain = b'{"event_id":"plain","created_at":"2026-11-22T05:00:00Z","user_id":"u","n":1}'  # the core vouches
    return b"\n".join([plain, *lines, b"not json", b'{"event_id":"x"}']) + b"\n"


def parsed(body: bytes, rules: ParseRules) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
    result = parse_lines(split_input(body, 1 << 30), 0, rules, 1)
    assert result.table.schema == CHUNK_SCHEMA
    return result.table.to_pylist(), sorted(zip(result.bad_line, result.bad_error, strict=True))


@pytest.mark.skipif(not native_core.available(), reason="the compiled parse core is not built")
@pytest.mark.parametrize("on_mismatch", ["null", "quarantine"])
@settings(max_examples=30)
@given(events=st.lists(FIELDS, min_size=1, max_size=12))
def test_the_core_and_the_reference_give_the_same_rows_columns_and_quarantine(on_mismatch: str,
                                                                              events: list[dict[str, Any]]) -> None:
    body = lines_of(events)
    compiled, reference = rules_for(on_mismatch, True), rules_for(on_mismatch, False)
    assert native_core.supports(compiled)
    pieces = split_input(body, 1 << 30).pieces
    assert len(native_core.scan(pieces, compiled).offsets) > 0  # the core vouched for lines: both paths ran
    rows, quarantined = parsed(body, compiled)
    assert (rows, quarantined) == parsed(body, reference)
    # Each quarantined line's reason is parse_event's, and each row's columns the reference's.
    by_raw = {row["raw"]: row for row in rows}
    expected: list[tuple[tuple[Any, ...], tuple[int, ...]]] = []
    for number, line in enumerate(body.split(b"\n")[:-1], start=1):
        try:
            event = parse_event(line, reference)
        except InvalidEvent as exc:
            assert (number, str(exc)) in quarantined
            continue
        assert event.raw in by_raw
        expected.append(event_columns(orjson.loads(line), reference.columns, quarantine=False))
    assert len(expected) == len(rows)
    wanted = declared_arrays(reference.columns, [values for values, _ in expected],
                             [misfits for _, misfits in expected])
    raw = pa.array([row["raw"] for row in rows], pa.string())
    for core in (True, False):
        found = columns_of_raw(raw, reference.columns, core)
        assert list(found) == [*COLUMNS, "mismatched"]
        for name, array in wanted.items():
            assert found[name].combine_chunks().equals(array), (name, core)
    if on_mismatch == "quarantine":
        assert all(not misfits for _, misfits in expected)


def test_with_the_compiled_parser_switched_off_the_core_parses_no_line() -> None:
    assert not native_core.supports(dataclasses.replace(rules_for("null", True), compiled=False))
