"""The maintenance DAG under dag.test(): expiry, the consistency check, fsck and the sweep of
unconsumed landing objects (with its Spark job), against the real store."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import orjson

from eventdedup.inputs.selector import InputSelector
from eventdedup.keys import bucket_of, key_digest
from eventdedup.ops.pipeline import run_batch
from eventdedup.s3store import S3Store

from ..support.helpers import bucket_listing, committed_rows, make_config, put_lines
from .conftest import PROJECT


def test_maintenance_run_deletes_superseded_segments_and_passes_the_check(
        airflow_db, airflow_connections, pipeline_dag, dag_proxy, pipeline_config, s3_server, bucket, spark) -> None:
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.dagrun import DagRun

    dag_proxy.arm(None)
    now = datetime(2026, 11, 2, 10, 30, tzinfo=timezone.utc)  # injected: the test never reads the clock
    at = (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:10:00Z").encode()
    store = S3Store(s3_server.client(), bucket)
    config = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 2, "checkpoint_interval": 3})
    # Two batches writing the same (hour, bucket): the second supersedes the first's segment.
    second = next(f"b{i}" for i in range(100) if bucket_of(key_digest(f"b{i}"), 2) == bucket_of(key_digest("a"), 2))
    for batch, event_id in (("m1", b"a"), ("m2", second.encode())):
        put_lines(store, f"landing/{batch}/1.jsonl", [b'{"event_id":"%s","created_at":"%s"}' % (event_id, at)])
        run_batch(store, config, batch, InputSelector(input_prefix=f"landing/{batch}/"), now, lambda: spark)
    # The interval pipeline has reached `now` (an empty interval): the sweep looks behind its lookback.
    run_batch(store, config, f"{now - timedelta(minutes=5):%Y%m%dT%H%M%SZ}",
              InputSelector(since=now - timedelta(minutes=5), until=now), now, lambda: spark)
    before = sorted(k for k in bucket_listing(store) if k.endswith(".seg"))
    # An object no batch consumed, dated ten hours back (older than the 3-hour lookback): the sweep's.
    put_lines(store, "landing/late/old.jsonl", [b'{"event_id":"late","created_at":"%s"}' % at])
    dag_proxy.redate({"landing/late/old.jsonl": now - timedelta(hours=10)}.get)

    dag = DagBag(dag_folder=str(PROJECT / "dags" / "eventdedup_maintenance.py")).get_dag("eventdedup_maintenance")
    run = dag.test(logical_date=now, run_after=now)
    assert {ti.task_id: str(ti.state) for ti in run.get_task_instances()} == {
        "expire_cache": "success", "maintain_view_index": "success", "maintain_delta_table": "success",
        "check_consistency": "success",
        "fsck_committed_objects": "success", "write_report": "success",
        "sweep_unconsumed_inputs": "success", "process_sweep": "success"}
    # The report: a manual run's data interval is a moment, so the day before it, published under its
    # range's name and as latest (what the plugin links). That day held none of this test's commits
    # (the store dates them by its own clock): a report's content is tests/integration/test_report.py's.
    latest = orjson.loads(store.get_bytes("reports/latest.json"))
    assert latest["range"] == {"since": (now - timedelta(days=1)).isoformat(), "until": now.isoformat()}
    named = f"reports/{now - timedelta(days=1):%Y%m%dT%H%M%SZ}-{now:%Y%m%dT%H%M%SZ}"
    assert store.get_bytes(f"{named}.json") == store.get_bytes("reports/latest.json")
    assert b'<svg class="chart"' in store.get_bytes(f"{named}.html") == store.get_bytes("reports/latest.html")
    sweep_batch = f"sweep-{now - timedelta(hours=3):%Y%m%dT%H%M%SZ}"  # the log's time less the lookback
    alert = orjson.loads(store.get_bytes(f"alerts/{sweep_batch}.json"))
    assert alert["kind"] == "unconsumed_inputs" and f"s3://{bucket}/landing/late/old.jsonl" in alert["message"]
    # The sweep batch is processed by a pipeline run (serialised with the interval runs): the
    # triggered run, as the scheduler would execute it, with its conf as params.
    triggered = DagRun.find(dag_id="eventdedup_pipeline", run_id=f"sweep__{sweep_batch}")
    assert len(triggered) == 1
    conf = dict(triggered[0].conf)
    assert conf == {"batch_id": sweep_batch, "sweep_before": (now - timedelta(hours=3)).isoformat()}
    pipeline_run = pipeline_dag.test(logical_date=now, run_after=now,
                                     run_conf={"input_prefix": None, "reprocess": False, **conf})
    assert {str(ti.state) for ti in pipeline_run.get_task_instances()} == {"success"}
    assert [(r["event_id"], r["batch_id"]) for r in committed_rows(store, config, "data")
            if r["batch_id"] == sweep_batch] == [("late", sweep_batch)]
    after = sorted(k for k in bucket_listing(store) if k.endswith(".seg") and not k.endswith(f"/{sweep_batch}.seg"))
    superseded = [k for k in before if k.endswith("/m1.seg") and k.replace("/m1.seg", "/m2.seg") in before]
    assert len(superseded) == 1 and after == sorted(set(before) - set(superseded))

    # A lifecycle rule deletes a committed output object: the next maintenance run's fsck fails and alerts.
    lost = sorted(k for k in bucket_listing(store) if k.startswith("deduped/date="))[0]
    store.delete_keys([lost])
    later = now + timedelta(days=1)
    run = dag.test(logical_date=later, run_after=later)
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert states["fsck_committed_objects"] == "failed"
    assert states["sweep_unconsumed_inputs"] == "skipped" and states["process_sweep"] == "skipped"  # swept once
    alert = orjson.loads(store.get_bytes(f"alerts/maintenance-{later:%Y%m%d}.json"))
    assert alert["kind"] == "fsck_failed" and f"missing: data {lost}" in alert["message"]
