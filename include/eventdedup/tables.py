"""Arrow schemas and (de)serialisation of the tables eventdedup moves and writes."""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from eventdedup.column_types import DEDUP_COLUMNS, DeclaredColumn
from eventdedup.errors import CorruptStateError
from eventdedup.keys import KEY_DIGEST_BYTES
from eventdedup.s3store import S3Store

UTC_MICROS = pa.timestamp("us", tz="UTC")

# One chunk of parsed events of a single cache key, as shuffled between stages.
CHUNK_SCHEMA = pa.schema([
    ("seq", pa.int64()),  # input_index << 40 | line_number: the batch's input order
    ("event_id", pa.string()),
    ("key_digest", pa.binary(KEY_DIGEST_BYTES)),
    ("fingerprint", pa.uint64()),
    ("event_time", UTC_MICROS),
    ("raw", pa.string()),
    ("order_key", pa.binary()),  # survivor min:/max: comparison value; null otherwise
])

# What crosses the shuffle: the parsed columns and each event's cache hour.
SHUFFLE_SCHEMA = CHUNK_SCHEMA.append(pa.field("cache_hour", pa.int64()))

OUTPUT_SCHEMA = pa.schema([
    ("event_id", pa.string()),  # the dedup key, or the derived id of a renamed synthetic duplicate
    ("original_event_id", pa.string()),  # set on renamed synthetic duplicates only
    ("duplicate_of", pa.string()),  # set on synthetic duplicates kept under synthetic = "keep"
    ("op", pa.string()),  # insert | update (changelog mode)
    ("supersedes_batch", pa.string()),  # for op = update: the batch holding the replaced version
    ("event_time", UTC_MICROS),
    ("batch_id", pa.string()),
    ("raw", pa.string()),  # the input line, byte for byte
])

AUDIT_SCHEMA = pa.schema([
    ("event_id", pa.string()),
    ("event_time", UTC_MICROS),
    ("reason", pa.string()),
    ("action", pa.string()),  # dropped | renamed | kept; observe mode: would_drop | would_rename | would_keep
    ("kept_in_batch", pa.string()),
    ("batch_id", pa.string()),
    ("source_object", pa.string()),
    ("line_number", pa.int64()),
    ("raw", pa.string()),
    # The raw line's top-level [report] producer_field value (eventdedup.parse.producers); null when
    # unset or absent. Older files lack the column (docs/formats.md): readers take it as null.
    ("producer", pa.string()),
    # Without changelog, in an ordered store (eventdedup.dedup.decide): for a cross-batch synthetic
    # copy, whether changelog would have emitted it as an update of the kept version (it orders
    # after it or ties with it); null for every other row and store. Older files lack the column
    # (docs/formats.md): readers take it as null.
    ("would_supersede", pa.bool_()),
])

# Declared columns ([table.columns], eventdedup.column_types) follow the output's own columns, in
# declared order, under their own names.
assert tuple(OUTPUT_SCHEMA.names) + ("date", "hour") == DEDUP_COLUMNS, "column_types.DEDUP_COLUMNS names the output's"

# Beside a batch's declared columns, until its files are written: `mismatched`, the positions of the
# row's declared columns whose value did not fit its type (null when none did not), which the
# batch counts (eventdedup.parse.columns.declared_arrays).
MISMATCHED = pa.field("mismatched", pa.list_(pa.int32()))


def output_schema(columns: tuple[DeclaredColumn, ...]) -> pa.Schema:
    """The output's schema for a batch that writes these declared columns."""
    return pa.schema([*OUTPUT_SCHEMA, *(pa.field(column.name, column.column_type.arrow) for column in columns)])


QUARANTINE_SCHEMA = pa.schema([
    ("raw", pa.binary()),  # verbatim bytes: the line may not even be valid UTF-8
    ("error", pa.string()),
    ("source_object", pa.string()),
    ("line_number", pa.int64()),
    ("batch_id", pa.string()),
])

LINE_BITS = 40


Seq = TypeVar("Seq", int, npt.NDArray[np.int64])  # one row's seq, or a numpy column of them


def make_seq(input_index: Seq, line_number: Seq) -> Seq:
    seq: Seq = (input_index << LINE_BITS) | line_number
    return seq


def split_seq(seq: Seq) -> tuple[Seq, Seq]:
    input_index: Seq = seq >> LINE_BITS
    line_number: Seq = seq & ((1 << LINE_BITS) - 1)
    return input_index, line_number


