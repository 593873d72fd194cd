"""Executor side of stage 2: for each bucket of one sorted partition, load its committed cache
once (every GET in flight at once), decide the bucket (eventdedup.dedup.bucket), and stage data,
audit rows, quarantine, the bucket's new cache segments (one per hour) and its id guard.

The decision is the library's; this module is its I/O: the shuffle records it receives, the
loader that implements `BucketCache` over S3, and the files it writes, in input order.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from botocore.exceptions import ClientError

from eventdedup import native_dedup
from eventdedup.cache.epochs import BucketEpochs
from eventdedup.cache.guard import IdGuard, decode_guard, encode_guard
from eventdedup.cache.heads import load_segment_runs, missing_segment
from eventdedup.cache.local_copies import FILL_AFTER_PART_READS, LocalCopies, LocalCopySettings
from eventdedup.cache.segment import BLOCK_ENTRIES, CacheRun, decode_segment
from eventdedup.cache.segment_parts import ENTRY_BYTES, TAIL_BYTES, runs_holding
from eventdedup.column_types import DeclaredColumn
from eventdedup.commit.changes import ColumnFigures
from eventdedup.commit.job_result import StagedObject
from eventdedup.config import S3Settings
from eventdedup.counts import BatchCounts
from eventdedup.dedup.bucket import BucketRules, decide_bucket
from eventdedup.errors import CorruptStateError, EventDedupError
from eventdedup.job.read_units import LineNumbers
from eventdedup.job.records import DriverRecord, EventChunk, PartitionCounts, RangeFindings, RangeLines, ShuffleRecord
from eventdedup.keys import DIGEST_DTYPE, CacheKey, bucket_array, digest_array, guard_head_key
from eventdedup.layout import Layout
from eventdedup.naming import key_folder
from eventdedup.parse.columns_fast import columns_of_raw
from eventdedup.parse.producers import producer_values
from eventdedup.parse.quarantine_reasons import reason_class_counts
from eventdedup.s3store import S3Store, is_not_found, process_client
from eventdedup.sorting import distinct_sorted, unique_inverse
from eventdedup.tables import (
    AUDIT_SCHEMA,
    MISMATCHED,
    QUARANTINE_SCHEMA,
    SHUFFLE_SCHEMA,
    ipc_to_table,
    output_schema,
    repeated_text,
    table_to_parquet,
    value_counts,
)

IO_THREADS = 16
# Read an object whole where its probes would hit more than 1/DENSE_READ of its blocks.
DENSE_READ = 4


@dataclass(frozen=True)
class DedupContext:
    s3: S3Settings
    bucket: str
    layout: Layout
    attempt: str  # this job attempt's staging (eventdedup.layout.Layout.attempt_root)
    rules: BucketRules  # how every bucket is decided
    input_keys: tuple[str, ...]
    quarantine_key: tuple[str, ...]  # staged quarantine key per input index
    quarantine_final_key: tuple[str, ...]
    local_copies: LocalCopySettings = LocalCopySettings("", 0)  # executor-local copies of cache objects
    producer_field: str = ""  # [report] producer_field: the audit records each duplicate's value of it
    columns: tuple[DeclaredColumn, ...] = ()  # the declared columns its data files carry
    compiled_parser: bool = True  # [events] compiled_parser: the parse core reads the declared columns

    @property
    def batch_id(self) -> str:
        return self.rules.batch_id


@dataclass(frozen=True)
class _ObjectRead:
    """One cache object as far as it was read: whole (`probed` None) or for the probed keys."""

    runs: list[CacheRun]
    size: int
    probed: npt.NDArray[np.bytes_] | None

    def serves(self, digests: npt.NDArray[np.bytes_] | None) -> bool:
        """Whether it holds every entry of these keys (None: every entry)."""
        if self.probed is None:
            return True
        return digests is not None and bool(np.isin(digests, self.probed).all())


def _merged_parts(first: list[CacheRun], second: list[CacheRun]) -> list[CacheRun]:
    """Two reads in parts of one object, run by run (the same runs, in the object's order): each
    run's entries of both, once (blocks both read hold the same entries, order keys too)."""
    merged = []
    for a, b in zip(first, second, strict=True):
        entries = np.empty(len(a) + len(b), [("digest", DIGEST_DTYPE), ("fingerprint", np.uint64)])
        entries["digest"] = np.concatenate([a.digests, b.digests])
        entries["fingerprint"] = np.concatenate([a.fingerprints, b.fingerprints])
        distinct, first_of = np.unique(entries, return_index=True)  # sorted by digest, then fingerprint
        keys = (None if a.order_keys is None or b.order_keys is None
                else pa.concat_arrays([a.order_keys, b.order_keys]).take(pa.array(first_of, pa.int64())))
        merged.append(CacheRun(a.owner, distinct["digest"], distinct["fingerprint"], keys))
    return merged


class _CacheLoader:
    """The committed cache over S3 (a `BucketCache`): each object of a key's chain read once,
    whole or in parts, every read of a partition's own hours in flight at once.

    An object is read in parts where the batch probes few of its ids (the tail first: footer
    and index), whole where it probes many (or where it is small or of format 1). An executor
    that keeps local copies uses a copy S3 confirms by its ETag (a 304, no byte read): objects are
    immutable. Copies come from what it wrote itself, what it read whole, and objects it read
    in parts for a few batches, whole once then (eventdedup.cache.local_copies): so a first touch
    costs what an ephemeral executor pays, and a warm one mostly 304s."""

    def __init__(self, store: S3Store, chains: Mapping[str, tuple[str, ...]], pool: ThreadPoolExecutor,
                 copies: LocalCopies, core: ModuleType | None = None, etags: Mapping[str, str] | None = None) -> None:
        self._store, self._chains, self._pool, self._copies = store, chains, pool, copies
        self._etags = etags or {}  # the log's ETag of each chain object it records one of
        self._core = core  # guards' bits unpacked by the compiled dedup core (eventdedup.native_dedup)
        self._reads: dict[str, Future[_ObjectRead]] = {}
        self._guards: dict[str, Future[IdGuard]] = {}

    def prefetch(self, epochs: BucketEpochs, bucket: int, probed: Mapping[int, npt.NDArray[np.bytes_]],
                 guard_heads: Iterable[str]) -> None:
        """Start reading a bucket's own hours (hour -> the keys it probes there) and its guards."""
        for hour, digests in probed.items():
            for fine in epochs.fine_of(bucket, hour):
                self._chain_reads(hour, fine, digests)
        for head in guard_heads:
            self._guard(head)

    def runs_holding(self, hour: int, bucket: int, digests: npt.NDArray[np.bytes_]) -> list[CacheRun]:
        return [run for read in self._chain_reads(hour, bucket, digests) for run in read.result().runs]

    def chain_sizes(self, hour: int, bucket: int) -> list[int]:
        return [(self._reads.get(key) or self._read(key, None)).result().size for key in self._chain(hour, bucket)]

    def runs(self, hour: int, bucket: int, newest: int) -> list[CacheRun]:
        chain = self._chain(hour, bucket)
        reads = [self._read(key, None) for key in chain[len(chain) - newest:]] if newest else []
        return [run for read in reads for run in read.result().runs]

    def guard(self, head: str) -> IdGuard:
        return self._guard(head).result()

    def _chain(self, hour: int, bucket: int) -> tuple[str, ...]:
        return self._chains.get(str(CacheKey.of_hour(hour, bucket)), ())

    def _chain_reads(self, hour: int, bucket: int, digests: npt.NDArray[np.bytes_]) -> list[Future[_ObjectRead]]:
        return [self._read(key, digests) for key in self._chain(hour, bucket)]

    def _read(self, key: str, digests: npt.NDArray[np.bytes_] | None) -> Future[_ObjectRead]:
        """A read of one object serving these keys (None: whole): the earlier one if it serves
        them; else, beside an earlier read in parts, the blocks of the keys it lacks, merged in."""
        known = self._reads.get(key)
        if known is None:
            self._reads[key] = self._pool.submit(self._load, key, digests)
        else:
            earlier = known.result()
            if not earlier.serves(digests):
                assert earlier.probed is not None  # a whole read serves any keys
                missing = None if digests is None else digests[~np.isin(digests, earlier.probed)]
                self._reads[key] = self._pool.submit(self._load_more, key, earlier, missing)
        return self._reads[key]

    def _load_more(self, key: str, earlier: _ObjectRead, missing: npt.NDArray[np.bytes_] | None) -> _ObjectRead:
        more = self._load(key, missing)
        if more.probed is None or earlier.probed is None:
            return more
        return _ObjectRead(_merged_parts(earlier.runs, more.runs), more.size,
                           unique_inverse(np.concatenate([earlier.probed, more.probed]))[0])

    def _load(self, key: str, digests: npt.NDArray[np.bytes_] | None) -> _ObjectRead:
        """One object: whole where that is what is asked, where this executor holds a local copy
        S3 confirms (no byte read while unchanged), or where the probes are many for its size;
        else in parts, as an executor that starts empty reads it. A copy is filled by a whole
        read, which the parts' reads make only once enough batches probed it
        (eventdedup.cache.local_copies)."""
        etag = self._etags.get(key)
        if digests is None:
            return _ObjectRead(*load_segment_runs(self._store, key, self._copies, etag), None)
        held = self._copies.held(self._store, key, etag)
        if held is not None:
            return _ObjectRead(decode_segment(held, self._store.uri(key)), len(held), None)
        try:
            tail, size = self._store.get_tail(key, TAIL_BYTES)
        except ClientError as exc:
            if is_not_found(exc):
                raise missing_segment(self._store.uri(key)) from None
            raise
        if len(tail) >= size:  # the whole object
            return _ObjectRead(decode_segment(tail, self._store.uri(key)), size, None)
        runs: list[CacheRun] | None = None
        if (len(digests) * BLOCK_ENTRIES * ENTRY_BYTES * DENSE_READ < size
                and self._copies.count_part_read(self._store, key) <= FILL_AFTER_PART_READS):
            runs = runs_holding(tail, size, lambda start, stop: self._store.get_bytes(key, byte_range=(start, stop)),
                                self._store.uri(key), digests)
        if runs is None:  # many probes for its size, probed in parts often enough, or format 1: whole
            return _ObjectRead(*load_segment_runs(self._store, key, self._copies, etag), None)
        return _ObjectRead(runs, size, digests)

    def _guard(self, name: str) -> Future[IdGuard]:
        if name not in self._guards:
            chain = self._chains.get(name, ())
            head = chain[-1] if chain else None
            self._guards[name] = self._pool.submit(_load_guard, self._store, head, self._copies, self._core,
                                                   None if head is None else self._etags.get(head))
        return self._guards[name]


def _load_guard(store: S3Store, key: str | None, copies: LocalCopies, core: ModuleType | None = None,
                etag: str | None = None) -> IdGuard:
    if key is None:
        return IdGuard.empty()
    data = copies.get_or_none(store, key, etag)
    if data is None:
        raise CorruptStateError(f"id guard {store.uri(key)} is named by the commit log but missing; reading it as "
                                "empty would let duplicates in other hours through")
    return decode_guard(data, store.uri(key), core)


@dataclass(frozen=True)
class CommittedChains:
    """What the executors read of the committed cache (broadcast once): each key's chain, and the
    ETag the log records of each chain object it knows one of (CommittedState.object_etags)."""

    chains: Mapping[str, tuple[str, ...]]
    etags: Mapping[str, str] = field(default_factory=dict)


def dedup_partition(ctx: DedupContext, committed: CommittedChains, partition: int,
                    records: Iterable[ShuffleRecord]) -> Iterator[DriverRecord]:
    store = S3Store(process_client(ctx.s3), ctx.bucket)
    received = _Received.collect(records)
    numbers = received.line_numbers()
    counts = BatchCounts()
    staged: list[StagedObject | None] = []
    with ThreadPoolExecutor(IO_THREADS) as pool:
        writes: list[Future[StagedObject | None]] = [
            pool.submit(_stage_quarantine, store, ctx, index, findings, numbers)
            for index, findings in sorted(received.findings.items())]
        findings = [part for parts in received.findings.values() for part in parts]
        counts += BatchCounts(input_lines=sum(part.lines for part in findings),
                              malformed=sum(len(part.raw) for part in findings))
        reasons = reason_class_counts(pa.array([error for part in findings for error in part.errors], pa.string()))
        table = received.events()
        holders: Counter[str] = Counter()
        found = DuplicatesFound()
        if table.num_rows:
            decided, holders, found, bucket_writes = _dedup_rows(ctx, store, committed, partition, table, numbers,
                                                                 pool)
            counts += decided
            writes.extend(bucket_writes)
        staged = [write.result() for write in writes]
    yield from (record for record in staged if record is not None)
    yield PartitionCounts(counts, dict(sorted(holders.items())), dict(found.folders), dict(found.producers),
                          dict(sorted(found.holders.items())), dict(reasons), found.columns)


@dataclass
class DuplicatesFound:
    """A partition's audit rows by input folder, by producer ("": none) and by the earlier batch
    holding their kept copy."""

    folders: Counter[str] = field(default_factory=Counter)
    producers: Counter[str] = field(default_factory=Counter)
    holders: Counter[str] = field(default_factory=Counter)
    columns: dict[str, ColumnFigures] = field(default_factory=dict)  # the output's declared columns

    @classmethod
    def of(cls, audited: pa.Table | None, holders: Counter[str]) -> DuplicatesFound:
        found = cls(holders=holders)
        if audited is not None:
            for key, n in value_counts(audited.column("source_object")):
                found.folders[key_folder(key or "")] += n
            for producer, n in value_counts(audited.column("producer")):
                found.producers[producer or ""] += n
        return found


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


def _dedup_rows(ctx: DedupContext, store: S3Store, committed: CommittedChains, partition: int,
                table: pa.Table, numbers: LineNumbers,
                pool: ThreadPoolExecutor) -> tuple[BatchCounts, Counter[str], DuplicatesFound,
                                                   list[Future[StagedObject | None]]]:
    """Decide the partition's events bucket by bucket on their narrow columns; the raw lines are
    copied once, into the output and audit files (in input order) at the end."""
    rules = ctx.rules
    narrow = table.drop_columns(["raw"]).combine_chunks()
    buckets = bucket_array(digest_array(narrow.column("key_digest")), rules.epochs.coarse)
    order = np.argsort(buckets, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(buckets[order]) != 0])
    groups = {int(buckets[order[start]]): order[start:stop]
              for start, stop in zip(starts, np.r_[starts[1:], len(order)], strict=True)}
    hours = narrow.column("cache_hour").to_numpy()
    writes: list[Future[StagedObject | None]] = []
    counts = BatchCounts()
    holders: Counter[str] = Counter()  # earlier batches holding kept copies -> rows decided against them
    copy_holders: Counter[str] = Counter()  # the same, less the batches updates supersede
    # Every bucket's own hours and guards are in flight at once; each bucket is decided as soon
    # as its loads land, and its segments are written while the next is decided.
    local = LocalCopies.of_process(ctx.local_copies)
    core = native_dedup.in_use(rules.compiled)
    loader = _CacheLoader(store, committed.chains, pool, local, core, committed.etags)
    digests = digest_array(narrow.column("key_digest"))
    for bucket, rows in groups.items():
        loader.prefetch(rules.epochs, bucket, _keys_by_hour(hours[rows], digests[rows]), rules.guard_heads(bucket))
    outputs: list[tuple[npt.NDArray[np.intp], pa.Table]] = []
    audits: list[tuple[npt.NDArray[np.intp], pa.Table]] = []
    for bucket, rows in groups.items():
        result = decide_bucket(rules, bucket, narrow.take(pa.array(rows)), loader)
        counts += result.counts
        copies = [holder for holder in result.audit.column("kept_in_batch").to_pylist()
                  if holder is not None and holder != ctx.batch_id]
        holders.update(copies)
        copy_holders.update(copies)
        holders.update(_superseded_holders(result.output, ctx.batch_id))
        outputs.append((rows[result.emitted], result.output))
        audits.append((rows[result.duplicates], result.audit))
        for (hour, fine), segment in result.segments.items():
            key = CacheKey.of_hour(hour, fine)
            builds_on = committed.chains.get(str(key), ())[:segment.builds_on]
            writes.append(pool.submit(_stage_segment, store, ctx, key, segment.data, builds_on, local))
        if result.guard is not None:
            writes.append(pool.submit(_stage_guard, store, ctx, bucket, encode_guard(result.guard, core), local))
    output_rows, output = _in_input_order(outputs)
    output_hours = hours[output_rows]
    figures = {column.name: ColumnFigures() for column in ctx.columns}
    for hour in [] if rules.populate else distinct_sorted(output_hours).tolist():
        in_hour = output_hours == hour
        rows_of_hour = output_rows[in_hour]
        data, counted = with_declared_columns(_with_raw(output.filter(pa.array(in_hour)), table, rows_of_hour),
                                              ctx.columns, ctx.compiled_parser)
        for name, found_in_hour in counted.items():
            figures[name] += found_in_hour
        writes.append(pool.submit(_stage_data, store, ctx, partition, int(hour), data))
    audit_rows, audit = _in_input_order(audits)
    audited = None
    if len(audit_rows):
        located = _with_location(ctx, audit, narrow.column("seq").to_numpy()[audit_rows], numbers)
        audited = _with_raw(located, table, audit_rows)
        audited = audited.append_column("producer", producer_values(audited.column("raw"), ctx.producer_field))
        writes.append(pool.submit(_stage_audit, store, ctx, partition, audited))
    found = DuplicatesFound.of(audited, copy_holders)
    found.columns = figures
    return counts, holders, found, writes


