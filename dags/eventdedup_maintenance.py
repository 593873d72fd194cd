"""Daily eventdedup maintenance: expire cache segments nothing can still read (superseded copies,
hours before the commit log's expiry horizon: log time, not this run's clock), catch the committed
view's index up and delete its old parts (eventdedup.commit.view), compact the output's Delta table and
vacuum what its compaction replaced, never a batch's file (eventdedup.delta.upkeep), check consistency, then fsck:
every committed object still there, unchanged (a failure alerts like a failed promotion). Beside them, the
day's report (eventdedup.report: the commits of the run's data interval, as HTML and JSON under the
reports prefix, linked from the UI by plugins/eventdedup_report.py), and
the sweep: landing objects older than every batch's lookback that no batch consumed are staged as a
batch of their own and alerted, and a run of the pipeline DAG is triggered for that batch: the
pipeline's runs are serialised (max_active_runs=1), so the sweep never commits beside an interval
batch and neither can make the other stale (skipped when nothing waits).

One such DAG per stream (plugins/eventdedup_streams.py): `eventdedup_maintenance`, or
`eventdedup_<stream>_maintenance` for each file of the streams folder, on the stream's own schedule
and pool, triggering the stream's own pipeline.

Wiring only; the rules are in eventdedup.cache.expiry. Parsing opens no connection.
"""
from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import dag, get_current_context, task
from airflow.sdk.exceptions import AirflowSkipException
from eventdedup_streams import DeployedStream, deployment


def maintenance_id(context: Any) -> str:
    """The name a run's alerts go under: its logical day, or (a manual run without a logical date)
    the day it ran."""
    return f"maintenance-{context.get('ds_nodash') or format(context['dag_run'].run_after, '%Y%m%d')}"


def eventdedup_maintenance(stream: DeployedStream) -> None:
    """The stream's maintenance DAG."""
    @dag(
        dag_id=stream.dag_id("maintenance"),
        description=stream.description,
        schedule=stream.maintenance_schedule,
        start_date=datetime(2026, 11, 1, tzinfo=timezone.utc),
        catchup=False,
        max_active_runs=1,
        tags=stream.tags("maintenance"),
        default_args={"retries": int(os.environ.get("EVENTDEDUP_TASK_RETRIES", "2")),
                      "retry_delay": timedelta(seconds=int(os.environ.get("EVENTDEDUP_RETRY_DELAY_SECONDS", "300")))},
        doc_md=__doc__,
    )
    def maintenance() -> None:
        maintenance_tasks(stream)

    maintenance()


def maintenance_tasks(stream: DeployedStream) -> None:
    """The stream's tasks, each body a call or two into the library with the stream's configuration."""
    target = stream.target

    @task(pool=stream.pool)
    def expire_cache() -> dict[str, Any]:
        from eventdedup_airflow import load_pipeline_config, s3_store

        from eventdedup.cache.expiry import expire_cache as expire

        config = load_pipeline_config(target)
        report = expire(s3_store(config), config)
        return {"superseded": len(report.superseded), "expired": len(report.expired), "kept": report.kept}

    @task(pool=stream.pool)
    def maintain_view_index() -> dict[str, Any]:
        from eventdedup_airflow import load_pipeline_config, s3_store

        from eventdedup.commit.view import maintain_view
        from eventdedup.layout import Layout

        config = load_pipeline_config(target)
        return {"view_version": maintain_view(s3_store(config), Layout(config.layout)).version}

    # No store pool: compaction and vacuum touch only the Delta table's files and commits, never the
    # commit protocol's state, and they give way to projections (eventdedup.delta.upkeep).
    @task
    def maintain_delta_table() -> dict[str, Any]:
        from eventdedup_airflow import load_pipeline_config, s3_store

        from eventdedup.delta.upkeep import maintain_table

        config = load_pipeline_config(target)
        return maintain_table(s3_store(config), config).to_json()

    # No store pool: it reads committed objects only, and writes under the reports prefix.
    @task
    def write_report() -> dict[str, Any]:
        """The day's report (the commits made in the run's data interval) on the store, linked from
        the UI by the eventdedup plugin: reports/<day>.html and .json, and reports/latest.*."""
        from eventdedup_airflow import load_pipeline_config, s3_store

        from eventdedup.report.build import build_report, publish_report, report_name

        context = get_current_context()
        config = load_pipeline_config(target)
        store = s3_store(config)
        # A manual run may have no data interval (no logical date), or one that is a moment: the day
        # before it ran.
        end = context.get("data_interval_end") or context["dag_run"].run_after
        start = context.get("data_interval_start") or end
        if start >= end:
            start = end - timedelta(days=1)
        report = build_report(store, config, start, end, now=end)
        written = publish_report(store, config, report, report_name(start, end))
        lag = report.figures["copy_lag"]
        return {"written": written, "batches": report.figures["log"]["batches"], "verdict": lag["verdict"]}

    @task(pool=stream.pool)
    def check_consistency() -> None:
        from eventdedup_airflow import alert_and_raise, load_pipeline_config, s3_store

        from eventdedup.ops.scheduling import consistency_gate

        context = get_current_context()
        config = load_pipeline_config(target)
        with alert_and_raise(maintenance_id(context), "pipeline_halted", context, target=target):
            consistency_gate(s3_store(config), config)

    @task(pool=stream.pool)
    def fsck_committed_objects() -> dict[str, Any]:
        from eventdedup_airflow import alert_and_raise, load_pipeline_config, s3_store

        from eventdedup.ops.fsck import fsck_gate

        context = get_current_context()
        config = load_pipeline_config(target)
        with alert_and_raise(maintenance_id(context), "fsck_failed", context, target=target):
            # The newest commits (default: a week of 5-minute batches), so the daily check stays
            # the same size however long the store has run; `eventdedup fsck` checks everything.
            last = int(os.environ.get("EVENTDEDUP_FSCK_LAST_COMMITS", "2016"))
            report = fsck_gate(s3_store(config), config, last)
        return {"commits": report.commits_checked, "objects": report.objects_checked, "lists": report.list_requests}

    @task(pool=stream.pool)
    def sweep_unconsumed_inputs() -> dict[str, str]:
        """Stage the sweep batch and alert; skip the pipeline run when nothing waits."""
        from eventdedup_airflow import load_pipeline_config, s3_store, send_alert

        from eventdedup.ops.alerts import Alert
        from eventdedup.ops.sweep import stage_sweep

        context = get_current_context()
        config = load_pipeline_config(target)
        store = s3_store(config)
        outcome = stage_sweep(store, config)
        if outcome is None:
            raise AirflowSkipException("no unconsumed landing object older than the lookback")
        send_alert(Alert.now(outcome.plan.batch_id, "unconsumed_inputs", outcome.message(store),
                             str(context["run_id"])), context, target)
        return outcome.pipeline_params()

    swept = sweep_unconsumed_inputs()
    process_sweep = TriggerDagRunOperator(
        task_id="process_sweep", trigger_dag_id=stream.dag_id("pipeline"),
        trigger_run_id="sweep__{{ ti.xcom_pull(task_ids='sweep_unconsumed_inputs')['batch_id'] }}",
        conf={name: f"{{{{ ti.xcom_pull(task_ids='sweep_unconsumed_inputs')['{name}'] }}}}"
              for name in ("batch_id", "sweep_before")},
        skip_when_already_exists=True)
    swept >> process_sweep
    expire_cache() >> maintain_view_index() >> maintain_delta_table() >> check_consistency() >> fsck_committed_objects()
    write_report()


for _stream in deployment().streams:
    eventdedup_maintenance(_stream)
