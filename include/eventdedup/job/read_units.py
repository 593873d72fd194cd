"""Which bytes each read task parses: input objects cut into line-aligned byte ranges, and the
ranges packed into tasks, the way Spark's file sources split and pack files.

A large uncompressed object is read as several ranges with ranged GETs, so one big object keeps
every core busy; a line belongs to the range its first byte lies in (the range reads on to the
end of its last line). Small objects are packed together, each costing `OPEN_COST_BYTES` more
than its size (a GET's latency is worth about that much parsing). A gzip object cannot be read
in byte ranges; a large one is cut into shares instead (at most one per core): every share's task
reads and inflates the whole object and parses the lines whose first byte lies in its part of
the inflated text (eventdedup.parse.input_lines.split_input_share), so one big gzip object keeps
every core busy at the price of inflating it once per share.

A line's number is only known once every range before it was counted, which happens in other
tasks: a range numbers its lines locally (`ReadUnit.first_line`), and the dedup stage, which
runs after every read task finished, turns them into the object's line numbers (`LineNumbers`).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum

import numpy as np
import numpy.typing as npt
from botocore.exceptions import ClientError

from eventdedup.errors import InputChangedError
from eventdedup.s3store import ObjectInfo, S3Store, is_changed_or_missing
from eventdedup.tables import LINE_BITS, split_seq

MAX_SPLIT_BYTES = 128 * 1024 * 1024  # spark.sql.files.maxPartitionBytes' default
OPEN_COST_BYTES = 1024 * 1024  # ~20 ms of GET latency, at the ~70 MB/s one core parses
UNIT_BITS = 12  # ranges per object: 4,096 at most
LOCAL_LINE_BITS = LINE_BITS - UNIT_BITS  # lines starting in one range: at most its bytes
# A range holds at most this many bytes, so its local line numbers (from 1, one more for a final
# line without newline) stay below 2^LOCAL_LINE_BITS; an object needing more than 2^UNIT_BITS
# such ranges (over a TiB) is read whole.
MAX_RANGE_BYTES = (1 << LOCAL_LINE_BITS) - 2
_EXTEND_BYTES = 1024 * 1024  # read on past a range's end this much at a time, to its last line's end
GZIP_MAGIC = b"\x1f\x8b"


class Cut(Enum):
    """How a large object may be cut into read units."""

    WHOLE = "whole"  # never: read by one task (an excluded or oversized object, a populate table)
    BYTES = "bytes"  # line-aligned byte ranges, read with ranged GETs
    SHARES = "shares"  # shares of its inflated lines, each inflating the whole object (gzip)


@dataclass(frozen=True)
class ReadUnit:
    input_index: int
    info: ObjectInfo
    unit: int  # this range's place in its object, from 0
    units: int  # ranges the object was cut into (1: read whole)
    start: int  # the object's bytes this unit stands for (of a share: a share of the compressed size)
    stop: int
    inflated_share: bool = False  # one of `units` shares of a gzip object's inflated lines

    @property
    def whole(self) -> bool:
        return self.units == 1

    @property
    def first_line(self) -> int:
        """The local number of the range's first line: its range index above the line bits."""
        return (self.unit << LOCAL_LINE_BITS) + 1

    @property
    def size(self) -> int:
        return self.stop - self.start


