"""Executor side of stage 2: for each bucket of one sorted partition, load its committed cache
once, decide every event of the bucket whatever its hour, and stage data, audit rows, the
bucket's new cache segments (one per hour) and its id guard.

A bucket's events of every hour are decided together, so copies of one id in different hours of
the batch meet; its hour segments and the id guards of the window are loaded once, and the
hours the guards name for the bucket's ids are loaded too, so copies committed in other hours
are found exactly (eventdedup.cache.guard).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from eventdedup.cache.epochs import BucketEpochs
from eventdedup.cache.guard import GuardProbe, IdGuard, decode_guard, encode_guard
from eventdedup.cache.heads import copy_forward_segment, load_head_runs
from eventdedup.cache.segment import CacheRun
from eventdedup.cache.view import CacheView
from eventdedup.commit.job_result import StagedObject
from eventdedup.config import S3Settings
from eventdedup.dedup.decide import (
    Action,
    DuplicatePolicy,
    KeyDecision,
    KeyHours,
    Outcome,
    decide_key_group,
    new_cache_run,
    renamed_event_id,
)
from eventdedup.dedup.survivor import SurvivorPolicy
from eventdedup.errors import CorruptStateError, EventDedupError
from eventdedup.job.read_units import LineNumbers
from eventdedup.job.records import DriverRecord, EventChunk, PartitionCounts, RangeFindings, RangeLines, ShuffleRecord
from eventdedup.keys import CacheKey, bucket_array, digest_array, guard_head_key
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store, process_client
from eventdedup.sorting import distinct_sorted, unique_inverse
from eventdedup.tables import (
    AUDIT_SCHEMA,
    OUTPUT_SCHEMA,
    QUARANTINE_SCHEMA,
    SHUFFLE_SCHEMA,
    ipc_to_table,
    repeated_text,
    table_to_parquet,
)

IO_THREADS = 16


@dataclass(frozen=True)
class DedupContext:
    batch_id: str
    s3: S3Settings
    bucket: str
    layout: Layout
    # eventdedup.cache.history.BatchHistory: whose runs the batch sees (owner -> commit version)
    # and whose runs its new heads carry forward.
    visible_owners: Mapping[str, int]
    kept_owners: frozenset[str]
    arrival_day: int  # the day of the guard the batch adds its ids to
    guard_days: tuple[int, ...]  # arrival days of the window: the guards every bucket probes
    input_keys: tuple[str, ...]
    epochs: BucketEpochs  # bucket counts by hour; the job groups by the coarse count
    quarantine_key: tuple[str, ...]  # staged quarantine key per input index
    quarantine_final_key: tuple[str, ...]
    survivor: SurvivorPolicy = SurvivorPolicy("first")
    policy: DuplicatePolicy = DuplicatePolicy()
    # A populate batch (eventdedup.ops.populate): what it would emit goes to the cache only,
    # counted as `populated`; no data file is written.
    populate: bool = False


@dataclass
class _BucketResult:
    emitted: npt.NDArray[np.bool_]  # per row of the bucket
    output: pa.Table  # the emitted rows, OUTPUT_SCHEMA without raw
    duplicates: npt.NDArray[np.intp]  # rows of the bucket the audit holds
    audit: pa.Table  # AUDIT_SCHEMA without raw
    segments: dict[tuple[int, int], bytes] = field(default_factory=dict)  # (hour, fine bucket) -> segment
    guard: bytes | None = None


class _CacheLoader:
    """Every cache object a partition reads, each loaded once, all in flight at once."""

    def __init__(self, store: S3Store, heads: Mapping[str, str], pool: ThreadPoolExecutor) -> None:
        self._store, self._heads, self._pool = store, heads, pool
        self._loads: dict[str, Future[Any]] = {}

    def prefetch(self, epochs: BucketEpochs, bucket: int, hours: Iterable[int], guard_days: Iterable[int]) -> None:
        for hour in hours:
            for fine in epochs.fine_of(bucket, hour):
                self._segment(hour, fine)
        for day in guard_days:
            self._guard(day, bucket)

    def runs(self, hour: int, bucket: int) -> list[CacheRun]:
        """The runs of one (hour, fine bucket) segment."""
        result: list[CacheRun] = self._segment(hour, bucket).result()
        return result

    def guard(self, day: int, bucket: int) -> IdGuard:
        result: IdGuard = self._guard(day, bucket).result()
        return result

    def _segment(self, hour: int, bucket: int) -> Future[Any]:
        name = str(CacheKey.of_hour(hour, bucket))
        if name not in self._loads:
            self._loads[name] = self._pool.submit(load_head_runs, self._store, self._heads.get(name))
        return self._loads[name]

    def _guard(self, day: int, bucket: int) -> Future[Any]:
        name = guard_head_key(day, bucket)
        if name not in self._loads:
            self._loads[name] = self._pool.submit(_load_guard, self._store, self._heads.get(name))
        return self._loads[name]


def _load_guard(store: S3Store, key: str | None) -> IdGuard:
    if key is None:
        return IdGuard.empty()
    data = store.get_bytes_or_none(key)
    if data is None:
        raise CorruptStateError(f"id guard {store.uri(key)} is named by the commit log but missing; reading it as "
                                "empty would let duplicates in other hours through")
    return decode_guard(data, store.uri(key))


def dedup_partition(ctx: DedupContext, cache_heads: Mapping[str, str], partition: int,
                    records: Iterable[ShuffleRecord]) -> Iterator[DriverRecord]:
    store = S3Store(process_client(ctx.s3), ctx.bucket)
    received = _Received.collect(records)
    numbers = received.line_numbers()
    counts: Counter[str] = Counter()
    staged: list[StagedObject | None] = []
    with ThreadPoolExecutor(IO_THREADS) as pool:
        writes: list[Future[StagedObject | None]] = [
            pool.submit(_stage_quarantine, store, ctx, index, findings, numbers)
            for index, findings in sorted(received.findings.items())]
        for findings in received.findings.values():
            counts["input_lines"] += sum(part.lines for part in findings)
            counts["malformed"] += sum(len(part.raw) for part in findings)
        table = received.events()
        if table.num_rows:
            writes.extend(_dedup_rows(ctx, store, cache_heads, partition, table, numbers, pool, counts))
        staged = [write.result() for write in writes]
    yield from (record for record in staged if record is not None)
    yield PartitionCounts(dict(counts))


@dataclass
class _Received:
    """What the read tasks sent this partition."""

    lines: dict[int, dict[int, int]] = field(default_factory=lambda: defaultdict(dict))  # input -> range -> lines
    findings: dict[int, list[RangeFindings]] = field(default_factory=lambda: defaultdict(list))
    chunks: list[EventChunk] = field(default_factory=list)

    @classmethod
    def collect(cls, records: Iterable[ShuffleRecord]) -> _Received:
        received = cls()
        for _, record in records:
            if isinstance(record, RangeLines):
                received.lines[record.input_index][record.unit] = record.lines
            elif isinstance(record, RangeFindings):
                received.findings[record.input_index].append(record)
            else:
                received.chunks.append(record)
        return received

    def line_numbers(self) -> LineNumbers:
        per_object: dict[int, list[int]] = {}
        for index, by_unit in self.lines.items():
            if sorted(by_unit) != list(range(len(by_unit))):
                raise EventDedupError(f"input {index}: line counts arrived for ranges {sorted(by_unit)}, not for "
                                      "every range in order; cannot number its lines")
            per_object[index] = [by_unit[unit] for unit in range(len(by_unit))]
        return LineNumbers(per_object)

    def events(self) -> pa.Table:
        """Every event of the partition in input order: each chunk is in input order, and the
        ranges chunks come from never interleave."""
        self.chunks.sort(key=lambda chunk: chunk.first_seq)
        tables = [ipc_to_table(chunk.ipc) for chunk in self.chunks]
        self.chunks = []
        return pa.concat_tables(tables) if tables else SHUFFLE_SCHEMA.empty_table()


def _dedup_rows(ctx: DedupContext, store: S3Store, cache_heads: Mapping[str, str], partition: int,
                table: pa.Table, numbers: LineNumbers, pool: ThreadPoolExecutor,
                counts: Counter[str]) -> list[Future[StagedObject | None]]:
    """Decide the partition's events bucket by bucket on their narrow columns; the raw lines are
    copied once, into the output and audit files (in input order) at the end."""
    narrow = table.drop_columns(["raw"]).combine_chunks()
    buckets = bucket_array(digest_array(narrow.column("key_digest")), ctx.epochs.coarse)
    order = np.argsort(buckets, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(buckets[order]) != 0])
    groups = {int(buckets[order[start]]): order[start:stop]
              for start, stop in zip(starts, np.r_[starts[1:], len(order)], strict=True)}
    hours = narrow.column("cache_hour").to_numpy()
    writes: list[Future[StagedObject | None]] = []
    # Every bucket's own hours and guards are in flight at once; each bucket is decided as soon
    # as its loads land, and its segments are written while the next is decided.
    loader = _CacheLoader(store, cache_heads, pool)
    for bucket, rows in groups.items():
        loader.prefetch(ctx.epochs, bucket, distinct_sorted(hours[rows]).tolist(), ctx.guard_days)
    outputs: list[tuple[npt.NDArray[np.intp], pa.Table]] = []
    audits: list[tuple[npt.NDArray[np.intp], pa.Table]] = []
    for bucket, rows in groups.items():
        result = _decide_bucket(ctx, bucket, narrow.take(pa.array(rows)), loader, numbers, counts)
        outputs.append((rows[result.emitted], result.output))
        audits.append((rows[result.duplicates], result.audit))
        for (hour, fine), segment in result.segments.items():
            writes.append(pool.submit(_stage_segment, store, ctx, CacheKey.of_hour(hour, fine), segment))
        if result.guard is not None:
            writes.append(pool.submit(_stage_guard, store, ctx, bucket, result.guard))
    output_rows, output = _in_input_order(outputs)
    output_hours = hours[output_rows]
    for hour in [] if ctx.populate else distinct_sorted(output_hours).tolist():
        in_hour = output_hours == hour
        rows_of_hour = output_rows[in_hour]
        data = _with_raw(output.filter(pa.array(in_hour)), table, rows_of_hour)
        writes.append(pool.submit(_stage_data, store, ctx, partition, int(hour), data))
    audit_rows, audit = _in_input_order(audits)
    if len(audit_rows):
        writes.append(pool.submit(_stage_audit, store, ctx, partition, _with_raw(audit, table, audit_rows)))
    return writes


def _in_input_order(parts: list[tuple[npt.NDArray[np.intp], pa.Table]]) -> tuple[npt.NDArray[np.intp], pa.Table]:
    """Per-bucket rows (partition row indices and their narrow table) merged into input order."""
    rows = np.concatenate([part_rows for part_rows, _ in parts])
    table = pa.concat_tables([part for _, part in parts])
    order = np.argsort(rows, kind="stable")
    return rows[order], table.take(pa.array(order))


def _with_raw(narrow: pa.Table, table: pa.Table, rows: npt.NDArray[np.intp]) -> pa.Table:
    """The narrow rows with their raw lines: a filter of the partition's raw column (a sequential
    copy, in input order: `rows` ascending)."""
    mask = np.zeros(table.num_rows, bool)
    mask[rows] = True
    return narrow.append_column("raw", table.column("raw").filter(pa.array(mask)))


def _decide_bucket(ctx: DedupContext, bucket: int, table: pa.Table, loader: _CacheLoader, numbers: LineNumbers,
                   counts: Counter[str]) -> _BucketResult:
    """Decide one bucket's rows (narrow: no raw lines) of every hour against its cache."""
    hours = table.column("cache_hour").to_numpy()
    digests = digest_array(table.column("key_digest"))
    fingerprints = table.column("fingerprint").to_numpy()
    own_hours = [int(hour) for hour in distinct_sorted(hours)]
    segments = {(hour, fine): loader.runs(hour, fine) for hour in own_hours
                for fine in ctx.epochs.fine_of(bucket, hour)}
    keys, key_of_row = unique_inverse(digests)
    key_hours = _key_hours(ctx, bucket, keys, key_of_row, hours, loader)
    other_hours = set(key_hours.hours) - set(own_hours)
    for hour in sorted(other_hours):
        segments.update({(hour, fine): loader.runs(hour, fine) for fine in ctx.epochs.fine_of(bucket, hour)})
    counts["guard_hours_loaded"] += len(other_hours)
    loaded: dict[int, list[CacheRun]] = defaultdict(list)  # an hour's runs: of every fine segment the bucket holds
    for (hour, _), runs in sorted(segments.items()):
        loaded[hour].extend(runs)
    cache = CacheView.from_hours(loaded, ctx.visible_owners)
    priorities = ctx.survivor.priorities(table.column("order_key"), table.num_rows)
    decision = decide_key_group(digests, fingerprints, priorities, cache, ctx.batch_id, ctx.policy, key_hours)
    _count(counts, decision, "populated" if ctx.populate else "output_rows")
    counts["cross_hour_duplicates"] += int(np.count_nonzero(_cross_hour(decision, cache, key_of_row, hours)))
    emitted = decision.emitted_mask
    duplicates = np.flatnonzero(decision.outcomes != Outcome.KEPT)
    result = _BucketResult(emitted, _output_rows(ctx, table, decision), duplicates,
                           _audit_rows(ctx, table, decision, duplicates, numbers))
    fine_buckets = ctx.epochs.fine_buckets(digests, hours)
    new_hours, new_fines = distinct_pairs(hours[emitted], fine_buckets[emitted])
    for hour, fine in zip(new_hours.tolist(), new_fines.tolist(), strict=True):
        within = (hours == hour) & (fine_buckets == fine)
        own_run = new_cache_run(ctx.batch_id, digests, fingerprints, decision, within=within)
        result.segments[(hour, fine)] = copy_forward_segment(segments[(hour, fine)], ctx.kept_owners, own_run)
        counts["cache_keys_written"] += len(own_run)
    if emitted.any():
        guard = loader.guard(ctx.arrival_day, bucket).with_ids(digests[emitted], hours[emitted])
        result.guard = encode_guard(guard)
    return result


