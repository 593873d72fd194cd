"""status's declared-column rates: each column's mismatches and nulls over the output rows of the
batches that recorded it, so a column added later is not diluted by the batches before it."""
from __future__ import annotations

from eventdedup.ops.status import column_lines

COLUMNS = [{"name": "user_id", "type": "string", "path": "user_id"},
           {"name": "amount", "type": "decimal(18,2)", "path": "amount"}]


def test_a_column_added_later_is_measured_over_the_batches_that_recorded_it() -> None:
    batches = [
        {"counts": {"output_rows": 300}},  # before any column: not counted
        {"counts": {"output_rows": 100}, "columns": {"user_id": {"mismatched": 10, "nulls": 5}}},
        {"counts": {"output_rows": 50}, "columns": {"user_id": {"mismatched": 0, "nulls": 5},
                                                    "amount": {"mismatched": 5, "nulls": 0}}},
    ]
    lines = column_lines(COLUMNS, batches)
    assert lines[0] == "  declared columns (rates over the output rows of the 2 batch(es) listed that recorded each):"
    # user_id over 150 rows: 10 mismatched (6.7 %), 10 null (6.7 %); amount over the last 50 alone.
    assert lines[1] == ("    user_id string (from user_id): mismatched 10 (6.7%), null 10 (6.7%) of 150 row(s) in "
                        "2 batch(es)")
    assert lines[2] == ("    amount decimal(18,2) (from amount): mismatched 5 (10.0%), null 0 (0.0%) of 50 row(s) in "
                        "1 batch(es)")


def test_no_batch_recorded_a_column() -> None:
    assert column_lines(COLUMNS, [{"counts": {"output_rows": 3}}])[1].endswith("mismatched 0 (-), null 0 (-) of 0 "
                                                                             "row(s) in 0 batch(es)")
    assert column_lines([], []) == []
