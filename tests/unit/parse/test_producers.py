"""The producer value an audit row records (eventdedup.parse.producers): the top-level field
[report] producer_field names, read from the duplicate's raw line; expectations written out from
the documented rule (a string as it is, a number or boolean as JSON writes it, null otherwise)."""
from __future__ import annotations

import pyarrow as pa
import pytest

from eventdedup.parse.producers import producer_values

LINES = {
    '{"event_id": "a", "app_id": "shop-web"}': "shop-web",
    '{"app_id":"東京-app","event_id":"b"}': "東京-app",
    '{"event_id": "c", "app_id": 42}': "42",
    '{"event_id": "d", "app_id": -1.5}': "-1.5",
    '{"event_id": "e", "app_id": true}': "true",
    '{"event_id": "f", "app_id": false}': "false",
    '{"event_id": "g", "app_id": null}': None,
    '{"event_id": "h"}': None,
    '{"event_id": "i", "context": {"app_id": "nested"}}': None,  # top-level only
    '{"event_id": "j", "app_id": {"name": "x"}}': None,  # an object names no producer
    '{"event_id": "k", "app_id": ["x"]}': None,
    '{"event_id": "l", "note": "says \\"app_id\\": \\"no\\""}': None,  # the name inside a value
    '{"event_id": "m", "app\\u005fid": "escaped-name"}': "escaped-name",  # the same key, spelt with an escape
    '{"event_id": "n", "app_id": ""}': "",
    '["app_id", "not an object"]': None,
    '{"event_id": "o", "app_id": "broken': None,  # not JSON (never audited: such lines are quarantined)
}


def test_each_line_gives_the_documented_producer_value() -> None:
    lines = pa.chunked_array([list(LINES)[:5], list(LINES)[5:]], pa.string())
    got = producer_values(lines, "app_id")
    assert got.type == pa.string()
    assert dict(zip(LINES, got.to_pylist(), strict=True)) == LINES


@pytest.mark.parametrize("lines", [pa.array([], pa.string()), pa.array(list(LINES), pa.string())])
def test_no_producer_field_records_null_for_every_row(lines: pa.Array) -> None:
    got = producer_values(lines, "")
    assert got.type == pa.string() and got.null_count == len(lines) == len(got)


def test_a_field_named_like_json_syntax_is_matched_by_its_name() -> None:
    lines = pa.array(['{"a\\"b": "quoted", "x": 1}', '{"a\\"b": 7}', '{"x": "a\\"b"}'], pa.string())
    assert producer_values(lines, 'a"b').to_pylist() == ["quoted", "7", None]