def _key_hours(ctx: DedupContext, bucket: int, keys: npt.NDArray[np.bytes_], key_of_row: npt.NDArray[np.intp],
               hours: npt.NDArray[np.int64], loader: _CacheLoader) -> KeyHours:
    """Which hours may hold each of the bucket's keys (sorted, distinct; `key_of_row` maps each
    row to its key): the hours its copies in the batch fall in, and every hour some guard of the
    window names for it."""
    key_parts, hour_parts = [key_of_row], [hours]
    probe = GuardProbe.of(keys)
    for day in ctx.guard_days:
        query, named = loader.guard(day, bucket).candidate_hours(probe)
        key_parts.append(query)
        hour_parts.append(named)
    distinct_hours, distinct_keys = distinct_pairs(np.concatenate(hour_parts), np.concatenate(key_parts))
    starts = np.flatnonzero(np.r_[True, np.diff(distinct_hours) != 0])  # sorted by hour: one run each
    by_hour: dict[int, npt.NDArray[np.bool_]] = {}
    for start, stop in zip(starts.tolist(), [*starts[1:].tolist(), len(distinct_hours)], strict=True):
        mask = np.zeros(len(keys), bool)
        mask[distinct_keys[start:stop]] = True
        by_hour[int(distinct_hours[start])] = mask
    return KeyHours(keys, key_of_row, by_hour)


