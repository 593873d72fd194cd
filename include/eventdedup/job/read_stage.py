"""Executor side of stage 1: read byte ranges of input objects, quarantine bad lines, send each
dedup partition its events.

Each read range becomes one record per dedup partition (an Arrow IPC chunk of its rows bound for
it) instead of thousands of pickled rows, so the shuffle moves bytes, not Python objects; its
quarantined lines and line count travel as small records beside them (eventdedup.job.records).
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from eventdedup.config import S3Settings
from eventdedup.job.read_units import MAX_RANGE_BYTES, ReadUnit, read_unit_bytes, reading_input
from eventdedup.job.records import (
    EventChunk,
    RangeFindings,
    RangeLines,
    ShuffleRecord,
    chunk_record,
    findings_record,
    line_records,
    partition_of_bucket,
)
from eventdedup.keys import MICROS_PER_HOUR, bucket_array, digest_array
from eventdedup.parse.id_time import NO_TIME, id_times_us
from eventdedup.parse.input_lines import object_too_large, split_input, split_input_range, split_input_share
from eventdedup.parse.object_parser import ObjectParse, parse_lines, quarantined_whole
from eventdedup.parse.rules import ParseRules
from eventdedup.parse.table_lines import is_parquet_key, parquet_lines
from eventdedup.s3store import S3Store, process_client
from eventdedup.sorting import distinct_sorted
from eventdedup.tables import split_seq, table_to_ipc


@dataclass(frozen=True)
class ReadContext:
    batch_id: str
    s3: S3Settings
    bucket: str
    rules: ParseRules
    buckets: int  # the coarse count (eventdedup.cache.epochs): the job groups keys by it
    partitions: int  # dedup partitions: a bucket goes to bucket % partitions
    excluded: Mapping[int, str] = field(default_factory=dict)  # input index -> quarantine reason
    populate: bool = False  # a populate batch: its Parquet objects are tables (eventdedup.parse.table_lines)


def read_task(ctx: ReadContext, task: list[tuple[int, ReadUnit]]) -> Iterator[ShuffleRecord]:
    """One read task: its ranges (each with its ordinal in the batch's plan), one after another."""
    store = S3Store(process_client(ctx.s3), ctx.bucket)
    for ordinal, unit in task:
        yield from read_range(ctx, store, ordinal, unit)


def read_range(ctx: ReadContext, store: S3Store, ordinal: int, unit: ReadUnit) -> Iterator[ShuffleRecord]:
    index, info = unit.input_index, unit.info
    if index in ctx.excluded:  # an operator's exclusion: never read
        parsed = quarantined_whole(ctx.excluded[index], ctx.rules)
    elif info.size > ctx.rules.max_object_bytes:  # one finding, decided by the frozen size: never read
        parsed = quarantined_whole(object_too_large(ctx.rules.max_object_bytes, compressed=False), ctx.rules)
    else:
        body = _read_input(store, ctx, unit)
        if ctx.populate and is_parquet_key(info.key):  # never cut: the driver plans it whole
            split = parquet_lines(body, ctx.rules.max_object_bytes)
        elif unit.whole:
            split = split_input(body, ctx.rules.max_object_bytes)
        elif unit.inflated_share:
            share = split_input_share(body, ctx.rules.max_object_bytes, unit.unit, unit.units, MAX_RANGE_BYTES)
            if share is None:
                return  # the object is numbered whole by share 0: this share reports nothing, not even lines
            split = share
        else:
            split = split_input_range(body, at_object_start=unit.start == 0)
        parsed = parse_lines(split, index, ctx.rules, unit.first_line)
    hours = cache_hours(parsed, ctx.rules)
    yield from line_records(ctx.partitions, ordinal, RangeLines(index, unit.unit, parsed.lines))
    yield findings_record(ctx.partitions, ordinal, RangeFindings(index, unit.unit, parsed.lines, parsed.bad_raw,
                                                                 parsed.bad_error, parsed.bad_line))
    for partition, chunk in _chunks_by_partition(parsed.table, hours, ctx.buckets, ctx.partitions):
        yield chunk_record(partition, ordinal, chunk)


def _read_input(store: S3Store, ctx: ReadContext, unit: ReadUnit) -> bytes:
    with reading_input(store, ctx.batch_id, unit.info):
        return read_unit_bytes(store, unit)


def cache_hours(parsed: ObjectParse, rules: ParseRules) -> npt.NDArray[np.int64]:
    """The cache hour of each parsed event: its event time's, or under partition_time = "id" its
    id's; an event whose id carries no valid time moves to the object's quarantine."""
    table = parsed.table
    if rules.partition_time == "event":
        event_hours: npt.NDArray[np.int64] = (
            table.column("event_time").combine_chunks().cast(pa.int64()).to_numpy() // MICROS_PER_HOUR)
        return event_hours
    times, errors = id_times_us(table.column("event_id"))
    outside = (times != NO_TIME) & ((times < rules.min_time_us) | (times > rules.max_time_us))
    for row in np.flatnonzero(outside).tolist():
        errors[row] = (f'partition_time = "id": the time of id {table.column("event_id")[row].as_py()!r} '
                       f"({int(times[row])} us since the epoch) lies outside the accepted event times")
    if errors:
        seq = table.column("seq").to_numpy()
        raw = table.column("raw").to_pylist()
        for row in sorted(errors):
            parsed.bad_raw.append(raw[row].encode("utf-8"))
            parsed.bad_error.append(errors[row])
            parsed.bad_line.append(int(split_seq(seq[row:row + 1])[1][0]))
        good = np.ones(table.num_rows, bool)
        good[list(errors)] = False
        parsed.table = table.filter(pa.array(good))
        times = times[good]
    return times // MICROS_PER_HOUR


def _chunks_by_partition(table: pa.Table, hours: npt.NDArray[np.int64], buckets: int,
                         partitions: int) -> Iterator[tuple[int, EventChunk]]:
    """The range's rows bound for each dedup partition, in input order, with their cache hour.
    One filter per partition (a sequential copy) costs a fraction of sorting the rows."""
    if table.num_rows == 0:
        return
    table = table.append_column("cache_hour", pa.array(hours, pa.int64()))
    first_seq = int(table.column("seq")[0].as_py())
    if partitions == 1:
        yield 0, EventChunk(first_seq, table_to_ipc(table))
        return
    partition = partition_of_bucket(bucket_array(digest_array(table.column("key_digest")), buckets), partitions)
    for target in distinct_sorted(partition).tolist():
        rows = table.filter(pa.array(partition == target))
        yield int(target), EventChunk(int(rows.column("seq")[0].as_py()), table_to_ipc(rows))