def split_bytes(total_bytes: int, parallelism: int) -> int:
    """Bytes per read task: an even share of the input per core (whole rounds of tasks, so no
    core idles in the last one), never more than MAX_SPLIT_BYTES nor less than OPEN_COST_BYTES."""
    cores = max(parallelism, 1)
    tasks = _whole_rounds(-(-total_bytes // min(MAX_SPLIT_BYTES, max(OPEN_COST_BYTES, -(-total_bytes // cores)))),
                          cores)
    return max(OPEN_COST_BYTES, -(-total_bytes // tasks))


def dedup_partitions(configured: int, buckets: int, parallelism: int, input_bytes: int) -> int:
    """Dedup tasks for a batch: as set (at most one per bucket), or else about MAX_SPLIT_BYTES of
    input each in whole rounds over the cores, the way adaptive query execution sizes shuffle
    partitions: a small batch is one round of tasks, not one task per bucket."""
    if configured:
        return max(1, min(configured, buckets))
    return max(1, min(_whole_rounds(-(-input_bytes // MAX_SPLIT_BYTES), max(parallelism, 1)), buckets))


def _whole_rounds(tasks: int, cores: int) -> int:
    """At least one task, rounded up to a multiple of the cores: no core idles in the last round."""
    return -(-max(tasks, 1) // cores) * cores


def plan_read_tasks(inputs: Sequence[tuple[int, ObjectInfo]], parallelism: int,
                    cut_of: Callable[[int, ObjectInfo], Cut]) -> list[list[ReadUnit]]:
    """The read tasks: each a list of ranges. `cut_of` says how an object may be cut (it is asked
    only about objects larger than a task's share)."""
    target = split_bytes(sum(info.size for _, info in inputs), parallelism)
    units: list[ReadUnit] = []
    for index, info in inputs:
        count = min(-(-info.size // target), 1 << UNIT_BITS) if info.size > target else 1
        cut = cut_of(index, info) if count > 1 else Cut.WHOLE
        if cut is Cut.SHARES:  # each share inflates the whole object: more shares than cores only cost
            count = min(count, max(parallelism, 1))
        if cut is Cut.WHOLE or (cut is Cut.BYTES and -(-info.size // count) > MAX_RANGE_BYTES):
            count = 1
        bounds = [info.size * k // count for k in range(count + 1)]
        units.extend(ReadUnit(index, info, k, count, bounds[k], bounds[k + 1], cut is Cut.SHARES and count > 1)
                     for k in range(count))
    # Spark's FilePartition packing: largest first, next fit, each range costing its open cost.
    units.sort(key=lambda unit: (-unit.size, unit.input_index, unit.unit))
    tasks: list[list[ReadUnit]] = []
    current: list[ReadUnit] = []
    filled = 0
    for unit in units:
        if current and filled + unit.size > target:
            tasks.append(current)
            current, filled = [], 0
        current.append(unit)
        filled += unit.size + OPEN_COST_BYTES
    if current:
        tasks.append(current)
    return tasks


@contextmanager
def reading_input(store: S3Store, batch_id: str, info: ObjectInfo) -> Iterator[None]:
    """Reads of a batch's frozen input: an object changed or gone since staging is named."""
    try:
        yield
    except ClientError as exc:
        if is_changed_or_missing(exc):
            raise InputChangedError(
                f"batch {batch_id}: input {store.uri(info.key)} changed or vanished since the batch was staged "
                f"(recorded ETag {info.etag}); a rerun would not reproduce the batch"
            ) from None
        raise


def starts_gzip(store: S3Store, batch_id: str, info: ObjectInfo) -> bool:
    with reading_input(store, batch_id, info):
        return store.get_bytes(info.key, if_match=info.etag, byte_range=(0, len(GZIP_MAGIC))) == GZIP_MAGIC


def read_unit_bytes(store: S3Store, unit: ReadUnit) -> bytes:
    """The bytes of the lines whose first byte lies in the range: from just after the last newline
    before its start to the first newline at or after its end (or the object's end)."""
    info = unit.info
    if unit.whole or unit.inflated_share:
        return store.get_bytes(info.key, if_match=info.etag)
    lead = 1 if unit.start > 0 else 0  # the byte before the range says whether a line starts at it
    data = store.get_bytes(info.key, if_match=info.etag, byte_range=(unit.start - lead, unit.stop))
    if lead:
        newline = data.find(b"\n")
        if newline < 0:
            return b""  # one line runs through the whole range: it belongs to an earlier range
        data = data[newline + 1:]
    if not data or data.endswith(b"\n") or unit.stop >= info.size:
        return data
    pieces, position = [data], unit.stop
    while position < info.size:
        more = store.get_bytes(info.key, if_match=info.etag,
                               byte_range=(position, min(position + _EXTEND_BYTES, info.size)))
        newline = more.find(b"\n")
        if newline >= 0:
            pieces.append(more[:newline + 1])
            break
        pieces.append(more)
        position += len(more)
    return b"".join(pieces)


@dataclass(frozen=True)
class LineNumbers:
    """Lines per range of each object (input index -> counts in range order), to turn the
    ranges' local line numbers into the object's."""

    lines_per_unit: Mapping[int, Sequence[int]]

    def of(self, input_index: int, local: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        counts = self.lines_per_unit.get(input_index)
        local = np.asarray(local, np.int64)
        if not counts or len(counts) == 1:
            return local
        before = np.concatenate([[0], np.cumsum(np.asarray(counts, np.int64))])
        unit = local >> LOCAL_LINE_BITS
        line = local & ((1 << LOCAL_LINE_BITS) - 1)
        global_lines: npt.NDArray[np.int64] = np.where(line == 0, 0, before[unit] + line)
        return global_lines

    def of_seqs(self, seqs: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Input index and the object's line number of each seq (tables.make_seq)."""
        input_index, local = split_seq(np.asarray(seqs, np.int64))
        lines = local.copy()
        for index in np.unique(input_index).tolist():
            rows = input_index == index
            lines[rows] = self.of(index, local[rows])
        return input_index, lines
