"""The operations DAGs under dag.test(): populate (through a pipeline run, as the scheduler would
run the one it triggers), retract and reshard, each with params, and the alert of a refused one."""
from __future__ import annotations

import io
from datetime import datetime, timezone

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from eventdedup.commit.log import load_committed_state
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.pipeline import run_batch
from eventdedup.s3store import S3Store

from ..support.helpers import committed_rows, make_config, put_lines
from .conftest import PROJECT

NOW = datetime(2026, 11, 2, 10, 30, tzinfo=timezone.utc)  # injected: the test never reads the clock
LINES = [orjson.dumps({"event_id": f"h{i}", "created_at": f"2026-11-01T0{i % 5}:10:00Z"}) for i in range(12)]


def _operations(dag_id: str):  # type: ignore[no-untyped-def]
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(PROJECT / "dags" / "eventdedup_operations.py"))
    assert bag.import_errors == {}
    return bag.get_dag(dag_id)


def _states(run) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def test_populate_dag_hands_the_batch_to_a_pipeline_run_and_its_events_are_seen(
        airflow_db, airflow_connections, pipeline_dag, dag_proxy, pipeline_config, s3_server, bucket, spark) -> None:
    from airflow.models.dagrun import DagRun

    dag_proxy.arm(None)
    store = S3Store(s3_server.client(), bucket)
    sink = io.BytesIO()
    pq.write_table(pa.table({"raw": [line.decode() for line in LINES]}), sink)
    store.put_bytes("legacy/part-0.parquet", sink.getvalue())
    run = _operations("eventdedup_populate").test(logical_date=NOW, run_after=NOW,
                                                  run_conf={"source_prefix": "legacy/", "batch_id": None})
    assert _states(run) == {"plan_populate": "success", "process_populate": "success"}
    planned = run.get_task_instance("plan_populate").xcom_pull(task_ids="plan_populate")
    assert planned["batch_id"].startswith("populate-") and planned["populate"] is True
    triggered = DagRun.find(dag_id="eventdedup_pipeline", run_id=f"populate__{planned['batch_id']}")
    assert len(triggered) == 1
    conf = dict(triggered[0].conf)
    assert conf == {"batch_id": planned["batch_id"], "input_prefix": "legacy/", "populate": True}
    pipeline_run = pipeline_dag.test(logical_date=NOW, run_after=NOW,
                                     run_conf={"reprocess": False, "sweep_before": None, **conf})
    assert {str(ti.state) for ti in pipeline_run.get_task_instances()} == {"success"}
    config = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 2, "checkpoint_interval": 3},
                         spark={"partitions": 2})
    state = load_committed_state(store, Layout(config.layout))
    assert list(state.batches) == [planned["batch_id"]] and committed_rows(store, config, "data") == []
    put_lines(store, "landing/again/1.jsonl", LINES[:3] + [b'{"event_id":"new","created_at":"2026-11-02T09:00:00Z"}'])
    run_batch(store, config, "again", InputSelector(input_prefix="landing/again/"), NOW, lambda: spark)
    assert [row["event_id"] for row in committed_rows(store, config, "data")] == ["new"]
    assert sorted(row["kept_in_batch"] for row in committed_rows(store, config, "audit")) == [planned["batch_id"]] * 3


def test_retract_and_reshard_dags_commit_and_a_refused_retraction_alerts(
        airflow_db, airflow_connections, dag_proxy, pipeline_config, s3_server, bucket, spark) -> None:
    dag_proxy.arm(None)
    store = S3Store(s3_server.client(), bucket)
    config = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 2, "checkpoint_interval": 3},
                         spark={"partitions": 2})
    for batch_id, lines in (("b1", LINES[:6]), ("x", LINES[6:])):
        put_lines(store, f"landing/{batch_id}/1.jsonl", lines)
        run_batch(store, config, batch_id, InputSelector(input_prefix=f"landing/{batch_id}/"), NOW, lambda: spark)
    retract = _operations("eventdedup_retract")
    run = retract.test(logical_date=NOW, run_after=NOW, run_conf={"batch_id": "x", "reason": "wrong prefix",
                                                                  "cascade": False})
    assert _states(run) == {"retract": "success"}
    assert sorted(row["event_id"] for row in committed_rows(store, config, "data")) == sorted(
        orjson.loads(line)["event_id"] for line in LINES[:6])
    refused = retract.test(logical_date=NOW, run_after=NOW, run_conf={"batch_id": "nothing", "reason": "typo",
                                                                      "cascade": False})
    assert _states(refused) == {"retract": "failed"}
    alert = orjson.loads(store.get_bytes("alerts/nothing.json"))
    assert alert["kind"] == "retraction_failed" and "not committed" in alert["message"]

    run = _operations("eventdedup_reshard").test(logical_date=NOW, run_after=NOW,
                                                 run_conf={"buckets": 4, "effective_from": None})
    assert _states(run) == {"reshard": "success"}
    state = load_committed_state(store, Layout(config.layout))
    assert [buckets for _, buckets in state.bucket_cutovers] == [4] and state.retracted == {"x": 3}
