"""The declared columns' bench (bench.columns) measures what it says: its configuration block is the
ten columns it names, and every line it writes fits them (a mismatch would measure the reference's
path, not the core's), as the reference reads the lines."""
from __future__ import annotations

import tomllib
from datetime import datetime, timezone

import orjson

from bench.columns import COLUMNS, columns_block, lines_of
from eventdedup.config import config_from_mapping
from eventdedup.parse.columns import event_columns


def test_the_block_declares_the_ten_columns_and_every_line_fits_them() -> None:
    block = tomllib.loads(columns_block(COLUMNS))
    assert block == {"table": {"columns": COLUMNS}}
    config = config_from_mapping({"s3": {"bucket": "events"}, **block}, source="test")
    columns = config.table.columns
    assert [column.name for column in columns] == list(COLUMNS)
    assert {column.column_type.kind for column in columns} == {
        "string", "long", "double", "boolean", "timestamp", "decimal", "array", "struct", "json"}
    lines = lines_of(500, datetime(2026, 11, 22, 5, tzinfo=timezone.utc), first=1_000)
    for line in lines:
        event = orjson.loads(line)
        assert orjson.dumps(event) == line  # canonical: the compiled core reads it
        values, mismatched = event_columns(event, columns, quarantine=True)
        assert mismatched == () and None not in values
    assert len({orjson.loads(line)["event_id"] for line in lines}) == 500
