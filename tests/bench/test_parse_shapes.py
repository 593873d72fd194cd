"""The bench's parse section measures what it names: each shape's lines are valid events of that
shape, and its exactness flag compares the batch parser's rows with the per-line reference."""
from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import parse_shapes  # noqa: E402
from parse_shapes import SHAPES, measure_shape, rules_for, shape_lines  # noqa: E402

from eventdedup.parse.event_parser import parse_event  # noqa: E402


def test_every_shape_is_valid_and_parsed_exactly() -> None:
    for shape in SHAPES:
        row = measure_shape(shape, 300, 1, seed=5)
        assert (row["shape"], row["quarantined"], row["exact"]) == (shape.name, 0, True)


def test_the_shapes_carry_the_id_and_time_types_they_name() -> None:
    by_name = {shape.name.split(",")[0].split(" (")[0]: shape for shape in SHAPES}
    integer_ids = [orjson.loads(line) for line in shape_lines(by_name["integer id"], 50, seed=5)]
    assert all(type(e["event_id"]) is int and type(e["created_at"]) is int for e in integer_ids)
    assert all(e["created_at"] >= 10**11 for e in integer_ids)  # milliseconds by the parser's threshold
    normalised = by_name["padded mixed-case id under normalize trim+lower"]
    line = shape_lines(normalised, 1, seed=5)[0]
    event = orjson.loads(line)
    assert event["event_id"] != event["event_id"].strip().lower()
    assert parse_event(line, rules_for(normalised)).event_id == event["event_id"].strip().lower()


@pytest.mark.parametrize("column", ["seq", "event_id", "key_digest", "fingerprint", "event_time", "raw", "order_key"])
def test_a_row_differing_in_any_column_is_reported_as_not_exact(monkeypatch, column: str) -> None:
    honest = parse_shapes.parse_lines

    def one_cell_off(*args, **kwargs):  # the parse, with the last row's cell of `column` changed
        parsed = honest(*args, **kwargs)
        table = parsed.table
        values = table.column(column).to_pylist()
        values[-1] = {"seq": lambda v: v + 1, "event_id": lambda v: v + "x", "key_digest": lambda v: v[::-1],
                      "fingerprint": lambda v: v ^ 1, "event_time": lambda v: v, "raw": lambda v: v.upper(),
                      "order_key": lambda v: b"x"}[column](values[-1])
        changed = pa.array(values, table.schema.field(column).type)
        if column == "event_time":
            changed = pc.add(table.column(column).combine_chunks().cast("int64"), 1).cast(changed.type)
        parsed.table = table.set_column(table.schema.get_field_index(column), column, changed)
        return parsed

    monkeypatch.setattr(parse_shapes, "parse_lines", one_cell_off)
    assert measure_shape(SHAPES[0], 20, 1, seed=5)["exact"] is False
