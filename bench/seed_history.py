"""Bulk-load the workload's history into each system, in that system's own format.

eventdedup: history batches are committed as the engine commits them (one copy-on-write cache
segment per touched (date, hour, bucket), one commit record per batch, log checkpoints), but
written directly instead of by running 24-384 Spark jobs over text nobody reads. Two shortcuts,
both invisible to the measured batch: history batches commit no data files (the measured batch
never reads output data), and the fingerprint of a history event the measured batch does not
resend is derived from its id rather than from its JSON (it is never compared with anything).
Fingerprints of resent events are the library's own, computed from the exact resent line.
Each batch also copies its arrival hour's id guards forward, as the job does. Superseded segments
and guards are deleted as the maintenance DAG would, so the emulator holds only heads.
"""
from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from workload import HOUR_US, HistoryBatch, Workload, event_line, id_bytes, iso_texts, uuid_texts

from eventdedup.cache.guard import IdGuard, encode_guard
from eventdedup.cache.identity import check_cache_identity
from eventdedup.cache.segment import CacheRun, encode_segment
from eventdedup.commit.log import write_checkpoint_if_due, write_commit
from eventdedup.commit.records import CommitRecord, PromotedObject
from eventdedup.commit.state import CommittedState
from eventdedup.config import Config
from eventdedup.counts import BatchCounts
from eventdedup.keys import CacheKey, bucket_array, guard_head_key, hour_codes
from eventdedup.layout import Layout
from eventdedup.parse.event_parser import parse_event
from eventdedup.parse.rules import ParseRules
from eventdedup.s3store import S3Store


def seed_eventdedup(store: S3Store, config: Config, workload: Workload) -> CommittedState:
    layout = Layout(config.layout)
    identity = check_cache_identity(store, layout, config)
    buckets = identity.epochs.coarse
    rules = ParseRules.for_batch(config, workload.spec.anchor, fingerprint_hash=identity.fingerprint_hash)
    state = CommittedState()
    open_runs: dict[CacheKey, list[CacheRun]] = {}  # runs of hours a later history batch still extends
    guards: dict[tuple[int, int], IdGuard] = {}  # (arrival hour, bucket) -> the hour's guard so far
    with ThreadPoolExecutor(16) as pool:
        for j in range(workload.spec.history_batches):
            batch = workload.history_batch(j)
            fingerprints = _fingerprints(batch, workload.resent_indexes(j), rules)
            segments = []
            for key, run in _runs_by_cache_key(batch, fingerprints, buckets):
                runs = open_runs.get(key, []) + [run]
                open_runs[key] = runs
                segments.append((key, encode_segment(runs)))
            written = list(pool.map(lambda item, batch_id=batch.batch_id: _put_segment(store, layout, batch_id, *item),
                                    segments))
            arrival = int(batch.as_of.timestamp()) // 3600
            written += list(pool.map(lambda item, batch_id=batch.batch_id, hour=arrival: _put_guard(
                store, layout, batch_id, hour, *item), _grown_guards(guards, arrival, batch, buckets)))
            superseded = [state.cache_heads[name] for _, (name, _) in written if name in state.cache_heads]
            record = CommitRecord(
                version=state.version + 1, batch_id=batch.batch_id, previous_batch_id=state.last_batch_id,
                token=f"bench-seed-{j}", as_of=batch.as_of.isoformat(),
                counts=BatchCounts(input_lines=len(batch.ids), output_rows=len(batch.ids),
                                   cache_keys_written=len(batch.ids)),
                objects=tuple(obj for obj, _ in written), cache_heads=dict(heads for _, heads in written))
            write_commit(store, layout, record)
            state = state.apply(record, layout.commit(record.version))
            state = write_checkpoint_if_due(store, layout, state, config.dedup.checkpoint_interval)
            store.delete_keys(superseded)
            oldest_open = int(batch.as_of.timestamp()) * 1_000_000 // HOUR_US - 1
            open_runs = {k: v for k, v in open_runs.items() if k.hour_index >= oldest_open}
    return state


