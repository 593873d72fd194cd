"""One micro-batch end to end: stage, dedup with Spark, promote. What `eventdedup run-batch` runs."""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from eventdedup.cache.claims import GuardEntries, cache_claim_differences, lacking_from_guard, own_guard_entries
from eventdedup.cache.guard import decode_guard
from eventdedup.cache.identity import check_cache_identity
from eventdedup.commit.changes import BatchChange
from eventdedup.commit.gate import needs_dedup_job
from eventdedup.commit.job_result import JobResult
from eventdedup.commit.log import committed_record, committed_version, load_committed_state
from eventdedup.commit.records import CommitRecord
from eventdedup.commit.state import record_arrival_hour
from eventdedup.config import Config
from eventdedup.counts import same_recorded_folders
from eventdedup.inputs.selector import InputSelector, checked_selector
from eventdedup.job.driver import run_dedup_job
from eventdedup.keys import is_day_guard_head_key, is_guard_head_key
from eventdedup.layout import Layout, is_guard_object
from eventdedup.naming import validate_batch_id
from eventdedup.ops.scheduling import BatchPlan, stage_planned_batch
from eventdedup.ops.timings import PhaseTimes
from eventdedup.promotion.promote import PromotionOutcome, promote_batch
from eventdedup.s3store import S3Store
from eventdedup.tables import AUDIT_SCHEMA, parquet_to_table

if TYPE_CHECKING:
    from pyspark import SparkContext

log = logging.getLogger(__name__)


def run_batch(store: S3Store, config: Config, batch_id: str, selector: InputSelector, now: datetime,
              spark: Callable[[], SparkContext], timings: PhaseTimes | None = None,
              by_hand: bool = False) -> PromotionOutcome:
    """Process one batch; rerunning a committed batch is a no-op that reports its commit.
    `spark` (it starts Spark) is called only when the job must run; `timings` receives each phase's wall time;
    `by_hand`: a person's run, whose empty first interval is refused (eventdedup.ops.scheduling)."""
    layout = Layout(config.layout)
    clock = timings or PhaseTimes()
    # The same staging as a scheduled run: unsafe names refused before any S3 request, then the gate.
    plan = BatchPlan(validate_batch_id(batch_id), checked_selector(layout, selector))
    store = store.for_one_batch()  # each step reads what an earlier one has not (eventdedup.s3store.BatchReads)
    with clock.phase("staging"):
        stage_planned_batch(store, config, plan, now, by_hand)
        needed = needs_dedup_job(store, layout, batch_id)
    if needed:
        with clock.phase("spark_wait"):
            session = spark()
        with clock.phase("job"):
            run_dedup_job(session, config, batch_id, store)
    with clock.phase("promotion"):
        return promote_batch(store, config, batch_id)


def differences_from_commit(store: S3Store, layout: Layout, job: JobResult, record: CommitRecord,
                            chains: Mapping[str, tuple[str, ...]], coarse_buckets: int,
                            id_guards: bool = True) -> list[str]:
    """Compare a recomputed batch with its commit: a rerun must reproduce every object byte for
    byte, except what later commits legitimately changed in the cache chains it builds on
    (eventdedup.cache.claims): there, its own claims must be the same. Without id guards
    (partition_time = "id"), guards an older commit names (docs/formats.md) are not compared: no
    batch reads them."""
    committed = {obj.key: obj for obj in record.objects
                 if id_guards or obj.kind != "cache" or not is_guard_object(obj.key)}
    recomputed = {obj.final_key: obj for obj in job.objects}
    segments = {obj.cache_key: obj.staged.key for obj in job.objects
                if obj.cache_key is not None and not is_guard_head_key(obj.cache_key)}
    own_entries = own_guard_entries(store, segments, record.batch_id, record_arrival_hour(record), coarse_buckets)
    problems = []
    day_guards = _day_guards(layout, committed)
    if day_guards:
        # A commit with day guards (docs/formats.md): the rerun writes its arrival hour's instead.
        # What must hold is the same: the committed guards hold its claims.
        problems += _day_guard_differences(store, day_guards, chains, own_entries)
        committed = {key: obj for key, obj in committed.items() if key not in day_guards}
        recomputed = {key: obj for key, obj in recomputed.items() if not is_guard_object(key)}
    problems += [f"{key}: committed but not produced by the rerun"
                 for key in sorted(committed.keys() - recomputed.keys())]
    problems += [f"{key}: produced by the rerun but not committed"
                 for key in sorted(recomputed.keys() - committed.keys())]
    for key in sorted(committed.keys() & recomputed.keys()):
        if committed[key].etag == recomputed[key].staged.etag and committed[key].size == recomputed[key].staged.size:
            continue
        if committed[key].kind == "cache":
            cache_key = recomputed[key].cache_key or ""
            problems += cache_claim_differences(store, (key, tuple(record.cache_bases.get(cache_key, ()))),
                                                recomputed[key].staged.key,
                                                record.batch_id, chains.get(cache_key, ()),
                                                own_entries.get(cache_key, set()))
        elif committed[key].kind != "audit" or not _same_audit_decisions(store, committed[key].key,
                                                                           recomputed[key].staged.key):
            problems.append(f"{key}: rerun produced different bytes")
    # A count an older record lacks reads as 0 (docs/formats.md).
    if job.counts.results() != record.counts.results():
        problems.append(f"counts differ: committed {dict(record.counts)}, rerun {dict(job.counts)}")
    return problems + _change_differences(job, record)


