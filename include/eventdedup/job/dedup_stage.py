"""Executor side of stage 2: for each cache key of one sorted partition, load its committed
cache once, decide every event, and stage data, audit rows and the key's new cache segment.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eventdedup.cache.heads import copy_forward_segment, load_head_runs
from eventdedup.cache.segment import CacheRun
from eventdedup.cache.view import CacheView
from eventdedup.commit.job_result import StagedObject
from eventdedup.config import S3Settings
from eventdedup.dedup.decide import (
    Action,
    DuplicatePolicy,
    KeyDecision,
    Outcome,
    decide_key_group,
    new_cache_run,
    renamed_event_id,
)
from eventdedup.dedup.survivor import SurvivorPolicy
from eventdedup.job.records import DriverRecord, ObjectStats, PartitionCounts, ShuffleRecord
from eventdedup.keys import CacheKey, digest_array
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store, process_client
from eventdedup.tables import AUDIT_SCHEMA, OUTPUT_SCHEMA, ipc_to_table, split_seq, table_to_parquet

IO_THREADS = 16


@dataclass(frozen=True)
class DedupContext:
    batch_id: str
    s3: S3Settings
    bucket: str
    layout: Layout
    hidden_owners: frozenset[str]  # eventdedup.cache.history.BatchHistory
    # Hour index (hours since epoch) of the oldest hour inside the dedup window (never before the
    # log's expiry horizon): older events are still processed, but against no cache and without
    # writing one.
    window_start_hour: int
    input_keys: tuple[str, ...]
    survivor: SurvivorPolicy = SurvivorPolicy("first")
    policy: DuplicatePolicy = DuplicatePolicy()


@dataclass
class _KeyWork:
    key: CacheKey
    table: pa.Table
    runs: list[CacheRun]


def dedup_partition(ctx: DedupContext, cache_heads: Mapping[str, str], partition: int,
                    records: Iterable[ShuffleRecord]) -> Iterator[DriverRecord]:
    store = S3Store(process_client(ctx.s3), ctx.bucket)
    groups: dict[CacheKey, list[bytes]] = defaultdict(list)
    for _, record in records:
        if isinstance(record, ObjectStats):
            yield from _object_stats_records(record)
        else:
            groups[record.key].append(record.ipc)  # sorted input: each key's chunks arrive together
    keys = list(groups)
    hours_left = Counter((key.date_text, key.hour_text) for key in keys)
    counts: Counter[str] = Counter()
    outputs: dict[tuple[str, str], list[pa.Table]] = defaultdict(list)
    audits: list[pa.Table] = []
    with ThreadPoolExecutor(IO_THREADS) as pool:
        # Every cache load is in flight at once; each key is decided as soon as its load lands,
        # and its segment (and an hour's data, once its last key is decided) is written while
        # the next key is decided: S3 latency overlaps the compute instead of adding to it.
        loads = [pool.submit(_load_runs, store, ctx, cache_heads, key) for key in keys]
        writes: list[Future[StagedObject | None]] = []
        for key, load in zip(keys, loads, strict=True):
            work = _KeyWork(key, _sorted_by_seq(groups.pop(key)), load.result())
            kept, audit, segment = _decide(ctx, work, counts)
            if audit.num_rows:
                audits.append(audit)
            if segment is not None:
                writes.append(pool.submit(_stage_segment, store, ctx, key, segment))
            hour = (key.date_text, key.hour_text)
            outputs[hour].append(kept)
            hours_left[hour] -= 1
            if not hours_left[hour]:
                writes.append(pool.submit(_stage_data, store, ctx, partition, hour, outputs.pop(hour)))
        staged = [write.result() for write in writes]
    if audits:
        staged.append(_stage_audit(store, ctx, partition, pa.concat_tables(audits)))
    yield from (record for record in staged if record is not None)
    yield PartitionCounts(dict(counts))


def _object_stats_records(stats: ObjectStats) -> Iterator[DriverRecord]:
    yield PartitionCounts({"input_lines": stats.input_lines, "malformed": stats.quarantined})
    if stats.quarantine is not None:
        yield stats.quarantine


def _sorted_by_seq(chunks: list[bytes]) -> pa.Table:
    """One key's rows in input order. Each chunk comes from one input object (a contiguous seq
    range) and is already in input order, so ordering the chunks by their first seq orders
    the rows; the shuffle only delivers the chunks in an arbitrary order."""
    tables = [ipc_to_table(chunk) for chunk in chunks]
    tables.sort(key=lambda table: table.column("seq")[0].as_py())
    table = pa.concat_tables(tables)
    seq = table.column("seq").to_numpy()
    if len(seq) > 1 and not (seq[1:] > seq[:-1]).all():  # cannot happen; cheap to make sure
        table = table.take(pc.sort_indices(table, sort_keys=[("seq", "ascending")]))
    return table


def _in_window(ctx: DedupContext, key: CacheKey) -> bool:
    return key.hour_index >= ctx.window_start_hour


def _load_runs(store: S3Store, ctx: DedupContext, cache_heads: Mapping[str, str], key: CacheKey) -> list[CacheRun]:
    return load_head_runs(store, cache_heads.get(str(key))) if _in_window(ctx, key) else []


def _decide(ctx: DedupContext, work: _KeyWork, counts: Counter[str]) -> tuple[pa.Table, pa.Table, bytes | None]:
    table = work.table
    in_window = _in_window(ctx, work.key)
    cache = CacheView.from_runs(work.runs, ctx.hidden_owners) if in_window else CacheView.empty()
    digests = digest_array(table.column("key_digest"))
    fingerprints = table.column("fingerprint").to_numpy()
    priorities = ctx.survivor.priorities(table.column("order_key"), table.num_rows)
    decision = decide_key_group(digests, fingerprints, priorities, cache, ctx.batch_id, ctx.policy)
    _count(counts, decision, table.num_rows, in_window)
    segment = None
    if in_window and decision.emitted_mask.any():
        own_run = new_cache_run(ctx.batch_id, digests, fingerprints, decision)
        segment = copy_forward_segment(work.runs, ctx.hidden_owners, own_run)
        counts["cache_keys_written"] += len(own_run)
    return _output_rows(ctx, table, decision), _audit_rows(ctx, table, decision), segment


def _output_rows(ctx: DedupContext, table: pa.Table, decision: KeyDecision) -> pa.Table:
    """Emitted rows; the per-row Python below runs only for the rare renamed, flagged or updated ones."""
    emitted = np.flatnonzero(decision.emitted_mask)
    kept = table.take(pa.array(emitted, pa.int64()))
    actions = decision.actions[emitted]
    event_ids = kept.column("event_id")
    columns: dict[str, Any] = {"event_id": event_ids, "original_event_id": None, "duplicate_of": None,
                               "op": pa.array(["insert"] * len(emitted), pa.string()), "supersedes_batch": None}
    if (actions != Action.EMIT).any():
        ids = event_ids.to_pylist()
        fps = kept.column("fingerprint").to_pylist()
        special = [(i, Action(int(a))) for i, a in enumerate(actions) if a != Action.EMIT]
        renamed = {i: renamed_event_id(ids[i], fps[i]) for i, action in special if action is Action.RENAME}
        flagged = {i for i, action in special if action is Action.KEEP}
        updates = {i: decision.holder_batch(int(emitted[i])) for i, action in special if action is Action.UPDATE}
        columns["event_id"] = [renamed.get(i, event_id) for i, event_id in enumerate(ids)]
        columns["original_event_id"] = [ids[i] if i in renamed else None for i in range(len(ids))]
        columns["duplicate_of"] = [ids[i] if i in flagged else None for i in range(len(ids))]
        columns["op"] = ["update" if i in updates else "insert" for i in range(len(ids))]
        columns["supersedes_batch"] = [updates.get(i) for i in range(len(ids))]
    rows = len(emitted)
    for name in ("original_event_id", "duplicate_of", "supersedes_batch"):
        if columns[name] is None:
            columns[name] = pa.nulls(rows, pa.string())
    columns.update(event_time=kept.column("event_time"), batch_id=pa.array([ctx.batch_id] * rows, pa.string()),
                   raw=kept.column("raw"))
    return pa.table(columns, schema=OUTPUT_SCHEMA)


def _count(counts: Counter[str], decision: KeyDecision, rows: int, in_window: bool) -> None:
    outcomes, actions = decision.outcomes, decision.actions
    dropped = actions == Action.DROP
    for outcome in Outcome:
        if outcome is not Outcome.KEPT:
            counts[outcome.reason] += int(np.count_nonzero(outcomes == outcome))
    in_batch = (outcomes == Outcome.IN_BATCH_NATURAL) | (outcomes == Outcome.IN_BATCH_SYNTHETIC)
    cross_batch = (outcomes == Outcome.CROSS_BATCH_NATURAL) | (outcomes == Outcome.CROSS_BATCH_SYNTHETIC)
    counts["in_batch_duplicates"] += int(np.count_nonzero(in_batch & dropped))
    counts["cross_batch_duplicates"] += int(np.count_nonzero(cross_batch & dropped))
    counts["output_rows"] += int(np.count_nonzero(~dropped))
    counts["renamed"] += int(np.count_nonzero(actions == Action.RENAME))
    counts["kept_synthetic"] += int(np.count_nonzero(actions == Action.KEEP))
    counts["updates"] += int(np.count_nonzero(actions == Action.UPDATE))
    if not in_window:
        counts["older_than_window"] += rows


def _audit_rows(ctx: DedupContext, table: pa.Table, decision: KeyDecision) -> pa.Table:
    """Every duplicate found, whatever became of it: dropped ones are only ever found here."""
    duplicates = np.flatnonzero(decision.outcomes != Outcome.KEPT)
    rows = table.take(pa.array(duplicates, pa.int64()))
    input_index, line_number = split_seq(rows.column("seq").to_numpy())
    holders = np.array([*decision.owners, ctx.batch_id], dtype=object)
    return pa.table({
        "event_id": rows.column("event_id"),
        "event_time": rows.column("event_time"),
        "reason": pa.array(_REASONS[decision.outcomes[duplicates]], pa.string()),
        "action": pa.array(_ACTION_LABELS[decision.actions[duplicates]], pa.string()),
        "kept_in_batch": pa.array(holders[decision.holder[duplicates]], pa.string()),
        "batch_id": pa.array([ctx.batch_id] * len(duplicates), pa.string()),
        "source_object": pa.array(np.array(ctx.input_keys, dtype=object)[input_index], pa.string()),
        "line_number": pa.array(line_number, pa.int64()),
        "raw": rows.column("raw"),
    }, schema=AUDIT_SCHEMA)


# Labels indexed by the enums' values (0, 1, 2, ...), so an audit column is one numpy take.
_REASONS = np.array([Outcome(i).reason for i in range(len(Outcome))], dtype=object)
_ACTION_LABELS = np.array([Action(i).label for i in range(len(Action))], dtype=object)


def _stage_segment(store: S3Store, ctx: DedupContext, key: CacheKey, segment: bytes) -> StagedObject:
    info = store.put_bytes(ctx.layout.staged_cache_segment(ctx.batch_id, key), segment)
    return StagedObject("cache", info, ctx.layout.final_cache_segment(ctx.batch_id, key), 0, cache_key=str(key))


def _stage_data(store: S3Store, ctx: DedupContext, partition: int, date_hour: tuple[str, str],
                tables: list[pa.Table]) -> StagedObject | None:
    table = pa.concat_tables(tables)
    if table.num_rows == 0:
        return None
    date_text, hour_text = date_hour
    info = store.put_bytes(ctx.layout.staged_data(ctx.batch_id, date_text, hour_text, partition),
                           table_to_parquet(table))
    return StagedObject("data", info, ctx.layout.final_data(ctx.batch_id, date_text, hour_text, partition),
                        table.num_rows)


def _stage_audit(store: S3Store, ctx: DedupContext, partition: int, table: pa.Table) -> StagedObject:
    info = store.put_bytes(ctx.layout.staged_audit(ctx.batch_id, partition), table_to_parquet(table))
    return StagedObject("audit", info, ctx.layout.final_audit(ctx.batch_id, partition), table.num_rows)
