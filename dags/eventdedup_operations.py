"""Operating the cache, triggered by hand with params (Trigger DAG w/ config in the UI):

- `eventdedup_populate` (`source_prefix`, optional `batch_id`): cold start. The populate batch
  (eventdedup.ops.populate) is handed to a run of the pipeline DAG, like the sweep: its Spark job
  and promotion run there, serialised with the interval runs, alerting like any batch.
- `eventdedup_retract` (`batch_id`, `reason`, `cascade`): takes a committed batch out of the
  committed view (eventdedup.ops.retract) so its input can be processed again as new.
- `eventdedup_reshard` (`buckets`, optional `effective_from`): grows the cache's bucket count from
  an hour boundary on (eventdedup.ops.reshard). A configuration that sets `[dedup] buckets` must
  then set the new count; one that leaves it unset follows the cache.

Retract and reshard commit to the log like a batch; each checks consistency first and alerts
(alert object, log line, SNS/e-mail when configured) when it fails. Pause the pipeline DAG while
they run: a pipeline batch computed before their commit is refused as stale and must be rerun.
One set per stream (plugins/eventdedup_streams.py): these ids, or `eventdedup_<stream>_populate`,
`_retract` and `_reshard` for each file of the streams folder, each working on its stream's store.

Wiring only: the rules are in the library. Parsing opens no connection.
"""
from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import Param, dag, get_current_context, task
from eventdedup_streams import DeployedStream, deployment

# Triggered by hand only (schedule=None on each). Retries are safe: each operation is idempotent.
_COMMON: dict[str, Any] = {
    "start_date": datetime(2026, 11, 1, tzinfo=timezone.utc), "catchup": False, "max_active_runs": 1,
    "doc_md": __doc__,
    "default_args": {"retries": int(os.environ.get("EVENTDEDUP_TASK_RETRIES", "2")),
                     "retry_delay": timedelta(seconds=int(os.environ.get("EVENTDEDUP_RETRY_DELAY_SECONDS", "60")))}}


def eventdedup_populate(stream: DeployedStream) -> None:
    @dag(dag_id=stream.dag_id("populate"), description=stream.description, schedule=None,
         tags=stream.tags("operations"),
         params={"source_prefix": Param("deduped/", type="string", description="the dataset to commit to the cache"),
                 "batch_id": Param(None, type=["null", "string"],
                                   description="default: populate-<hash of the prefix and its objects>")},
         **_COMMON)
    def populate() -> None:
        populate_tasks(stream)

    populate()


def populate_tasks(stream: DeployedStream) -> None:
    target = stream.target

    @task
    def plan_populate() -> dict[str, Any]:
        """The populate batch's id and the pipeline params that process it."""
        from eventdedup_airflow import alert_and_raise, load_pipeline_config, s3_store

        from eventdedup.ops.populate import plan_populate

        context = get_current_context()
        params = context["params"]
        config = load_pipeline_config(target)
        with alert_and_raise(str(params.get("batch_id") or "populate"), "populate_failed", context, target=target):
            plan = plan_populate(s3_store(config), config, str(params["source_prefix"]), params.get("batch_id"))
        return {"batch_id": plan.batch_id, "input_prefix": plan.selector.input_prefix, "populate": True}

    planned = plan_populate()
    process_populate = TriggerDagRunOperator(
        task_id="process_populate", trigger_dag_id=stream.dag_id("pipeline"),
        trigger_run_id="populate__{{ ti.xcom_pull(task_ids='plan_populate')['batch_id'] }}",
        conf={"batch_id": "{{ ti.xcom_pull(task_ids='plan_populate')['batch_id'] }}",
              "input_prefix": "{{ ti.xcom_pull(task_ids='plan_populate')['input_prefix'] }}", "populate": True},
        skip_when_already_exists=True)
    planned >> process_populate


def eventdedup_retract(stream: DeployedStream) -> None:
    @dag(dag_id=stream.dag_id("retract"), description=stream.description, schedule=None,
         tags=stream.tags("operations"),
         params={"batch_id": Param("", type="string", description="the committed batch to retract"),
                 "reason": Param("", type="string", description="why: recorded in the retraction's commit"),
                 "cascade": Param(False, type="boolean",
                                  description="also retract later batches that decided duplicates against it")},
         **_COMMON)
    def retract_dag() -> None:
        retract_task(stream)

    retract_dag()


def retract_task(stream: DeployedStream) -> None:
    @task(pool=stream.pool)
    def retract() -> dict[str, Any]:
        from eventdedup_airflow import store_operation

        from eventdedup.ops.retract import retract_batch

        context = get_current_context()
        params = context["params"]
        with store_operation(str(params["batch_id"]), "retraction_failed", context, stream.target) as (config, store):
            outcome = retract_batch(store, config, str(params["batch_id"]), str(params["reason"]),
                                    context["dag_run"].run_after, bool(params["cascade"]))
        return {"retraction_id": outcome.retraction_id, "version": outcome.version,
                "retracted": list(outcome.retracted), "newly_committed": outcome.newly_committed}

    retract()


def eventdedup_reshard(stream: DeployedStream) -> None:
    @dag(dag_id=stream.dag_id("reshard"), description=stream.description, schedule=None,
         tags=stream.tags("operations"),
         params={"buckets": Param(0, type="integer", description="the new count: a multiple of the current one"),
                 "effective_from": Param(None, type=["null", "string"], description="a whole hour (ISO-8601 with "
                                         "offset); default: the earliest safe")},
         **_COMMON)
    def reshard_dag() -> None:
        reshard_task(stream)

    reshard_dag()


def reshard_task(stream: DeployedStream) -> None:
    @task(pool=stream.pool)
    def reshard() -> dict[str, Any]:
        from eventdedup_airflow import store_operation

        from eventdedup.ops.reshard import reshard as grow

        context = get_current_context()
        params = context["params"]
        effective = params.get("effective_from")
        with store_operation(f"reshard-{params['buckets']}", "reshard_failed", context,
                             stream.target) as (config, store):
            outcome = grow(store, config, int(params["buckets"]), context["dag_run"].run_after,
                           datetime.fromisoformat(effective) if effective else None)
        return {"reshard_id": outcome.reshard_id, "version": outcome.version, "from": outcome.from_text,
                "buckets": outcome.buckets, "newly_committed": outcome.newly_committed}

    reshard()


for _stream in deployment().streams:
    eventdedup_populate(_stream)
    eventdedup_retract(_stream)
    eventdedup_reshard(_stream)