def _fingerprints(batch: HistoryBatch, resent: np.ndarray, rules: ParseRules) -> np.ndarray:
    fingerprints = np.frombuffer(batch.ids.tobytes(), ">u8")[::2].astype(np.uint64) ^ np.uint64(0x5BD1E995)
    for i in resent:
        fingerprints[i] = parse_event(event_line(id_bytes(batch.ids, i), int(batch.times_us[i])), rules).fingerprint
    return fingerprints


def _runs_by_cache_key(batch: HistoryBatch, fingerprints: np.ndarray, buckets: int) -> Iterator[tuple[CacheKey, CacheRun]]:
    code = hour_codes(batch.times_us, bucket_array(batch.ids, buckets), buckets)
    order = np.argsort(code, kind="stable")
    sorted_code = code[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_code)) + 1]
    stops = np.r_[starts[1:], len(order)]
    for start, stop in zip(starts, stops, strict=False):
        rows = order[start:stop]
        run = CacheRun.build(batch.batch_id, batch.ids[rows], fingerprints[rows])
        yield CacheKey.of_code(int(sorted_code[start]), buckets), run


def _grown_guards(guards: dict[tuple[int, int], IdGuard], arrival: int, batch: HistoryBatch,
                  buckets: int) -> list[tuple[int, IdGuard]]:
    bucket_of_row = bucket_array(batch.ids, buckets)
    hours = batch.times_us // HOUR_US
    grown = []
    for bucket in range(buckets):
        rows = bucket_of_row == bucket
        guard = guards.get((arrival, bucket), IdGuard.empty()).with_ids(batch.ids[rows], hours[rows])
        guards[(arrival, bucket)] = guard
        grown.append((bucket, guard))
    return grown


def _put_guard(store: S3Store, layout: Layout, batch_id: str, arrival: int, bucket: int,
               guard: IdGuard) -> tuple[PromotedObject, tuple[str, str]]:
    final = layout.final_guard(batch_id, arrival, bucket)
    info = store.put_bytes(final, encode_guard(guard))
    return PromotedObject("cache", final, info.size, info.etag), (guard_head_key(arrival, bucket), final)


def _put_segment(store: S3Store, layout: Layout, batch_id: str, key: CacheKey,
                 segment: bytes) -> tuple[PromotedObject, tuple[str, str]]:
    final = layout.final_cache_segment(batch_id, key)
    info = store.put_bytes(final, segment)
    return PromotedObject("cache", final, info.size, info.etag), (str(key), final)


def uuid_column(ids: np.ndarray) -> pa.Array:
    count = len(ids)
    offsets = pa.py_buffer((np.arange(count + 1, dtype=np.int32) * 36).tobytes())
    return pa.StringArray.from_buffers(count, offsets, pa.py_buffer(uuid_texts(ids).tobytes()))


def seed_id_parquet(directory: Path, workload: Workload) -> None:
    """The Spark batch peer's committed ids: one Parquet file per history batch, as its own
    commits would have appended them (event_id, event_time)."""
    directory.mkdir(parents=True, exist_ok=True)
    for j in range(workload.spec.history_batches):
        batch = workload.history_batch(j)
        table = pa.table({"event_id": uuid_column(batch.ids),
                          "event_time": pa.array(batch.times_us, pa.timestamp("us", tz="UTC"))})
        pq.write_table(table, directory / f"{batch.batch_id}.parquet", compression="snappy")


def seed_stream_files(directory: Path, workload: Workload) -> None:
    """The Structured Streaming peer's history: one JSON-lines file per history batch holding the
    two fields its state depends on (id and event time); the other columns read as null."""
    directory.mkdir(parents=True, exist_ok=True)
    for j in range(workload.spec.history_batches):
        batch = workload.history_batch(j)
        # {"event_id":"<36>","created_at":"<27>"}\n, assembled column-wise
        parts = [b'{"event_id":"', uuid_texts(batch.ids), b'","created_at":"', iso_texts(batch.times_us), b'"}\n']
        columns = [np.broadcast_to(np.frombuffer(p, np.uint8), (len(batch.ids), len(p))) if isinstance(p, bytes) else p
                   for p in parts]
        (directory / f"{batch.batch_id}.json").write_bytes(np.ascontiguousarray(np.hstack(columns)).tobytes())
