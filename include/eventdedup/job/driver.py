"""The driver side of the dedup Spark job: from a staged batch to a job result in staging.

    inputs --plan_read_tasks--> byte ranges --read_task--> (shuffle code, EventChunk | RangeLines | RangeFindings)
           --repartitionAndSortWithinPartitions(partitioner on the code)-->
           --dedup_partition--> staged data, audit, quarantine, cache segments

Only small records (StagedObject, PartitionCounts) ever reach the driver.
"""
from __future__ import annotations

import itertools
import logging
import re
from collections import Counter
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING

from eventdedup import errors
from eventdedup.cache.heads import ChainPolicy
from eventdedup.cache.history import BatchHistory, history_for_batch
from eventdedup.cache.identity import CacheIdentity, check_cache_identity
from eventdedup.cache.local_copies import LocalCopySettings
from eventdedup.column_types import DeclaredColumn
from eventdedup.commit.changes import BatchChange, ColumnFigures
from eventdedup.commit.gate import refuse_if_promotion_unfinished, refuse_if_retracted, refuse_incompatible_columns
from eventdedup.commit.job_result import JobResult, StagedObject, withdraw_job_result
from eventdedup.commit.ledger import ledger_update, legacy_floor
from eventdedup.commit.ledger_reader import LedgerReader, inputs_to_read
from eventdedup.commit.log import load_committed_state
from eventdedup.commit.state import CommittedState
from eventdedup.config import Config
from eventdedup.counts import BatchCounts, bounded_counts, rolled_up_folders
from eventdedup.dedup.bucket import BucketRules
from eventdedup.dedup.decide import DuplicatePolicy
from eventdedup.dedup.survivor import SurvivorPolicy
from eventdedup.inputs.exclusions import ExcludedInput, load_exclusions
from eventdedup.inputs.manifest import BatchManifest, load_batch_manifest
from eventdedup.job.dedup_stage import CommittedChains, DedupContext, dedup_partition
from eventdedup.job.read_stage import ReadContext, read_task
from eventdedup.job.read_units import Cut, dedup_partitions, plan_read_tasks, starts_gzip
from eventdedup.job.records import DriverRecord, PartitionCounts, partition_of_code
from eventdedup.layout import Layout, new_attempt
from eventdedup.parse.rules import ParseRules
from eventdedup.parse.table_lines import is_parquet_key
from eventdedup.s3store import ObjectInfo, S3Store, process_client

if TYPE_CHECKING:
    from pyspark import SparkContext

log = logging.getLogger(__name__)


def run_dedup_job(sc: SparkContext, config: Config, batch_id: str, store: S3Store | None = None,
                  confirm_copies: bool = False) -> JobResult:
    """Compute a staged batch into its job result. `store`: the batch's (with what its earlier
    steps read: eventdedup.s3store.BatchReads); by default a store of the configured bucket.
    `confirm_copies`: executors confirm every local copy with S3 (a 304) instead of trusting the
    ETag the log records, as a check of the store does (verify-rerun: an object rewritten under
    its committed name must be seen)."""
    store = store or S3Store(process_client(config.s3), config.s3.bucket)
    layout = Layout(config.layout)
    manifest = load_batch_manifest(store, layout, batch_id)
    state = load_committed_state(store, layout)
    identity = check_cache_identity(store, layout, config, state.bucket_cutovers, has_cache=bool(state.cache_heads))
    refuse_if_retracted(state, batch_id)
    history = history_for_batch(store, layout, state, batch_id, manifest.as_of, config.dedup.window_hours,
                                manifest.interval is not None)
    if history.recorded_columns is None:  # a new batch: before any Spark work, what promotion would refuse
        refuse_incompatible_columns(state.columns, config.table.columns, config.table.delta, f"batch {batch_id}")
    # A promotion under way is never recomputed (its journal names what it copies), and a
    # promoter that has not loaded the old result finds none from here on. One that loaded it
    # just before still promotes it: this attempt stages under its own root and deletes no other
    # attempt's objects (eventdedup.layout.Layout.attempt_root), so that result stays whole.
    refuse_if_promotion_unfinished(store, layout, batch_id)
    withdraw_job_result(store, layout, batch_id)
    exclusions = load_exclusions(store, layout, batch_id)
    to_read = inputs_to_read(LedgerReader(store, state.ledger, layout), history.base_version, manifest,
                             history.recorded_inputs)
    partitions = history.recorded_partitions or dedup_partitions(
        config.spark.partitions, identity.epochs.coarse, sc.defaultParallelism,
        sum(info.size for _, info in to_read))
    records = (_run_spark(sc, store, config, layout, manifest, state, history, exclusions, to_read, partitions,
                          identity, confirm_copies) if to_read else [])
    result = _assemble_result(store, config, manifest, state, history, records, exclusions, to_read, partitions)
    store.put_bytes(layout.job_result(batch_id), result.to_bytes(), content_type="application/json")
    log.info("batch %s: job finished against log version %d: %s", batch_id, history.base_version,
             dict(result.counts))
    return result