def _superseded_holders(output: pa.Table, batch_id: str) -> Counter[str]:
    """Earlier batches whose rows the output's updates supersede, and how many each (a filter and
    a count over the columns: the output holds every emitted row, the updates are few)."""
    holder = output.column("supersedes_batch")
    updates = pc.and_(pc.equal(output.column("op"), "update"), pc.not_equal(holder, batch_id))
    return Counter({name: n for name, n in value_counts(holder.filter(pc.fill_null(updates, False)))
                    if name is not None})


def _with_location(ctx: DedupContext, audit: pa.Table, seqs: npt.NDArray[np.int64], numbers: LineNumbers) -> pa.Table:
    """Audit rows with where each came from: its input object and line number."""
    input_index, line_number = numbers.of_seqs(seqs)
    return (audit.append_column("source_object", pa.array(np.array(ctx.input_keys, dtype=object)[input_index],
                                                          pa.string()))
            .append_column("line_number", pa.array(line_number, pa.int64())))


def _in_input_order(parts: list[tuple[npt.NDArray[np.intp], pa.Table]]) -> tuple[npt.NDArray[np.intp], pa.Table]:
    """Per-bucket rows (partition row indices and their narrow table) merged into input order."""
    rows = np.concatenate([part_rows for part_rows, _ in parts])
    table = pa.concat_tables([part for _, part in parts])
    order = np.argsort(rows, kind="stable")
    return rows[order], table.take(pa.array(order))


