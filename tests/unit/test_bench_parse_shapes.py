"""The bench's parse section measures what it names: each shape's lines are valid events of that
shape, and its exactness flag compares the batch parser's rows with the per-line reference."""
from __future__ import annotations

import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
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