def _run_spark(sc: SparkContext, store: S3Store, config: Config, layout: Layout, manifest: BatchManifest,
               state: CommittedState, history: BatchHistory, exclusions: Mapping[str, ExcludedInput],
               inputs: list[tuple[int, ObjectInfo]], partitions: int, identity: CacheIdentity,
               confirm_copies: bool = False) -> list[DriverRecord]:
    batch_id, epochs = manifest.batch_id, identity.epochs
    excluded = {i: exclusions[info.key].quarantine_reason for i, info in inputs if info.key in exclusions}
    columns, on_mismatch = batch_columns(config, history, manifest.selector.populate)
    rules = ParseRules.for_batch(config, manifest.as_of, fingerprint_hash=identity.fingerprint_hash, columns=columns,
                                 on_mismatch=on_mismatch)
    read_ctx = ReadContext(batch_id=batch_id, s3=config.s3, bucket=config.s3.bucket, rules=rules,
                           buckets=epochs.coarse, partitions=partitions, excluded=excluded,
                           populate=manifest.selector.populate)
    bucket_rules = BucketRules(
        batch_id=batch_id, visible_owners=history.visible_owners, kept_owners=history.kept_owners,
        arrival_hour=history.arrival_hour,
        guard_hours=history.guard_hours(state.arrivals) if config.dedup.uses_id_guards else (),
        guard_days=history.guard_days(state.arrivals) if config.dedup.uses_id_guards else (), epochs=epochs,
        survivor=SurvivorPolicy.parse(config.dedup.survivor),
        policy=DuplicatePolicy(config.dedup.synthetic, config.dedup.changelog, identity.ordering),
        populate=manifest.selector.populate,
        observe=batch_mode(config, history) == "observe", write_guard=config.dedup.uses_id_guards,
        chains=ChainPolicy(small_bytes=config.dedup.segment_merge_bytes), compiled=config.dedup.compiled_stage,
    )
    attempt = new_attempt()
    dedup_ctx = DedupContext(
        s3=config.s3, bucket=config.s3.bucket, layout=layout, attempt=attempt, rules=bucket_rules,
        input_keys=tuple(info.key for info in manifest.inputs),
        quarantine_key=tuple(layout.staged_quarantine(batch_id, attempt, i) for i in range(len(manifest.inputs))),
        quarantine_final_key=tuple(layout.final_quarantine(batch_id, i) for i in range(len(manifest.inputs))),
        local_copies=LocalCopySettings(config.spark.local_cache_dir, config.spark.local_cache_bytes),
        producer_field=config.report.producer_field, columns=columns, compiled_parser=rules.compiled,
    )

    def cut_of(index: int, info: ObjectInfo) -> Cut:
        if (index in excluded or info.size > rules.max_object_bytes
                or (manifest.selector.populate and is_parquet_key(info.key))):
            return Cut.WHOLE
        return Cut.SHARES if starts_gzip(store, batch_id, info) else Cut.BYTES

    tasks = plan_read_tasks(inputs, sc.defaultParallelism, cut_of)
    ordinals = itertools.count()  # each range's place in the plan, across tasks
    numbered = [[(next(ordinals), unit) for unit in task] for task in tasks]
    log.info("batch %s: %d input objects read as %d ranges in %d tasks; %d dedup partitions", batch_id,
             len(inputs), sum(len(task) for task in tasks), len(tasks), partitions)
    chains = sc.broadcast(CommittedChains(state.cache_chains(), {} if confirm_copies else state.chain_etags()))
    try:
        rdd = (
            sc.parallelize(numbered, len(numbered))
            .flatMap(partial(read_task, read_ctx))
            .repartitionAndSortWithinPartitions(partitions, partition_of_code)
            .mapPartitionsWithIndex(lambda index, rows: dedup_partition(dedup_ctx, chains.value, index, rows))
        )
        records: list[DriverRecord] = rdd.collect()
        return records
    except Exception as exc:  # Spark wraps executor errors; surface ours with their own type
        raise _unwrapped(exc, batch_id) from exc
    finally:
        chains.destroy()