# What a batch's change records of its own decisions, compared where the commit has it (an older
# record without a field says nothing: docs/formats.md). Not duplicates_by_producer: it follows
# [report] producer_field as set when the batch ran, as the audit's producer column does.
_DECIDED_FIELDS = ("decided_against", "copies_decided_against", "duplicates_by_folder", "quarantined_by_reason")


def _change_differences(job: JobResult, record: CommitRecord) -> list[str]:
    committed, rerun = record.change, job.change
    if not isinstance(committed, BatchChange) or not isinstance(rerun, BatchChange):
        return []
    differences = []
    for name in _DECIDED_FIELDS:
        held, recomputed = getattr(committed, name), getattr(rerun, name)
        # Folders an older record cut otherwise than this release does are matched as far as both keep them.
        same = same_recorded_folders if name == "duplicates_by_folder" else _same_mapping
        if held is not None and not same(held, recomputed or {}):
            differences.append(f"{name} differs: committed {dict(held)}, rerun {dict(recomputed or {})}")
    return differences


def _same_mapping(held: Mapping[str, int], recomputed: Mapping[str, int]) -> bool:
    return dict(held) == dict(recomputed)


def _same_audit_decisions(store: S3Store, committed_key: str, recomputed_key: str) -> bool:
    """Whether two audit files hold the same rows but for `producer`: it is copied from the raw line
    by [report] producer_field as set when the file was written (absent from older files),
    no decision of the batch's. Every other column must be equal, row for row, but for
    `would_supersede` where the committed file predates it (docs/formats.md)."""
    committed = parquet_to_table(store.get_bytes(committed_key))
    recomputed = parquet_to_table(store.get_bytes(recomputed_key))
    columns = [name for name in AUDIT_SCHEMA.names
               if name != "producer" and (name != "would_supersede" or name in committed.column_names)]
    return bool(committed.select(columns).equals(recomputed.select(columns)))


def _day_guards(layout: Layout, objects: Iterable[str]) -> dict[str, str]:
    """The day guards (format 1: docs/formats.md) among a commit's objects: object key -> the
    state's head name."""
    named = {key: layout.cache_object_of(key) for key in objects}
    return {key: parsed[1] for key, parsed in sorted(named.items())
            if parsed is not None and is_day_guard_head_key(parsed[1])}


def _day_guard_differences(store: S3Store, day_guards: Mapping[str, str], chains: Mapping[str, tuple[str, ...]],
                           own_entries: dict[str, GuardEntries]) -> list[str]:
    """Whether a commit's day guards (or the heads that superseded them) hold the rerun's claims,
    and whether it wrote one for every bucket the rerun claims ids in."""
    guarded = {int(head.rsplit("/", 1)[1]) for head in day_guards.values()}
    problems = [f"{name}: the rerun claims {len(entries)} ids in bucket {name.rsplit('/', 1)[1]}, for which the "
                "commit wrote no id guard" for name, entries in sorted(own_entries.items())
                if entries and int(name.rsplit("/", 1)[1]) not in guarded]
    for key, head in day_guards.items():
        bucket = int(head.rsplit("/", 1)[1])
        data = store.get_bytes_or_none(key)
        if data is None:
            current = chains.get(head)
            data = None if not current else store.get_bytes_or_none(current[-1])
        claims = {entry for name, entries in own_entries.items() if name.endswith(f"/{bucket:04d}")
                  for entry in entries}
        if data is None:
            if claims:
                problems.append(f"{key}: committed, but neither it nor a head of its key exists any more")
            continue
        lacking = lacking_from_guard(decode_guard(data, key), claims)
        if lacking:
            problems.append(f"{key}: the committed id guard lacks {lacking} ids the batch claims")
    return problems


def verify_rerun(store: S3Store, config: Config, batch_id: str, sc: SparkContext) -> list[str]:
    """Recompute a committed batch in staging and compare it with what was committed."""
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    version = committed_version(store, layout, state, batch_id)
    if version is None:
        return [f"batch {batch_id} is not committed"]
    record = committed_record(store, layout, version)
    if record.is_operation:
        return [f"{batch_id} (log version {version}) is a {record.change.KIND}, not a batch: there is nothing to "
                "recompute"]
    job = run_dedup_job(sc, config, batch_id, confirm_copies=True)  # a check: what S3 holds, not what copies say
    try:
        epochs = check_cache_identity(store, layout, config, state.bucket_cutovers).epochs
        return differences_from_commit(store, layout, job, record, state.cache_chains(), epochs.coarse,
                                       config.dedup.uses_id_guards)
    finally:
        store.delete_prefix(layout.staging_root(batch_id))
