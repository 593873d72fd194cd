"""Executor side of stage 1: read one input object, quarantine bad lines, group events by cache key.

Each input object becomes a few hundred records of (cache key, Arrow IPC chunk) instead of
thousands of pickled rows, so the shuffle moves bytes, not Python objects.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from botocore.exceptions import ClientError

from .arrow_tables import QUARANTINE_SCHEMA, table_to_ipc, table_to_parquet
from .batch_parser import parse_object
from .config import S3Settings
from .errors import InputChangedError
from .event_parser import ParseRules
from .keys import CacheKey, bucket_array, digest_array
from .s3store import ObjectInfo, S3Store, error_code, process_client

# Records whose key starts with this day value carry per-object statistics, not events.
META_DAY = -1


@dataclass(frozen=True)
class ReadContext:
    batch_id: str
    s3: S3Settings
    bucket: str
    rules: ParseRules
    buckets: int
    quarantine_key: tuple[str, ...]  # staged quarantine key per input index
    quarantine_final_key: tuple[str, ...]


@dataclass(frozen=True)
class ObjectStats:
    input_index: int
    input_lines: int
    quarantined: int
    staged: dict | None  # the staged quarantine object, if any


def read_input_object(ctx: ReadContext, item: tuple[int, ObjectInfo]) -> Iterator[tuple[tuple[int, int, int], object]]:
    input_index, info = item
    store = S3Store(process_client(ctx.s3), ctx.bucket)
    try:
        body = store.get_bytes(info.key, if_match=info.etag)
    except ClientError as exc:
        if error_code(exc) in ("PreconditionFailed", "412", "NoSuchKey"):
            raise InputChangedError(
                f"batch {ctx.batch_id}: input {store.uri(info.key)} changed or vanished since the batch was staged "
                f"(recorded ETag {info.etag}); a rerun would not reproduce the batch"
            ) from None
        raise
    parsed = parse_object(body, input_index, ctx.rules)
    staged = _stage_quarantine(store, ctx, input_index, info.key, parsed.bad_raw, parsed.bad_error, parsed.bad_line)
    yield (META_DAY, input_index, 0), ObjectStats(input_index, parsed.lines, len(parsed.bad_raw), staged)
    yield from _chunks_by_cache_key(parsed.table, ctx.buckets)


def _chunks_by_cache_key(table: pa.Table, buckets: int) -> Iterator[tuple[tuple[int, int, int], bytes]]:
    if table.num_rows == 0:
        return
    bucket = bucket_array(digest_array(table.column("key_digest")), buckets)
    hours = table.column("event_time").combine_chunks().cast(pa.int64()).to_numpy() // 3_600_000_000
    code = hours * buckets + bucket
    order = np.argsort(code, kind="stable")
    sorted_code = code[order]
    boundaries = np.flatnonzero(np.diff(sorted_code)) + 1
    table = table.take(pa.array(order))
    for start, stop in zip(np.r_[0, boundaries], np.r_[boundaries, len(order)]):
        hour_index, bucket_id = divmod(int(sorted_code[start]), buckets)
        key = CacheKey(hour_index // 24, hour_index % 24, bucket_id)
        yield key.as_tuple(), table_to_ipc(table.slice(start, stop - start))


def _stage_quarantine(store: S3Store, ctx: ReadContext, input_index: int, source: str,
                      raw: list[bytes], errors: list[str], line_numbers: list[int]) -> dict | None:
    if not raw:
        return None
    table = pa.table({
        "raw": raw, "error": errors, "source_object": [source] * len(raw),
        "line_number": line_numbers, "batch_id": [ctx.batch_id] * len(raw),
    }, schema=QUARANTINE_SCHEMA)
    info = store.put_bytes(ctx.quarantine_key[input_index], table_to_parquet(table))
    return {"kind": "quarantine", "staged": info.to_json(),
            "final_key": ctx.quarantine_final_key[input_index], "rows": len(raw)}