def _with_raw(narrow: pa.Table, table: pa.Table, rows: npt.NDArray[np.intp]) -> pa.Table:
    """The narrow rows with their raw lines: a filter of the partition's (a sequential copy, in input
    order: `rows` ascending)."""
    selected = np.zeros(table.num_rows, bool)
    selected[rows] = True
    return narrow.append_column("raw", table.column("raw").filter(pa.array(selected)))


def with_declared_columns(table: pa.Table, columns: tuple[DeclaredColumn, ...],
                          compiled: bool = True) -> tuple[pa.Table, dict[str, ColumnFigures]]:
    """Output rows (the output's own columns, `raw` among them) with their declared columns read
    from their raw lines (eventdedup.parse.columns_fast.columns_of_raw), appended under their own
    names in declared order; and per column the rows whose value did not fit (null there) and those
    null. A batch reads them for the rows it outputs only, a column backfill for the rows it copies."""
    if not columns:
        return table, {}
    arrays = columns_of_raw(table.column("raw"), columns, compiled)
    positions = pc.list_flatten(arrays[MISMATCHED.name]).to_numpy(zero_copy_only=False)
    mismatched = np.bincount(positions.astype(np.int64), minlength=len(columns)).tolist()
    for column in columns:
        table = table.append_column(column.name, arrays[column.name])
    return table, {column.name: ColumnFigures(mismatched[position], arrays[column.name].null_count)
                   for position, column in enumerate(columns)}


