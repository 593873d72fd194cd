"""infer-columns prints a block that loads back as the columns it suggests, whatever the keys."""
from __future__ import annotations

import tomllib

from eventdedup.config import config_from_mapping
from eventdedup.ops.infer_columns import inference


def test_keys_with_dots_quotes_and_the_batchs_own_names_print_as_a_block_that_loads_back() -> None:
    lines = [b'{"event_id":"a","screen.width":3,"q\\"x":{"y":1},"mismatched":"yes"}']
    block = tomllib.loads(inference("landing/", 1, lines, {("event_id",)}).toml())
    assert block == {"table": {"columns": {
        "mismatched_field": {"path": "mismatched", "type": "string"},  # "mismatched" is the batch's own
        "q_x_y": {"path": 'q"x.y', "type": "int"},
        "screen_width": {"path": ["screen.width"], "type": "int"}}}}  # one key holding a dot
    columns = config_from_mapping({"s3": {"bucket": "events"}, **block}).table.columns
    assert {column.name: column.path for column in columns} == {
        "mismatched_field": ("mismatched",), "q_x_y": ('q"x', "y"), "screen_width": ("screen.width",)}
