"""Daily eventdedup maintenance: expire cache segments nothing can still read (superseded copies,
hours before the commit log's expiry horizon: log time, not this run's clock), check consistency, then fsck:
every committed object still there, unchanged (a failure alerts like a failed promotion). Beside them,
the sweep: landing objects older than every batch's lookback that no batch consumed are staged as a
batch of their own, alerted, deduplicated with Spark and promoted (skipped when there are none).

Wiring only; the rules are in eventdedup.cache.expiry. Parsing opens no connection.
"""
from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow.sdk import dag, get_current_context, task
from airflow.sdk.exceptions import AirflowSkipException
from eventdedup_airflow import EventDedupSparkSubmitOperator


@dag(
    dag_id="eventdedup_maintenance",
    schedule=os.environ.get("EVENTDEDUP_MAINTENANCE_SCHEDULE", "@daily"),
    start_date=datetime(2026, 11, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    tags=["eventdedup", "maintenance"],
    default_args={"retries": int(os.environ.get("EVENTDEDUP_TASK_RETRIES", "2")),
                  "retry_delay": timedelta(seconds=int(os.environ.get("EVENTDEDUP_RETRY_DELAY_SECONDS", "300")))},
    doc_md=__doc__,
)
def eventdedup_maintenance() -> None:
    @task
    def expire_cache() -> dict[str, Any]:
        from eventdedup_airflow import load_pipeline_config, s3_store

        from eventdedup.cache.expiry import expire_cache as expire

        config = load_pipeline_config()
        report = expire(s3_store(config), config)
        return {"superseded": len(report.superseded), "expired": len(report.expired), "kept": report.kept}

    @task
    def check_consistency() -> None:
        from eventdedup_airflow import alert_and_raise, load_pipeline_config, s3_store

        from eventdedup.ops.scheduling import consistency_gate

        context = get_current_context()
        config = load_pipeline_config()
        with alert_and_raise(f"maintenance-{context['ds_nodash']}", "pipeline_halted", context):
            consistency_gate(s3_store(config), config)

    @task
    def fsck_committed_objects() -> dict[str, Any]:
        from eventdedup_airflow import alert_and_raise, load_pipeline_config, s3_store

        from eventdedup.ops.fsck import fsck_gate

        context = get_current_context()
        config = load_pipeline_config()
        with alert_and_raise(f"maintenance-{context['ds_nodash']}", "fsck_failed", context):
            # The newest commits (default: a week of 5-minute batches), so the daily check stays
            # the same size however long the store has run; `eventdedup fsck` checks everything.
            last = int(os.environ.get("EVENTDEDUP_FSCK_LAST_COMMITS", "2016"))
            report = fsck_gate(s3_store(config), config, last)
        return {"commits": report.commits_checked, "objects": report.objects_checked, "lists": report.list_requests}

    @task
    def sweep_unconsumed_inputs() -> str:
        """Stage the sweep batch and alert; skip the Spark job and the promotion when nothing waits."""
        from eventdedup_airflow import load_pipeline_config, s3_store, send_alert

        from eventdedup.ops.alerts import Alert
        from eventdedup.ops.sweep import stage_sweep

        context = get_current_context()
        config = load_pipeline_config()
        store = s3_store(config)
        outcome = stage_sweep(store, config)
        if outcome is None:
            raise AirflowSkipException("no unconsumed landing object older than the lookback")
        send_alert(Alert.now(outcome.plan.batch_id, "unconsumed_inputs", outcome.message(store),
                             str(context["run_id"])), context)
        return outcome.plan.batch_id

    @task
    def promote_sweep(batch_id: str) -> dict[str, Any]:
        from eventdedup_airflow import alert_and_raise, load_pipeline_config, s3_store

        from eventdedup.commit.promotion import promote_batch

        config = load_pipeline_config()
        with alert_and_raise(batch_id, "promotion_failed", get_current_context()):
            outcome = promote_batch(s3_store(config), config, batch_id)
        return {"batch_id": outcome.batch_id, "version": outcome.version, "counts": dict(outcome.counts)}

    swept = sweep_unconsumed_inputs()
    dedup = EventDedupSparkSubmitOperator(task_id="dedup_sweep",
                                          batch_id="{{ ti.xcom_pull(task_ids='sweep_unconsumed_inputs') }}")
    swept >> dedup >> promote_sweep(swept)
    expire_cache() >> check_consistency() >> fsck_committed_objects()


eventdedup_maintenance()
