"""Executor side of stage 1: read one input object, quarantine bad lines, group events by cache key.

Each input object becomes a few hundred records of (cache key, Arrow IPC chunk) instead of
thousands of pickled rows, so the shuffle moves bytes, not Python objects.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from botocore.exceptions import ClientError

from eventdedup.commit.job_result import StagedObject
from eventdedup.config import S3Settings
from eventdedup.errors import InputChangedError
from eventdedup.job.records import EventChunk, ObjectStats, ShuffleRecord, chunk_record, stats_record
from eventdedup.keys import MICROS_PER_HOUR, CacheKey, bucket_array, digest_array
from eventdedup.parse.event_parser import ParseRules
from eventdedup.parse.id_time import NO_TIME, id_times_us
from eventdedup.parse.input_lines import object_too_large
from eventdedup.parse.object_parser import ObjectParse, parse_object, quarantined_whole
from eventdedup.s3store import ObjectInfo, S3Store, is_changed_or_missing, process_client
from eventdedup.tables import QUARANTINE_SCHEMA, split_seq, table_to_ipc, table_to_parquet


@dataclass(frozen=True)
class ReadContext:
    batch_id: str
    s3: S3Settings
    bucket: str
    rules: ParseRules
    buckets: int
    quarantine_key: tuple[str, ...]  # staged quarantine key per input index
    quarantine_final_key: tuple[str, ...]
    excluded: Mapping[int, str] = field(default_factory=dict)  # input index -> quarantine reason


def read_input_object(ctx: ReadContext, item: tuple[int, ObjectInfo]) -> Iterator[ShuffleRecord]:
    input_index, info = item
    store = S3Store(process_client(ctx.s3), ctx.bucket)
    if input_index in ctx.excluded:  # an operator's exclusion: never read
        parsed = quarantined_whole(ctx.excluded[input_index])
    elif info.size > ctx.rules.max_object_bytes:  # one finding, decided by the frozen size: never read
        parsed = quarantined_whole(object_too_large(ctx.rules.max_object_bytes, compressed=False))
    else:
        parsed = parse_object(_read_input(store, ctx, info), input_index, ctx.rules)
    hours = cache_hours(parsed, ctx.rules)
    staged = _stage_quarantine(store, ctx, input_index, info.key, parsed.bad_raw, parsed.bad_error, parsed.bad_line)
    yield stats_record(ObjectStats(input_index, parsed.lines, len(parsed.bad_raw), staged))
    for chunk in _chunks_by_cache_key(parsed.table, hours, ctx.buckets):
        yield chunk_record(chunk)


def _read_input(store: S3Store, ctx: ReadContext, info: ObjectInfo) -> bytes:
    try:
        return store.get_bytes(info.key, if_match=info.etag)
    except ClientError as exc:
        if is_changed_or_missing(exc):
            raise InputChangedError(
                f"batch {ctx.batch_id}: input {store.uri(info.key)} changed or vanished since the batch was staged "
                f"(recorded ETag {info.etag}); a rerun would not reproduce the batch"
            ) from None
        raise


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


def _chunks_by_cache_key(table: pa.Table, hours: npt.NDArray[np.int64], buckets: int) -> Iterator[EventChunk]:
    if table.num_rows == 0:
        return
    bucket = bucket_array(digest_array(table.column("key_digest")), buckets)
    code = hours * buckets + bucket
    order = np.argsort(code, kind="stable")
    sorted_code = code[order]
    boundaries = np.flatnonzero(np.diff(sorted_code)) + 1
    table = table.take(pa.array(order))
    for start, stop in zip(np.r_[0, boundaries], np.r_[boundaries, len(order)], strict=True):
        key = CacheKey.of_code(int(sorted_code[start]), buckets)
        yield EventChunk(key, table_to_ipc(table.slice(start, stop - start)))


def _stage_quarantine(store: S3Store, ctx: ReadContext, input_index: int, source: str,
                      raw: list[bytes], errors: list[str], line_numbers: list[int]) -> StagedObject | None:
    if not raw:
        return None
    table = pa.table({
        "raw": raw, "error": errors, "source_object": [source] * len(raw),
        "line_number": line_numbers, "batch_id": [ctx.batch_id] * len(raw),
    }, schema=QUARANTINE_SCHEMA)
    info = store.put_bytes(ctx.quarantine_key[input_index], table_to_parquet(table))
    return StagedObject("quarantine", info, ctx.quarantine_final_key[input_index], len(raw))
