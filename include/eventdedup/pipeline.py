"""One micro-batch end to end: stage, dedup with Spark, promote. What `eventdedup run-batch` runs."""
from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from .commit_log import CommitRecord, load_committed_state, read_commit
from .config import Config
from .job import run_dedup_job
from .job_result import JobResult
from .journal import journal_or_none
from .layout import Layout
from .naming import validate_batch_id
from .promotion import PromotionOutcome, promote_batch, refuse_if_other_journals
from .s3store import S3Store
from .staging import InputSelector, checked_selector, stage_batch

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def run_batch(store: S3Store, config: Config, batch_id: str, selector: InputSelector, now: datetime,
              spark: Callable[[], SparkSession]) -> PromotionOutcome:
    """Process one batch; rerunning a committed batch is a no-op that reports its commit."""
    validate_batch_id(batch_id)
    selector = checked_selector(config, selector)  # unsafe names are refused before any S3 request
    layout = Layout(config.layout)
    refuse_if_other_journals(store, layout, batch_id)
    stage_batch(store, config, batch_id, selector, now)
    state = load_committed_state(store, layout)
    if batch_id not in state.batches and journal_or_none(store, layout, batch_id) is None:
        run_dedup_job(spark(), config, batch_id)
    return promote_batch(store, config, batch_id)


def differences_from_commit(job: JobResult, record: CommitRecord) -> list[str]:
    """Compare a recomputed batch with its commit: a rerun must reproduce every object byte for byte."""
    committed = {obj.key: obj for obj in record.objects}
    recomputed = {obj.final_key: obj for obj in job.objects}
    problems = [f"{key}: committed but not produced by the rerun" for key in sorted(committed.keys() - recomputed.keys())]
    problems += [f"{key}: produced by the rerun but not committed" for key in sorted(recomputed.keys() - committed.keys())]
    for key in sorted(committed.keys() & recomputed.keys()):
        if committed[key].etag != recomputed[key].staged.etag or committed[key].size != recomputed[key].staged.size:
            problems.append(f"{key}: rerun produced different bytes")
    if dict(job.counts) != dict(record.counts):
        problems.append(f"counts differ: committed {dict(record.counts)}, rerun {dict(job.counts)}")
    return problems


def verify_rerun(store: S3Store, config: Config, batch_id: str, spark: SparkSession) -> list[str]:
    """Recompute a committed batch in staging and compare it with what was committed."""
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    if batch_id not in state.batches:
        return [f"batch {batch_id} is not committed"]
    record = read_commit(store, layout, state.batches[batch_id])
    assert record is not None
    job = run_dedup_job(spark, config, batch_id)
    store.delete_prefix(layout.staging_root(batch_id))
    return differences_from_commit(job, record)
