"""Executor side of stage 2: for each cache key of one sorted partition, load its committed
cache once, decide every event, and stage data, audit rows and the key's new cache segment.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arrow_tables import AUDIT_SCHEMA, OUTPUT_SCHEMA, ipc_to_table, split_seq, table_to_parquet
from .cache_segment import CacheRun, decode_segment, encode_segment
from .config import S3Settings
from .dedup_core import CacheView, KeyDecision, Outcome, decide_key_group, new_cache_run
from .keys import CacheKey, digest_array
from .layout import Layout
from .read_stage import META_DAY, ObjectStats
from .s3store import S3Store, process_client

IO_THREADS = 16


@dataclass(frozen=True)
class DedupContext:
    batch_id: str
    s3: S3Settings
    bucket: str
    layout: Layout
    visible_owners: frozenset[str]
    # Hour index (hours since epoch) of the oldest hour inside the dedup window: older
    # events are still processed, but against no cache and without writing one.
    window_start_hour: int
    input_keys: tuple[str, ...]


@dataclass
class _KeyWork:
    key: CacheKey
    table: pa.Table
    runs: list[CacheRun]


def dedup_partition(ctx: DedupContext, cache_heads: Mapping[str, str], partition: int,
                    records: Iterable[tuple[tuple[int, int, int], Any]]) -> Iterator[dict[str, Any]]:
    store = S3Store(process_client(ctx.s3), ctx.bucket)
    groups: dict[tuple[int, int, int], list[bytes]] = defaultdict(list)
    for key, value in records:
        if key[0] == META_DAY:
            yield _object_stats_record(value)
        else:
            groups[key].append(value)  # sorted input: each key's chunks arrive together
    keys = [CacheKey(*key) for key in groups]
    with ThreadPoolExecutor(IO_THREADS) as pool:
        runs = list(pool.map(lambda k: _load_runs(store, ctx, cache_heads, k), keys))
        works = [_KeyWork(k, _sorted_by_seq(groups[k.as_tuple()]), r) for k, r in zip(keys, runs)]
        counts: Counter[str] = Counter()
        outputs: dict[tuple[str, str], list[pa.Table]] = defaultdict(list)
        audits: list[pa.Table] = []
        segment_jobs = []
        for work in works:
            kept, audit, segment = _decide(ctx, work, counts)
            outputs[(work.key.date_text, work.key.hour_text)].append(kept)
            if audit.num_rows:
                audits.append(audit)
            if segment is not None:
                segment_jobs.append((work.key, segment))
        staged = list(pool.map(lambda job: _stage_segment(store, ctx, *job), segment_jobs))
        staged += list(pool.map(lambda item: _stage_data(store, ctx, partition, *item), sorted(outputs.items())))
    if audits:
        staged.append(_stage_audit(store, ctx, partition, pa.concat_tables(audits)))
    yield from (record for record in staged if record is not None)
    yield {"kind": "stats", "counts": dict(counts)}


def _object_stats_record(stats: ObjectStats) -> dict[str, Any]:
    record: dict[str, Any] = {"kind": "stats", "counts": {"input_lines": stats.input_lines, "malformed": stats.quarantined}}
    if stats.staged is not None:
        record["staged_object"] = stats.staged
    return record


def _sorted_by_seq(chunks: list[bytes]) -> pa.Table:
    table = pa.concat_tables([ipc_to_table(chunk) for chunk in chunks])
    return table.take(pc.sort_indices(table, sort_keys=[("seq", "ascending")]))


def _in_window(ctx: DedupContext, key: CacheKey) -> bool:
    return key.day * 24 + key.hour >= ctx.window_start_hour


def _load_runs(store: S3Store, ctx: DedupContext, cache_heads: Mapping[str, str], key: CacheKey) -> list[CacheRun]:
    head = cache_heads.get(str(key))
    if head is None or not _in_window(ctx, key):
        return []
    data = store.get_bytes(head)
    return decode_segment(data, store.uri(head))


def _decide(ctx: DedupContext, work: _KeyWork, counts: Counter[str]) -> tuple[pa.Table, pa.Table, bytes | None]:
    table = work.table
    in_window = _in_window(ctx, work.key)
    visible = [run for run in work.runs if run.owner in ctx.visible_owners]
    cache = CacheView.from_runs(visible, ctx.visible_owners) if in_window else CacheView.empty()
    digests = digest_array(table.column("key_digest"))
    fingerprints = table.column("fingerprint").to_numpy()
    decision = decide_key_group(digests, fingerprints, cache, ctx.batch_id)
    kept_mask = decision.kept_mask
    kept = table.filter(pa.array(kept_mask))
    _count(counts, decision, table.num_rows, in_window)
    segment = None
    if in_window and kept.num_rows:
        own_run = new_cache_run(ctx.batch_id, digests, fingerprints, decision)
        segment = encode_segment(visible + [own_run])
        counts["cache_keys_written"] += len(own_run)
    output = pa.table({
        "event_id": kept.column("event_id"), "event_time": kept.column("event_time"),
        "batch_id": pa.array([ctx.batch_id] * kept.num_rows, pa.string()), "raw": kept.column("raw"),
    }, schema=OUTPUT_SCHEMA)
    return output, _audit_rows(ctx, table, decision), segment


def _count(counts: Counter[str], decision: KeyDecision, rows: int, in_window: bool) -> None:
    outcomes = decision.outcomes
    for outcome in Outcome:
        if outcome is not Outcome.KEPT:
            counts[outcome.reason] += int(np.count_nonzero(outcomes == outcome))
    counts["in_batch_duplicates"] += int(np.count_nonzero((outcomes == 1) | (outcomes == 2)))
    counts["cross_batch_duplicates"] += int(np.count_nonzero((outcomes == 3) | (outcomes == 4)))
    counts["output_rows"] += int(np.count_nonzero(outcomes == Outcome.KEPT))
    if not in_window:
        counts["older_than_window"] += rows


def _audit_rows(ctx: DedupContext, table: pa.Table, decision: KeyDecision) -> pa.Table:
    dropped = np.flatnonzero(~decision.kept_mask)
    rows = table.take(pa.array(dropped, pa.int64()))
    sources = [split_seq(seq) for seq in rows.column("seq").to_pylist()]
    return pa.table({
        "event_id": rows.column("event_id"),
        "event_time": rows.column("event_time"),
        "reason": [Outcome(int(decision.outcomes[i])).reason for i in dropped],
        "kept_in_batch": [decision.kept_in_batch[i] for i in dropped],
        "batch_id": [ctx.batch_id] * len(dropped),
        "source_object": [ctx.input_keys[index] for index, _ in sources],
        "line_number": [line for _, line in sources],
        "raw": rows.column("raw"),
    }, schema=AUDIT_SCHEMA)


def _staged_record(kind: str, info_json: dict[str, Any], final_key: str, rows: int, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "staged": info_json, "final_key": final_key, "rows": rows, **extra}


def _stage_segment(store: S3Store, ctx: DedupContext, key: CacheKey, segment: bytes) -> dict[str, Any]:
    info = store.put_bytes(ctx.layout.staged_cache_segment(ctx.batch_id, key), segment)
    final = ctx.layout.final_cache_segment(ctx.batch_id, key)
    return _staged_record("cache", info.to_json(), final, 0, cache_key=str(key))


def _stage_data(store: S3Store, ctx: DedupContext, partition: int, date_hour: tuple[str, str],
                tables: list[pa.Table]) -> dict[str, Any] | None:
    table = pa.concat_tables(tables)
    if table.num_rows == 0:
        return None
    date_text, hour_text = date_hour
    info = store.put_bytes(ctx.layout.staged_data(ctx.batch_id, date_text, hour_text, partition), table_to_parquet(table))
    final = ctx.layout.final_data(ctx.batch_id, date_text, hour_text, partition)
    return _staged_record("data", info.to_json(), final, table.num_rows)


def _stage_audit(store: S3Store, ctx: DedupContext, partition: int, table: pa.Table) -> dict[str, Any]:
    info = store.put_bytes(ctx.layout.staged_audit(ctx.batch_id, partition), table_to_parquet(table))
    return _staged_record("audit", info.to_json(), ctx.layout.final_audit(ctx.batch_id, partition), table.num_rows)
