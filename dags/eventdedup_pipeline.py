"""eventdedup micro-batches: check consistency, stage the interval's landing objects, deduplicate
with Spark, promote atomically, publish counts and the output Asset.

Wiring only: every task body is a call or two into eventdedup (include/) or the plugin. Parsing
this file opens no connection and reads no Variable.

Triggers:
- scheduled runs and `airflow backfill create`: the batch is the data interval (id
  `YYYYMMDDTHHMMZ` of its start), inputs are landing objects with LastModified inside it; a run
  commits only on top of its predecessor and never behind a later interval;
- a manual run with params `batch_id` and `input_prefix`: that prefix as one batch (e.g. a
  customer re-publishing a day: every event comes out as a duplicate, audited).
"""
from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow.sdk import (Asset, CronDataIntervalTimetable, DeltaDataIntervalTimetable, Param, dag, get_current_context,
                         task)

from eventdedup_airflow import EventDedupSparkSubmitOperator

SCHEDULE = os.environ.get("EVENTDEDUP_SCHEDULE", "*/5 * * * *")
# Tests (and sub-minute demos) use fixed-length intervals in seconds instead of the cron.
INTERVAL_SECONDS = os.environ.get("EVENTDEDUP_INTERVAL_SECONDS")
OUTPUT_ASSET = Asset(os.environ.get("EVENTDEDUP_OUTPUT_ASSET", "s3://eventdedup/deduped/"), group="eventdedup")


def _batch_plan(context: Any) -> dict[str, Any]:
    """The run's batch: explicit (params) or its data interval."""
    from eventdedup.orchestration import IntervalBatch

    params = context["params"]
    if params.get("batch_id") or params.get("input_prefix"):
        if not (params.get("batch_id") and params.get("input_prefix")):
            raise ValueError("a manual batch needs both params batch_id and input_prefix")
        return {"batch_id": params["batch_id"], "input_prefix": params["input_prefix"]}
    batch = IntervalBatch.for_interval(context["data_interval_start"], context["data_interval_end"])
    return {"batch_id": batch.batch_id, "since": batch.since.isoformat(), "until": batch.until.isoformat(),
            "previous_batch_id": batch.previous_batch_id}


@dag(
    dag_id="eventdedup_pipeline",
    # Data intervals, not bare trigger times: each run's batch is exactly its interval's objects.
    schedule=(DeltaDataIntervalTimetable(timedelta(seconds=int(INTERVAL_SECONDS))) if INTERVAL_SECONDS
              else CronDataIntervalTimetable(SCHEDULE, timezone="UTC")),
    start_date=datetime(2026, 11, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    tags=["eventdedup", "dedup", "spark"],
    default_args={"retries": int(os.environ.get("EVENTDEDUP_TASK_RETRIES", "2")),
                  "retry_delay": timedelta(seconds=int(os.environ.get("EVENTDEDUP_RETRY_DELAY_SECONDS", "60")))},
    params={"batch_id": Param(None, type=["null", "string"], description="manual batch id (with input_prefix)"),
            "input_prefix": Param(None, type=["null", "string"], description="process this prefix as one batch")},
    doc_md=__doc__,
)
def eventdedup_pipeline() -> None:
    @task
    def check_consistency() -> dict[str, Any]:
        """Halt (and alert) on any unfinished promotion or inconsistency; return the run's batch."""
        from eventdedup.orchestration import consistency_gate
        from eventdedup_airflow import alert_and_raise, load_pipeline_config, s3_store

        context = get_current_context()
        plan = _batch_plan(context)
        config = load_pipeline_config()
        with alert_and_raise(plan["batch_id"], "pipeline_halted", context):
            consistency_gate(s3_store(config), config)
        return plan

    @task
    def stage_batch(plan: dict[str, Any]) -> str:
        from eventdedup_airflow import check_planned_order, load_pipeline_config, s3_store, stage_planned_batch

        config = load_pipeline_config()
        store = s3_store(config)
        check_planned_order(store, config, plan)  # before any Spark work: say which batch must commit first
        return stage_planned_batch(store, config, plan)

    @task
    def promote_batch(plan: dict[str, Any]) -> dict[str, Any]:
        from eventdedup.promotion import promote_batch as promote
        from eventdedup_airflow import alert_and_raise, check_planned_order, load_pipeline_config, s3_store

        config = load_pipeline_config()
        store = s3_store(config)
        check_planned_order(store, config, plan)
        with alert_and_raise(plan["batch_id"], "promotion_failed", get_current_context()):
            outcome = promote(store, config, plan["batch_id"])
        return {"batch_id": outcome.batch_id, "version": outcome.version, "newly_committed": outcome.newly_committed}

    @task(outlets=[OUTPUT_ASSET])
    def publish_metrics(plan: dict[str, Any]) -> dict[str, Any]:
        from eventdedup.orchestration import committed_counts
        from eventdedup_airflow import load_pipeline_config, log_metrics, s3_store

        config = load_pipeline_config()
        summary = committed_counts(s3_store(config), config, plan["batch_id"])
        log_metrics(summary)
        return summary  # small: counts only, never data

    plan = check_consistency()
    staged = stage_batch(plan)
    dedup = EventDedupSparkSubmitOperator(task_id="dedup_batch", batch_id="{{ ti.xcom_pull(task_ids='stage_batch') }}")
    promoted = promote_batch(plan)
    staged >> dedup >> promoted >> publish_metrics(plan)


eventdedup_pipeline()