# Shuffled chunks are mostly JSON text; the JVM's cost of moving them (Python -> JVM -> disk -> JVM
# -> Python) grows with their bytes. zstd at level 1 encodes as fast as LZ4 here and leaves 0.6x
# its bytes (100k bench events: 41 MB raw, LZ4 14.9 MB in 33 ms, zstd-1 9.2 MB in 34 ms; decoding
# 10 -> 14 ms): the driver JVM's CPU per 1M batch ~1.05 -> ~0.85 s.
_SHUFFLE_IPC = pa.ipc.IpcWriteOptions(compression=pa.Codec("zstd", 1))


def repeated_text(value: str, rows: int) -> pa.Array:
    """A string column of one value: built natively (a Python list of a bucket's 62k rows cost
    ~4 ms a column, twice a bucket)."""
    filled: pa.Array = pc.fill_null(pa.nulls(rows, pa.string()), value)
    return filled


def value_counts(column: pa.Array | pa.ChunkedArray) -> list[tuple[str | None, int]]:
    """(value, rows) of each distinct value of a string column, null included: counted natively, so
    per-value Python runs once a value, not once a row."""
    counted = pc.value_counts(column)
    return list(zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist(), strict=True))


def table_to_ipc(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema, options=_SHUFFLE_IPC) as writer:
        writer.write_table(table)
    return sink.getvalue()


def ipc_to_table(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(data).read_all()


def table_to_parquet(table: pa.Table) -> bytes:
    """Deterministic bytes for the same rows: no timestamps or random ids in the file, and one
    Arrow chunk per column (the writer cuts pages at chunk boundaries, and how rows are chunked
    depends on how the input was read: its ranges follow the cluster's cores). Where a column's
    values pass what one Arrow array holds (2 GiB of text in a nested column), the rows are cut
    into pieces by the rows alone (_pieces), each its own row groups: a reader (pyarrow's) reads a
    nested column a row group at a time into one array."""
    pieces = _pieces(table)
    sink = io.BytesIO()
    if len(pieces) == 1:
        pq.write_table(pieces[0], sink, compression="snappy", row_group_size=1_000_000)
    else:
        with pq.ParquetWriter(sink, table.schema, compression="snappy") as writer:
            for piece in pieces:
                writer.write_table(piece, row_group_size=1_000_000)
    return sink.getvalue()


def _pieces(table: pa.Table) -> list[pa.Table]:
    """The rows in one chunk a column; where that overflows (Arrow splits a plain string column past
    2 GiB itself, but refuses a list, map or struct one), each half so, recursively: the cuts
    depend on the rows alone, never on how they were chunked, so the file's bytes do not either."""
    try:
        return [table.combine_chunks()]
    except pa.ArrowInvalid:
        if table.num_rows < 2:
            raise
        half = table.num_rows // 2
        return _pieces(table.slice(0, half)) + _pieces(table.slice(half))


def parquet_to_table(data: bytes) -> pa.Table:
    return pq.read_table(io.BytesIO(data))


@dataclass(frozen=True)
class ParquetTail:
    """A Parquet object's footer, read from its end: the bytes read (`data`, starting at `start`)
    hold the whole footer; `requests` GETs received `received` bytes for them."""

    metadata: pq.FileMetaData
    data: bytes
    start: int
    size: int
    requests: int
    received: int


def read_parquet_tail(store: S3Store, key: str, length: int, *, etag: str | None = None,
                      what: str = "") -> ParquetTail:
    """The object's last `length` bytes and its footer, parsed: one GET, or a second when the footer
    is longer. `etag`: only that version (else a 412). `what` names the object in the error."""
    data, size = store.get_tail(key, length, if_match=etag)
    requests, received = 1, len(data)
    if len(data) < 12 or data[-4:] != b"PAR1":
        raise CorruptStateError(f"{what}{' ' if what else ''}{store.uri(key)} is not a Parquet file")
    footer = int.from_bytes(data[-8:-4], "little") + 8
    if len(data) < footer <= size:
        data, _ = store.get_tail(key, footer, if_match=etag)
        requests, received = requests + 1, received + len(data)
    metadata = pq.read_metadata(pa.BufferReader(data[-footer:]))
    return ParquetTail(metadata, data, size - len(data), size, requests, received)
