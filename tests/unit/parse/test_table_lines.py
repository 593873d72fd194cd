"""A plain Parquet table's rows as JSON lines (populate): values keep their JSON kinds, so a
populated row orders and fingerprints as the stream's line it came from."""
from __future__ import annotations

import io
from decimal import Decimal

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from eventdedup.parse.order_keys import order_key_of_value
from eventdedup.parse.table_lines import parquet_lines


def lines_of(table: pa.Table) -> list[dict]:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    split = parquet_lines(sink.getvalue(), 1 << 20)
    return [orjson.loads(piece) for piece in split.pieces]


def test_a_decimal_is_the_json_number_it_was_unless_a_double_cannot_hold_it() -> None:
    prices = [Decimal("12.50"), Decimal("-0.10"), Decimal("123456789012345678.91")]
    rows = lines_of(pa.table({"event_id": ["a", "b", "c"], "price": pa.array(prices, pa.decimal128(20, 2))}))
    assert [row["price"] for row in rows] == [12.5, -0.1, "123456789012345678.91"]
    # So a populated 12.50 orders as the stream's 12.5 does: before 13, not after it as a string would.
    assert order_key_of_value(rows[0]["price"], "price") == order_key_of_value(12.5, "price") < \
        order_key_of_value(13, "price")
