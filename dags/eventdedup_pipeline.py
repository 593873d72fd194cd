"""eventdedup micro-batches: check consistency, stage the interval's landing objects, deduplicate
with Spark, promote atomically, publish counts and the output Asset.

Wiring only: every task body is a call or two into eventdedup (include/) or the plugin. Parsing
this file opens no connection and reads no Variable.

Triggers:
- scheduled runs and `airflow backfill create`: the batch is the data interval (id
  `YYYYMMDDTHHMMSSZ` of its start), inputs are the landing objects of the lookback before its end
  that no batch consumed (the ingestion ledger: a straggler dated earlier is taken once); a run
  commits only on top of its predecessor and never behind a later interval;
- a run the maintenance DAG triggers with params `batch_id` and `sweep_before`: its sweep batch
  (unconsumed landing objects older than the lookback), serialised with the interval runs;
- a manual run with params `batch_id` and `input_prefix`: that prefix as one batch (e.g. a
  customer re-publishing a day: every event comes out as a duplicate, audited); with `populate`,
  an existing dataset committed to the cache only (eventdedup_populate triggers these);
- a manual run with params `since` and `until`: that interval as an interval batch (a bridge
  across a gap a schedule change left, as the order gate's refusal names it). With
  max_active_runs=1 it waits for the refused scheduled run to give up or be marked failed.

One such DAG per stream (plugins/eventdedup_streams.py): `eventdedup_pipeline` for the one
configuration EVENTDEDUP_CONFIG names, or `eventdedup_<stream>_pipeline` for each file of the streams
folder, on the stream's own schedule, pool and output Asset, its tasks reading the stream's file.
"""
from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from airflow.sdk import Asset, Param, dag, get_current_context, task
from eventdedup_airflow import EventDedupSparkSubmitOperator
from eventdedup_emr import deploy_mode, emr_serverless_dedup_operator
from eventdedup_streams import DeployedStream, deployment

# How many times (every retry delay) a run re-checks a halted store, or waits for the interval before
# it to commit (a backfill running beside the schedule), before it fails: the default is an hour.
WAIT_RETRIES = int(os.environ.get("EVENTDEDUP_WAIT_RETRIES", "60"))


def pipeline_params() -> dict[str, Param]:
    return {"batch_id": Param(None, type=["null", "string"], description="manual batch id (with input_prefix)"),
            "input_prefix": Param(None, type=["null", "string"], description="process this prefix as one batch"),
            "reprocess": Param(False, type="boolean",
                               description="with input_prefix: also objects a committed batch consumed"),
            "sweep_before": Param(None, type=["null", "string"],
                                  description="with batch_id: a sweep batch the maintenance DAG staged"),
            "populate": Param(False, type="boolean",
                              description="with input_prefix: commit the prefix to the cache only (cold start)"),
            "since": Param(None, type=["null", "string"],
                           description="with until (ISO-8601 with offset): run this interval, e.g. across a gap"),
            "until": Param(None, type=["null", "string"], description="with since: the interval's end")}


def eventdedup_pipeline(stream: DeployedStream) -> None:
    """The stream's pipeline DAG. Every interval runs, oldest first, from the stream's go-live
    (catchup): the promotion gate commits an interval only on top of the one before it, so a skipped
    interval would halt the pipeline; after an outage the scheduler works through the missed
    intervals by itself."""
    @dag(
        dag_id=stream.dag_id("pipeline"),
        description=stream.description,
        # Data intervals, not bare trigger times: each run's batch is exactly its interval's objects.
        schedule=stream.pipeline_schedule,
        start_date=stream.start_date,
        catchup=True,
        max_active_runs=1,
        tags=stream.tags("dedup", "spark"),
        default_args={"retries": int(os.environ.get("EVENTDEDUP_TASK_RETRIES", "2")),
                      "retry_delay": timedelta(seconds=int(os.environ.get("EVENTDEDUP_RETRY_DELAY_SECONDS", "60")))},
        params=pipeline_params(),
        doc_md=__doc__,
    )
    def pipeline() -> None:
        pipeline_tasks(stream)

    pipeline()


