"""An hour of a partition whose lines pass 2 GiB (what one Arrow string array holds), with declared
columns whose values do too: its columns are read (core on and off) and its file written, and the
file holds each row's values by the documented rules. Minutes and ~10 GB of memory: `make soak`."""
from __future__ import annotations

import io

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eventdedup.column_types import declared_column
from eventdedup.job.dedup_stage import with_declared_columns
from eventdedup.tables import table_to_parquet

pytestmark = pytest.mark.soak

BODY = "b" * (64 << 10)
COLUMNS = (declared_column("doc", "struct<body:string>", "test"), declared_column("tags", "array<string>", "test"),
           declared_column("n", "long", "test"))
LINES_PER_CHUNK = 9_000  # ~576 MiB a chunk: four pass 2 GiB, as the shuffle's pieces of one hour would


@pytest.mark.parametrize("compiled", [True, False])
def test_an_hour_past_2_gib_with_columns_past_2_gib_is_read_and_written(compiled: bool) -> None:
    def line(chunk: int, row: int) -> str:
        return orjson.dumps({"event_id": f"e{chunk}-{row}", "doc": {"body": BODY}, "tags": [BODY[:row % 7]],
                             "n": row if row % 1000 else "not a long"}).decode()
    raw = pa.chunked_array([pa.array([line(chunk, row) for row in range(LINES_PER_CHUNK)], pa.string())
                            for chunk in range(4)])
    assert sum(chunk.buffers()[2].size for chunk in raw.chunks) > 2**31
    table, figures = with_declared_columns(pa.table({"raw": raw}), COLUMNS, compiled)
    rows = 4 * LINES_PER_CHUNK
    strings = 4 * (LINES_PER_CHUNK // 1000)  # every 1000th row's n is a string: a mismatch, null
    assert {name: (f.mismatched, f.nulls) for name, f in figures.items()} == {
        "doc": (0, 0), "tags": (0, 0), "n": (strings, strings)}
    written = pq.ParquetFile(io.BytesIO(table_to_parquet(table)))
    assert written.metadata.num_rows == rows and written.metadata.num_row_groups > 1
    # Each row group is read whole (pyarrow reads a nested column a row group into one array).
    read = 0
    for group in range(written.metadata.num_row_groups):
        values = written.read_row_group(group, columns=["doc", "n"])
        first = values.slice(0, 1).to_pylist()[0]
        assert first["doc"] == {"body": BODY} and (first["n"] is None) == (read % LINES_PER_CHUNK % 1000 == 0)
        read += values.num_rows
    assert read == rows
    assert written.read_row_group(0, columns=["tags", "n"]).slice(0, 3).to_pylist() == [
        {"tags": [BODY[:row]], "n": row if row else None} for row in range(3)]