def _stage_segment(store: S3Store, ctx: DedupContext, key: CacheKey, segment: bytes,
                   builds_on: tuple[str, ...], copies: LocalCopies) -> StagedObject:
    """A new head of a cache key; this executor keeps a copy under the name the promotion gives it
    (a copy keeps its source's ETag), so the next batch that reads it here reads no byte of it."""
    info = store.put_bytes(ctx.layout.staged_cache_segment(ctx.batch_id, ctx.attempt, key), segment)
    final = ctx.layout.final_cache_segment(ctx.batch_id, key)
    copies.keep(store, final, info.etag, segment)
    return StagedObject("cache", info, final, 0, cache_key=str(key), builds_on=builds_on)


def _keys_by_hour(hours: npt.NDArray[np.int64], digests: npt.NDArray[np.bytes_]) -> dict[int, npt.NDArray[np.bytes_]]:
    """Per hour of a bucket's rows, the distinct keys (sorted) of its rows in that hour: what the
    bucket's decision probes there (eventdedup.dedup.bucket)."""
    return {int(hour): unique_inverse(digests[hours == hour])[0] for hour in distinct_sorted(hours).tolist()}


def _stage_guard(store: S3Store, ctx: DedupContext, bucket: int, guard: bytes, copies: LocalCopies) -> StagedObject:
    """A bucket's new id guard, with a local copy under its final name (as a segment's)."""
    hour = ctx.rules.arrival_hour
    info = store.put_bytes(ctx.layout.staged_guard(ctx.batch_id, ctx.attempt, hour, bucket), guard)
    final = ctx.layout.final_guard(ctx.batch_id, hour, bucket)
    copies.keep(store, final, info.etag, guard)
    return StagedObject("cache", info, final, 0, cache_key=guard_head_key(hour, bucket))


def _stage_data(store: S3Store, ctx: DedupContext, partition: int, hour: int, table: pa.Table) -> StagedObject:
    key = CacheKey.of_hour(hour, 0)
    date_text, hour_text = key.date_text, key.hour_text
    info = store.put_bytes(ctx.layout.staged_data(ctx.batch_id, ctx.attempt, date_text, hour_text, partition),
                           table_to_parquet(table.select(output_schema(ctx.columns).names)))
    return StagedObject("data", info, ctx.layout.final_data(ctx.batch_id, date_text, hour_text, partition),
                        table.num_rows)


def _stage_audit(store: S3Store, ctx: DedupContext, partition: int, table: pa.Table) -> StagedObject:
    info = store.put_bytes(ctx.layout.staged_audit(ctx.batch_id, ctx.attempt, partition),
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
