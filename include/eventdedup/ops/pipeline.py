"""One micro-batch end to end: stage, dedup with Spark, promote. What `eventdedup run-batch` runs."""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from eventdedup.cache.claims import cache_claim_differences, own_guard_entries
from eventdedup.cache.identity import check_cache_identity
from eventdedup.commit.gate import needs_dedup_job
from eventdedup.commit.job_result import JobResult
from eventdedup.commit.log import committed_record, committed_version, load_committed_state
from eventdedup.commit.promotion import PromotionOutcome, promote_batch
from eventdedup.commit.records import CommitRecord
from eventdedup.commit.state import record_arrival_hour
from eventdedup.config import Config
from eventdedup.inputs.selector import InputSelector
from eventdedup.job.driver import run_dedup_job
from eventdedup.keys import is_guard_head_key
from eventdedup.layout import Layout
from eventdedup.naming import validate_batch_id
from eventdedup.ops.scheduling import BatchPlan, stage_planned_batch
from eventdedup.ops.timings import PhaseTimes
from eventdedup.s3store import S3Store

if TYPE_CHECKING:
    from pyspark import SparkContext

log = logging.getLogger(__name__)


def run_batch(store: S3Store, config: Config, batch_id: str, selector: InputSelector, now: datetime,
              spark: Callable[[], SparkContext], timings: PhaseTimes | None = None) -> PromotionOutcome:
    """Process one batch; rerunning a committed batch is a no-op that reports its commit.
    `spark` (it starts Spark) is called only when the job must run; `timings` receives each phase's wall time."""
    layout = Layout(config.layout)
    clock = timings or PhaseTimes()
    with clock.phase("staging"):
        # The same staging as a scheduled run: unsafe names refused before any S3 request, then the gate.
        stage_planned_batch(store, config, BatchPlan(validate_batch_id(batch_id), selector), now)
        needed = needs_dedup_job(store, layout, batch_id)
    if needed:
        with clock.phase("spark_wait"):
            session = spark()
        with clock.phase("job"):
            run_dedup_job(session, config, batch_id)
    with clock.phase("promotion"):
        return promote_batch(store, config, batch_id)


def differences_from_commit(store: S3Store, job: JobResult, record: CommitRecord,
                            heads: Mapping[str, str], coarse_buckets: int) -> list[str]:
    """Compare a recomputed batch with its commit: a rerun must reproduce every object byte for
    byte, except what later commits legitimately changed in the cache heads it copies forward
    (eventdedup.cache.claims): there, its own claims must be the same."""
    committed = {obj.key: obj for obj in record.objects}
    recomputed = {obj.final_key: obj for obj in job.objects}
    problems = [f"{key}: committed but not produced by the rerun"
                for key in sorted(committed.keys() - recomputed.keys())]
    problems += [f"{key}: produced by the rerun but not committed"
                 for key in sorted(recomputed.keys() - committed.keys())]
    segments = {obj.cache_key: obj.staged.key for obj in job.objects
                if obj.cache_key is not None and not is_guard_head_key(obj.cache_key)}
    arrival_day = record_arrival_hour(record) // 24
    own_entries = own_guard_entries(store, segments, record.batch_id, arrival_day, coarse_buckets)
    for key in sorted(committed.keys() & recomputed.keys()):
        if committed[key].etag == recomputed[key].staged.etag and committed[key].size == recomputed[key].staged.size:
            continue
        if committed[key].kind == "cache":
            cache_key = recomputed[key].cache_key
            problems += cache_claim_differences(store, key, recomputed[key].staged.key, record.batch_id,
                                                None if cache_key is None else heads.get(cache_key),
                                                own_entries.get(cache_key or "", set()))
        else:
            problems.append(f"{key}: rerun produced different bytes")
    # A count this version adds (e.g. inputs_excluded) is absent, i.e. 0, in older commit records.
    if job.counts.results() != record.counts.results():
        problems.append(f"counts differ: committed {dict(record.counts)}, rerun {dict(job.counts)}")
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
    job = run_dedup_job(sc, config, batch_id)
    try:
        epochs = check_cache_identity(store, layout, config, state.bucket_cutovers)
        return differences_from_commit(store, job, record, state.cache_heads, epochs.coarse)
    finally:
        store.delete_prefix(layout.staging_root(batch_id))