def pipeline_tasks(stream: DeployedStream) -> None:
    """The stream's tasks, each body a call or two into the library with the stream's configuration."""
    target = stream.target

    @task(retries=WAIT_RETRIES, pool=stream.pool)
    def check_consistency() -> dict[str, Any]:
        """Halt (and alert, once per run) on any unfinished promotion or inconsistency, re-checking on
        every retry: after `eventdedup recover` the run goes on by itself. Returns the run's batch plan."""
        from eventdedup_airflow import alert_and_raise, load_pipeline_config, s3_store

        from eventdedup import codec
        from eventdedup.ops.scheduling import BatchPlan, consistency_gate

        context = get_current_context()
        plan = BatchPlan.for_run(context["params"], context.get("data_interval_start"),
                                 context.get("data_interval_end"))
        config = load_pipeline_config(target)
        with alert_and_raise(plan.batch_id, "pipeline_halted", context, target=target):
            consistency_gate(s3_store(config), config)
        return codec.to_doc(plan)  # small and JSON-safe for XCom: the plan, never data

    @task(retries=WAIT_RETRIES, pool=stream.pool)
    def stage_batch(plan: dict[str, Any]) -> str:
        """The promotion gate (run order: before any Spark work), then the batch's frozen inputs.
        A manual batch is judged as of when its run was triggered (`run_after`), not the clock."""
        from eventdedup_airflow import alert_and_raise, load_pipeline_config, s3_store

        from eventdedup import codec
        from eventdedup.ops.scheduling import BatchPlan, stage_planned_batch

        context = get_current_context()
        config = load_pipeline_config(target)
        batch = codec.from_doc(BatchPlan, plan)
        # A run that waited for its predecessor through every retry alerts as it gives up.
        with alert_and_raise(batch.batch_id, "pipeline_stalled", context, final_try_only=True, target=target):
            return stage_planned_batch(s3_store(config), config, batch, context["dag_run"].run_after).batch_id

    @task(pool=stream.pool)
    def promote_batch(plan: dict[str, Any]) -> dict[str, Any]:
        from eventdedup_airflow import alert_and_raise, load_pipeline_config, s3_store

        from eventdedup import codec
        from eventdedup.ops.scheduling import BatchPlan
        from eventdedup.promotion.promote import promote_batch as promote

        config = load_pipeline_config(target)
        batch_id = codec.from_doc(BatchPlan, plan).batch_id
        with alert_and_raise(batch_id, "promotion_failed", get_current_context(), target=target):
            outcome = promote(s3_store(config), config, batch_id)
        return {"batch_id": outcome.batch_id, "version": outcome.version, "newly_committed": outcome.newly_committed}

    @task(outlets=[Asset(stream.output_asset, group="eventdedup")])
    def publish_metrics(plan: dict[str, Any]) -> dict[str, Any]:
        from eventdedup_airflow import load_pipeline_config, s3_store, send_batch_metrics

        from eventdedup import codec
        from eventdedup.ops.scheduling import BatchPlan
        from eventdedup.ops.status import committed_summary, log_batch_metrics

        config = load_pipeline_config(target)
        store, batch_id = s3_store(config), codec.from_doc(BatchPlan, plan).batch_id
        summary = committed_summary(store, config, batch_id)
        log_batch_metrics(summary)
        send_batch_metrics(store, config, batch_id, target.name)
        return summary  # small: counts only, never data

    plan = check_consistency()
    staged = stage_batch(plan)
    staged_id = "{{ ti.xcom_pull(task_ids='stage_batch') }}"
    # spark-submit (local mode or a cluster, by the Spark connection) or EMR Serverless, by configuration
    dedup = (emr_serverless_dedup_operator("dedup_batch", staged_id, target.name) if deploy_mode() == "emr-serverless"
             else EventDedupSparkSubmitOperator(task_id="dedup_batch", batch_id=staged_id, target=target))
    promoted = promote_batch(plan)
    staged >> dedup >> promoted >> publish_metrics(plan)


for _stream in deployment().streams:
    eventdedup_pipeline(_stream)