def distinct_pairs(major: npt.NDArray[np.integer[Any]],
                   minor: npt.NDArray[np.integer[Any]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The distinct (major, minor) pairs, sorted by major then minor. Packed into one int64 each
    where their ranges allow (always, for hours, buckets and row indices): numpy's row-wise
    unique (axis=0) sorts a structured view, several times slower than sorting integers."""
    first: npt.NDArray[np.int64] = np.asarray(major, np.int64)
    second: npt.NDArray[np.int64] = np.asarray(minor, np.int64)
    if len(first) == 0:
        return first, second
    major_low, minor_low = int(first.min()), int(second.min())
    major_span, minor_span = int(first.max()) - major_low + 1, int(second.max()) - minor_low + 1
    if major_span * minor_span >= 1 << 62:
        rows = np.unique(np.stack([first, second], axis=1), axis=0)
        return rows[:, 0], rows[:, 1]
    packed = distinct_sorted((first - major_low) * minor_span + (second - minor_low))
    return packed // minor_span + major_low, packed % minor_span + minor_low


def _cross_hour(decision: KeyDecision, cache: CacheView, key_of_row: npt.NDArray[np.intp],
                hours: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Duplicates whose kept copy lies in another hour: what a cache keyed by hour alone misses."""
    outcomes = decision.outcomes
    cross_batch = (outcomes == Outcome.CROSS_BATCH_NATURAL) | (outcomes == Outcome.CROSS_BATCH_SYNTHETIC)
    run_hours = np.array([*cache.hours, -1], np.int64)
    holder = np.where(cross_batch, decision.holder, len(cache.hours))
    found: npt.NDArray[np.bool_] = cross_batch & (run_hours[holder] != hours)
    in_batch = (outcomes == Outcome.IN_BATCH_NATURAL) | (outcomes == Outcome.IN_BATCH_SYNTHETIC)
    if in_batch.any():
        survivor_hour = np.full(key_of_row.max() + 1, -1, np.int64)
        survivors = outcomes == Outcome.KEPT
        survivor_hour[key_of_row[survivors]] = hours[survivors]
        found |= in_batch & (survivor_hour[key_of_row] >= 0) & (survivor_hour[key_of_row] != hours)
    return found


def _output_rows(ctx: DedupContext, table: pa.Table, decision: KeyDecision) -> pa.Table:
    """Emitted rows without their raw lines. Columns are built natively; per-row Python runs only
    for the rare renamed and updated rows (their new id, their superseded batch)."""
    emitted = np.flatnonzero(decision.emitted_mask)
    kept = table.take(pa.array(emitted, pa.int64()))
    actions = decision.actions[emitted]
    rows = len(emitted)
    event_ids = kept.column("event_id").combine_chunks()
    no_text = pa.nulls(rows, pa.string())
    columns: dict[str, Any] = {"event_id": event_ids, "original_event_id": no_text, "duplicate_of": no_text,
                               "op": repeated_text("insert", rows), "supersedes_batch": no_text}
    renamed = actions == Action.RENAME
    if renamed.any():
        at = np.flatnonzero(renamed)
        originals = event_ids.take(pa.array(at, pa.int64())).to_pylist()
        fingerprints = kept.column("fingerprint").take(pa.array(at, pa.int64())).to_pylist()
        new_ids = [renamed_event_id(key, fingerprint) for key, fingerprint in zip(originals, fingerprints, strict=True)]
        mask = pa.array(renamed)
        columns["event_id"] = pc.replace_with_mask(event_ids, mask, pa.array(new_ids, pa.string()))
        columns["original_event_id"] = pc.if_else(mask, event_ids, no_text)
    flagged = actions == Action.KEEP
    if flagged.any():
        columns["duplicate_of"] = pc.if_else(pa.array(flagged), event_ids, no_text)
    updated = actions == Action.UPDATE
    if updated.any():
        superseded = [decision.holder_batch(row) for row in emitted[updated].tolist()]
        mask = pa.array(updated)
        columns["op"] = pc.if_else(mask, pa.scalar("update"), pa.scalar("insert"))
        columns["supersedes_batch"] = pc.replace_with_mask(no_text, mask, pa.array(superseded, pa.string()))
    columns.update(event_time=kept.column("event_time"), batch_id=repeated_text(ctx.batch_id, rows))
    return pa.table(columns, schema=_NARROW_OUTPUT)


def _count(counts: Counter[str], decision: KeyDecision, emitted_as: str) -> None:
    outcomes, actions = decision.outcomes, decision.actions
    dropped = actions == Action.DROP
    for outcome in Outcome:
        if outcome is not Outcome.KEPT:
            counts[outcome.reason] += int(np.count_nonzero(outcomes == outcome))
    in_batch = (outcomes == Outcome.IN_BATCH_NATURAL) | (outcomes == Outcome.IN_BATCH_SYNTHETIC)
    cross_batch = (outcomes == Outcome.CROSS_BATCH_NATURAL) | (outcomes == Outcome.CROSS_BATCH_SYNTHETIC)
    counts["in_batch_duplicates"] += int(np.count_nonzero(in_batch & dropped))
    counts["cross_batch_duplicates"] += int(np.count_nonzero(cross_batch & dropped))
    counts[emitted_as] += int(np.count_nonzero(~dropped))
    counts["renamed"] += int(np.count_nonzero(actions == Action.RENAME))
    counts["kept_synthetic"] += int(np.count_nonzero(actions == Action.KEEP))
    counts["updates"] += int(np.count_nonzero(actions == Action.UPDATE))


def _audit_rows(ctx: DedupContext, table: pa.Table, decision: KeyDecision, duplicates: npt.NDArray[np.intp],
                numbers: LineNumbers) -> pa.Table:
    """Every duplicate found, whatever became of it (dropped ones are only ever found here),
    without its raw line."""
    rows = table.take(pa.array(duplicates, pa.int64()))
    input_index, line_number = numbers.of_seqs(rows.column("seq").to_numpy())
    holders = np.array([*decision.owners, ctx.batch_id], dtype=object)
    return pa.table({
        "event_id": rows.column("event_id"),
        "event_time": rows.column("event_time"),
        "reason": pa.array(_REASONS[decision.outcomes[duplicates]], pa.string()),
        "action": pa.array(_ACTION_LABELS[decision.actions[duplicates]], pa.string()),
        "kept_in_batch": pa.array(holders[decision.holder[duplicates]], pa.string()),
        "batch_id": repeated_text(ctx.batch_id, len(duplicates)),
        "source_object": pa.array(np.array(ctx.input_keys, dtype=object)[input_index], pa.string()),
        "line_number": pa.array(line_number, pa.int64()),
    }, schema=_NARROW_AUDIT)


# Labels indexed by the enums' values (0, 1, 2, ...), so an audit column is one numpy take.
_REASONS = np.array([Outcome(i).reason for i in range(len(Outcome))], dtype=object)
_ACTION_LABELS = np.array([Action(i).label for i in range(len(Action))], dtype=object)
# Output and audit rows are decided without their raw lines, which join them once, at the end.
_NARROW_OUTPUT = OUTPUT_SCHEMA.remove(OUTPUT_SCHEMA.get_field_index("raw"))
_NARROW_AUDIT = AUDIT_SCHEMA.remove(AUDIT_SCHEMA.get_field_index("raw"))


def _stage_segment(store: S3Store, ctx: DedupContext, key: CacheKey, segment: bytes) -> StagedObject:
    info = store.put_bytes(ctx.layout.staged_cache_segment(ctx.batch_id, key), segment)
    return StagedObject("cache", info, ctx.layout.final_cache_segment(ctx.batch_id, key), 0, cache_key=str(key))


def _stage_guard(store: S3Store, ctx: DedupContext, bucket: int, guard: bytes) -> StagedObject:
    info = store.put_bytes(ctx.layout.staged_guard(ctx.batch_id, ctx.arrival_day, bucket), guard)
    return StagedObject("cache", info, ctx.layout.final_guard(ctx.batch_id, ctx.arrival_day, bucket), 0,
                        cache_key=guard_head_key(ctx.arrival_day, bucket))


def _stage_data(store: S3Store, ctx: DedupContext, partition: int, hour: int, table: pa.Table) -> StagedObject:
    key = CacheKey.of_hour(hour, 0)
    date_text, hour_text = key.date_text, key.hour_text
    info = store.put_bytes(ctx.layout.staged_data(ctx.batch_id, date_text, hour_text, partition),
                           table_to_parquet(table.select(OUTPUT_SCHEMA.names)))
    return StagedObject("data", info, ctx.layout.final_data(ctx.batch_id, date_text, hour_text, partition),
                        table.num_rows)


def _stage_audit(store: S3Store, ctx: DedupContext, partition: int, table: pa.Table) -> StagedObject:
    info = store.put_bytes(ctx.layout.staged_audit(ctx.batch_id, partition),
                           table_to_parquet(table.select(AUDIT_SCHEMA.names)))
    return StagedObject("audit", info, ctx.layout.final_audit(ctx.batch_id, partition), table.num_rows)


def _stage_quarantine(store: S3Store, ctx: DedupContext, input_index: int, findings: list[RangeFindings],
                      numbers: LineNumbers) -> StagedObject | None:
    """One input object's quarantined lines, from every range it was read in, by line number."""
    raw = [line for part in findings for line in part.raw]
    if not raw:
        return None
    errors = [error for part in findings for error in part.errors]
    local = np.array([number for part in findings for number in part.local_lines], np.int64)
    lines = numbers.of(input_index, local)
    order = np.argsort(lines, kind="stable")
    source = ctx.input_keys[input_index]
    table = pa.table({
        "raw": [raw[i] for i in order.tolist()], "error": [errors[i] for i in order.tolist()],
        "source_object": repeated_text(source, len(raw)), "line_number": lines[order],
        "batch_id": repeated_text(ctx.batch_id, len(raw)),
    }, schema=QUARANTINE_SCHEMA)
    info = store.put_bytes(ctx.quarantine_key[input_index], table_to_parquet(table))
    return StagedObject("quarantine", info, ctx.quarantine_final_key[input_index], len(raw))
