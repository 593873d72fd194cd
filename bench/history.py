"""The workload's history, loaded into each system in its own format before the measured batch.

eventdedup's is written as its batches would have committed it (a segment per (hour, bucket),
copied forward by each batch adding to it; each arrival hour's id guards; commit records and log
checkpoints; superseded objects deleted as maintenance does), but directly, not by Spark jobs. Two shortcuts the measured batch cannot
see: history batches commit no data files (it never reads output data), and a history event it
does not resend gets a fingerprint derived from its id (never compared with anything); a resent
event's is the library's own, of the exact line (of every variant of the batch to be measured on it).
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.stores import commit_directly
from bench.workload import HOUR_US, HistoryBatch, Workload, event_line, id_bytes, uuid_texts
from eventdedup.cache.guard import IdGuard, encode_guard
from eventdedup.cache.identity import check_cache_identity
from eventdedup.cache.segment import CacheRun, encode_segment
from eventdedup.commit.records import CommitRecord, PromotedObject
from eventdedup.commit.state import CommittedState
from eventdedup.config import Config
from eventdedup.counts import BatchCounts
from eventdedup.keys import CacheKey, bucket_array, guard_head_key, hour_codes
from eventdedup.layout import Layout
from eventdedup.parse.event_parser import parse_event
from eventdedup.parse.rules import ParseRules
from eventdedup.s3store import S3Store

Written = tuple[PromotedObject, tuple[str, str]]  # the object and the head it becomes


def seed_eventdedup(store: S3Store, config: Config, workload: Workload, variants: Iterable[int] = (0,)) -> CommittedState:
    """Commit the workload's history batches into an empty store, oldest first; the events the
    measured batch's `variants` resend get their true fingerprints."""
    variants = tuple(variants)
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
            resent = np.unique(np.concatenate([workload.resent_indexes(j, v) for v in variants]))
            fingerprints = _fingerprints(batch, resent, rules)
            puts = []
            for key, run in _runs_by_cache_key(batch, fingerprints, buckets):
                open_runs[key] = [*open_runs.get(key, []), run]
                puts.append((layout.final_cache_segment(batch.batch_id, key), str(key), encode_segment(open_runs[key])))
            arrival = int(batch.as_of.timestamp()) // 3600
            puts += [(layout.final_guard(batch.batch_id, arrival, bucket), guard_head_key(arrival, bucket),
                      encode_guard(guard)) for bucket, guard in _grown_guards(guards, arrival, batch, buckets)]
            written: list[Written] = list(pool.map(lambda put: _put(store, *put), puts))
            superseded = [state.cache_heads[head] for _, (head, _) in written if head in state.cache_heads]
            record = CommitRecord(
                version=state.version + 1, batch_id=batch.batch_id, previous_batch_id=state.last_batch_id,
                token=f"bench-seed-{j}", as_of=batch.as_of.isoformat(),
                counts=BatchCounts(input_lines=len(batch.ids), output_rows=len(batch.ids),
                                   cache_keys_written=len(batch.ids)),
                objects=tuple(obj for obj, _ in written), cache_heads=dict(heads for _, heads in written))
            state = commit_directly(store, config, state, record)
            store.delete_keys(superseded)
            oldest_open = int(batch.as_of.timestamp()) * 1_000_000 // HOUR_US - 1
            open_runs = {k: v for k, v in open_runs.items() if k.hour_index >= oldest_open}
    return state


def _put(store: S3Store, key: str, head: str, body: bytes) -> Written:
    info = store.put_bytes(key, body)
    return PromotedObject("cache", key, info.size, info.etag), (head, key)


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
    for start, stop in zip(starts, np.r_[starts[1:], len(order)], strict=True):
        rows = order[start:stop]
        yield CacheKey.of_code(int(sorted_code[start]), buckets), CacheRun.build(batch.batch_id, batch.ids[rows],
                                                                                 fingerprints[rows])


def _grown_guards(guards: dict[tuple[int, int], IdGuard], arrival: int, batch: HistoryBatch,
                  buckets: int) -> list[tuple[int, IdGuard]]:
    bucket_of_row, hours = bucket_array(batch.ids, buckets), batch.times_us // HOUR_US
    for bucket in range(buckets):
        rows = bucket_of_row == bucket
        guards[(arrival, bucket)] = guards.get((arrival, bucket), IdGuard.empty()).with_ids(batch.ids[rows], hours[rows])
    return [(bucket, guards[(arrival, bucket)]) for bucket in range(buckets)]


def seed_id_parquet(directory: Path, workload: Workload) -> None:
    """The Spark batch peer's committed ids: one Parquet file per history batch, as its own commits
    would have appended them (event_id, event_time)."""
    directory.mkdir(parents=True, exist_ok=True)
    for j in range(workload.spec.history_batches):
        batch = workload.history_batch(j)
        offsets = pa.py_buffer((np.arange(len(batch.ids) + 1, dtype=np.int32) * 36).tobytes())
        ids = pa.StringArray.from_buffers(len(batch.ids), offsets, pa.py_buffer(uuid_texts(batch.ids).tobytes()))
        table = pa.table({"event_id": ids, "event_time": pa.array(batch.times_us, pa.timestamp("us", tz="UTC"))})
        pq.write_table(table, directory / f"{batch.batch_id}.parquet", compression="snappy")


def seed_stream_files(directory: Path, workload: Workload) -> None:
    """The Structured Streaming peer's history: a JSON-lines file per history batch holding the two
    fields its state depends on (id and event time); the other columns read as null."""
    directory.mkdir(parents=True, exist_ok=True)
    for j in range(workload.spec.history_batches):
        batch = workload.history_batch(j)
        # {"event_id":"<36>","created_at":"<27>"}\n, assembled column-wise
        parts = [b'{"event_id":"', uuid_texts(batch.ids), b'","created_at":"', iso_texts(batch.times_us), b'"}\n']
        columns = [np.broadcast_to(np.frombuffer(p, np.uint8), (len(batch.ids), len(p))) if isinstance(p, bytes) else p
                   for p in parts]
        (directory / f"{batch.batch_id}.json").write_bytes(np.ascontiguousarray(np.hstack(columns)).tobytes())


def iso_texts(times_us: np.ndarray) -> np.ndarray:
    """'YYYY-MM-DDTHH:MM:SS.ffffffZ' of every time as an (n, 27) uint8 matrix."""
    out = np.full((len(times_us), 27), ord("Z"), np.uint8)
    out[:, :26] = np.datetime_as_string(times_us.astype("datetime64[us]"), unit="us").astype("S26").view(np.uint8).reshape(-1, 26)
    return out
