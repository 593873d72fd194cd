"""Some columns of a committed Parquet object, read by byte range: the footer, then only the chunks
of the columns asked for.

The audit holds each duplicate's raw line (~300 bytes of the ~330 a row takes); the report needs
its short, dictionary-encoded columns (source object, producer, ...), a few KB a file. Reading
them as ranges costs one GET for the tail (the footer, and often the last chunks with it) and one
for each run of needed chunks not in it, instead of every byte of the file.
"""
from __future__ import annotations

import mmap
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from eventdedup.s3store import S3Store
from eventdedup.tables import read_parquet_tail

# The footer of a file the job writes (one row group, ten columns) is a few KB, and the producer
# chunk after `raw` a few more: 16 KiB holds both for a batch's audit file, in one GET.
TAIL_READ = 16 << 10
# Chunks closer than this are read in one range (a GET's overhead outweighs a few KB of bytes).
_COALESCE_GAP = 16 << 10


@dataclass
class ReadCost:
    """What reading cost: requests made and bytes received, against the objects' whole size."""

    requests: int = 0
    bytes_read: int = 0
    object_bytes: int = 0

    def add(self, other: ReadCost) -> None:
        self.requests += other.requests
        self.bytes_read += other.bytes_read
        self.object_bytes += other.object_bytes


def read_columns(store: S3Store, key: str, columns: Sequence[str], *, etag: str | None = None,
                 cost: ReadCost | None = None) -> pa.Table:
    """The named columns of the object's every row group (a column the file lacks comes back null:
    older files, docs/formats.md). `etag`: only that version of the object."""
    tail = read_parquet_tail(store, key, TAIL_READ, etag=etag)
    size, metadata = tail.size, tail.metadata
    spent = ReadCost(tail.requests, tail.received, size)
    pieces = {tail.start: tail.data}
    present = [name for name in columns if name in metadata.schema.names]
    for start, stop in _missing_ranges(metadata, present, tail.start):
        pieces[start] = store.get_bytes(key, if_match=etag, byte_range=(start, stop))
        spent.requests, spent.bytes_read = spent.requests + 1, spent.bytes_read + stop - start
    if cost is not None:
        cost.add(spent)
    # The fetched ranges at their offsets in an anonymous map of the object's size, read by Arrow in
    # C++: pages never written are never allocated (a 57 MB file read for 20 KB costs 20 KB), and the
    # footer names none of the bytes never fetched for these columns.
    if tail.start == 0:  # the first read held the whole object: nothing else was fetched
        source = pa.BufferReader(tail.data)
    else:
        whole = mmap.mmap(-1, size)
        for start, piece in pieces.items():
            whole[start:start + len(piece)] = piece
        source = pa.BufferReader(pa.py_buffer(whole))
    table = pq.ParquetFile(source, metadata=metadata).read(columns=present, use_threads=False)
    for name in columns:
        if name not in present:
            table = table.append_column(name, pa.nulls(table.num_rows, pa.string()))
    return table.select(list(columns))


def _missing_ranges(metadata: pq.FileMetaData, columns: Sequence[str], fetched_from: int) -> list[tuple[int, int]]:
    """The byte ranges of the columns' chunks below `fetched_from`, runs closer than the gap merged."""
    wanted = set(columns)
    spans: list[tuple[int, int]] = []
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for index in range(row_group.num_columns):
            chunk = row_group.column(index)
            if chunk.path_in_schema not in wanted:
                continue
            start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
            start = min(start, chunk.data_page_offset)
            if start < fetched_from:
                spans.append((start, start + chunk.total_compressed_size))
    merged: list[tuple[int, int]] = []
    for start, stop in sorted(spans):
        if merged and start - merged[-1][1] <= _COALESCE_GAP:
            merged[-1] = (merged[-1][0], max(merged[-1][1], stop))
        else:
            merged.append((start, stop))
    return merged