def batch_columns(config: Config, history: BatchHistory, populate: bool) -> tuple[tuple[DeclaredColumn, ...], str]:
    """The declared columns a batch writes and its [table] on_mismatch: a rerun's, as its commit
    recorded them (its files carry them, whatever the configuration says since); a new batch's,
    as configured; none for a populate, which writes no data file (a value that does not fit a
    column never keeps an event of the dataset out of the cache)."""
    if populate:
        return (), "null"
    if history.recorded_columns is not None:
        return history.recorded_columns, history.recorded_on_mismatch or "null"
    return config.table.columns, config.table.on_mismatch


def batch_mode(config: Config, history: BatchHistory) -> str:
    """The [dedup] mode a batch is computed under: a rerun's, as its commit recorded it (switching
    modes since changes no committed batch); a new batch's, as configured."""
    return history.recorded_mode or config.dedup.mode


_OWN_ERROR = re.compile(r"eventdedup\.errors\.(\w+): (.+)")


# The last "module.ExceptionName: message" line of a Python worker's traceback is its cause.
_RAISED = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit)): (.+)$", re.MULTILINE)


def _unwrapped(exc: Exception, batch_id: str) -> Exception:
    text = str(exc)
    match = _OWN_ERROR.search(text)
    own_type = getattr(errors, match.group(1), None) if match else None
    if match and isinstance(own_type, type) and issubclass(own_type, errors.EventDedupError):
        return own_type(match.group(2).strip())
    causes = _RAISED.findall(text)
    cause = f"{causes[-1][0]}: {causes[-1][1].strip()}" if causes else text[:2000]
    return errors.EventDedupError(f"batch {batch_id}: the Spark job failed: {cause}")


def _assemble_result(store: S3Store, config: Config, manifest: BatchManifest, state: CommittedState,
                     history: BatchHistory, records: list[DriverRecord], exclusions: Mapping[str, ExcludedInput],
                     to_read: list[tuple[int, ObjectInfo]], partitions: int) -> JobResult:
    layout = Layout(config.layout)
    consumed = tuple(info for _, info in to_read)
    # The exclusions the job ran under (promotion compares them with the batch's current ones).
    excluded = sorted(info.key for info in manifest.inputs if info.key in exclusions)
    counts = BatchCounts(inputs_excluded=sum(1 for info in consumed if info.key in exclusions),
                         inputs_already_consumed=len(manifest.inputs) - len(consumed))
    objects: list[StagedObject] = []
    decided_against: Counter[str] = Counter()
    folders: Counter[str] = Counter()
    producers: Counter[str] = Counter()
    copy_holders: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    columns, on_mismatch = batch_columns(config, history, manifest.selector.populate)
    figures = {column.name: ColumnFigures() for column in columns}
    for record in records:
        if isinstance(record, PartitionCounts):
            counts += record.counts
            decided_against.update(record.decided_against)
            folders.update(record.duplicates_by_folder)
            producers.update(record.duplicates_by_producer)
            copy_holders.update(record.copies_decided_against)
            reasons.update(record.quarantined_by_reason)
            for name, counted in record.column_figures.items():
                figures[name] += counted
        else:
            objects.append(record)
    counts.check_balance()
    objects.sort(key=lambda obj: obj.staged.key)
    floor = legacy_floor(store, layout, state.ledger, state.latest_interval_batch_id)
    change = BatchChange(history.window_start_hour, history.retain_from_hour,
                         ledger_update(config, manifest, consumed, state.ledger, floor), partitions, tuple(excluded),
                         interval=manifest.interval is not None,
                         arrival_hour=history.arrival_hour, decided_against=dict(sorted(decided_against.items())),
                         mode=batch_mode(config, history), duplicates_by_folder=rolled_up_folders(folders),
                         duplicates_by_producer=bounded_counts(producers),
                         copies_decided_against=dict(sorted(copy_holders.items())),
                         quarantined_by_reason=dict(sorted(reasons.items())), columns=columns, on_mismatch=on_mismatch,
                         column_figures=figures if columns else None)
    return JobResult(manifest.batch_id, history.base_version, manifest.as_of.isoformat(), counts, tuple(objects),
                     change)
