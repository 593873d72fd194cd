"""The pipeline DAG end to end with `dag.test()`: real Airflow on SQLite, spark-submit in local
mode through SparkSubmitOperator, the tests' S3 server reached through the Airflow connection.

Intervals are 4 seconds long (EVENTDEDUP_INTERVAL_SECONDS) so that landing objects can be
uploaded inside consecutive data intervals without waiting minutes.
"""
from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import orjson

from eventdedup.cli import main as cli_main
from eventdedup.s3store import S3Store

from ..support.helpers import commit_counts, committed_rows, make_config, put_lines

STEP = timedelta(seconds=4)
NOW = datetime.now(timezone.utc)


def event(event_id: str, minutes_ago: int, **payload: object) -> bytes:
    at = (NOW - timedelta(minutes=minutes_ago)).replace(second=0, microsecond=0)
    return orjson.dumps({"event_id": event_id, "created_at": at.isoformat(), **payload})


INTERVALS = [  # landing objects per interval: cross-interval duplicates, a synthetic one, a bad line
    {"a.jsonl": [event("e1", 30), event("e2", 30), event("e1", 30)], "b.jsonl": [event("e3", 29), b"nope"]},
    {"c.jsonl": [event("e2", 30), event("e4", 20), event("e3", 29, v=2)]},
    {"d.jsonl": [event("e5", 10), event("e1", 30)]},
]


def upload_in_consecutive_intervals(stores: list[S3Store]) -> datetime:
    """Upload interval i's objects inside [t0 + i*STEP, t0 + (i+1)*STEP); returns t0."""
    now = time.time()
    t0 = (int(now) // 4 + 1) * 4
    for index, objects in enumerate(INTERVALS):
        time.sleep(max(0.0, t0 + 4 * index + 0.3 - time.time()))
        for name, lines in objects.items():
            for store in stores:
                put_lines(store, f"landing/i{index}/{name}", lines)
        assert time.time() < t0 + 4 * index + 3.5, "uploads overran their interval"
    time.sleep(max(0.0, t0 + 4 * len(INTERVALS) - time.time()))
    return datetime.fromtimestamp(t0, timezone.utc)


def run_interval(dag, start: datetime, **conf):  # type: ignore[no-untyped-def]
    """dag.test() of the run whose data interval starts at `start`. The params are always given:
    dag.test() keeps a previous run's conf on the shared DAG object otherwise."""
    run = dag.test(logical_date=start + STEP, run_conf={"batch_id": None, "input_prefix": None, **conf})
    return run, {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def batch_id(start: datetime) -> str:
    return start.strftime("%Y%m%dT%H%M%SZ")


def rows(store: S3Store, config) -> dict:  # type: ignore[no-untyped-def]
    return {kind: sorted(map(repr, committed_rows(store, config, kind))) for kind in ("data", "audit", "quarantine")}


def test_three_intervals_commit_exactly_what_the_cli_commits_and_order_is_enforced(
        pipeline_dag, pipeline_config, s3_server, bucket, dag_proxy, spark, tmp_path, capfd) -> None:
    dag_proxy.arm(None)
    store = S3Store(s3_server.client(), bucket)
    twin = f"{bucket}-cli"
    s3_server.client().create_bucket(Bucket=twin)
    twin_store = S3Store(s3_server.client(), twin)
    t0 = upload_in_consecutive_intervals([store, twin_store])
    starts = [t0 + STEP * i for i in range(len(INTERVALS))]

    for start in starts:
        run, states = run_interval(pipeline_dag, start)
        assert (run.data_interval_start, run.data_interval_end) == (start, start + STEP)
        assert set(states.values()) == {"success"}, states

    # The CLI on the same objects, interval by interval: identical committed rows and counts.
    twin_toml = tmp_path / "twin.toml"
    twin_toml.write_text(pipeline_config.read_text().replace(
        f'[s3]\nbucket = "{bucket}"', f'[s3]\nbucket = "{twin}"\nendpoint_url = "{s3_server.endpoint_url}"'))
    for start in starts:
        assert cli_main(["run-batch", "--config", str(twin_toml), "--batch-id", batch_id(start),
                         "--since", start.isoformat(), "--until", (start + STEP).isoformat()]) == 0
    config = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 2})
    twin_config = make_config(s3_server.endpoint_url, twin, dedup={"buckets": 2})
    assert rows(store, config) == rows(twin_store, twin_config)
    assert commit_counts(store, config) == commit_counts(twin_store, twin_config)
    assert sorted(commit_counts(store, config)) == sorted(batch_id(s) for s in starts)
    data = committed_rows(store, config, "data")
    assert sorted((r["event_id"], r["original_event_id"]) for r in data if r["original_event_id"] is None) == [
        ("e1", None), ("e2", None), ("e3", None), ("e4", None), ("e5", None)]
    assert [r["original_event_id"] for r in data if r["original_event_id"] is not None] == ["e3"]  # the v=2 copy

    # Out of order: a skipped interval, and a backwards one, fail before any Spark work.
    capfd.readouterr()
    ahead = starts[-1] + STEP * 2
    _, states = run_interval(pipeline_dag, ahead)
    assert states["stage_batch"] == "failed" and states["dedup_batch"] == "upstream_failed", states
    assert f"batch {batch_id(starts[-1] + STEP)} (the interval before it) must commit first" in capfd.readouterr().out
    _, states = run_interval(pipeline_dag, starts[0] - STEP)
    assert states["stage_batch"] == "failed", states
    assert f"older than the committed batch {batch_id(starts[0])}" in capfd.readouterr().out

    # A customer re-publishes everything: a manual batch of that prefix, every event a duplicate.
    for index, objects in enumerate(INTERVALS):
        for name, lines in objects.items():
            put_lines(store, f"landing/republished/{index}-{name}", lines)
    _, states = run_interval(pipeline_dag, starts[-1], batch_id="republish-1", input_prefix="landing/republished/")
    assert set(states.values()) == {"success"}, states
    counts = commit_counts(store, config)["republish-1"]
    assert (counts["output_rows"], counts["input_lines"], counts["malformed"]) == (0, 10, 1)
    audit = [r for r in committed_rows(store, config, "audit") if r["batch_id"] == "republish-1"]
    assert sorted((r["event_id"], r["reason"]) for r in audit) == sorted(
        [(e, "cross_batch_natural") for e in ("e1", "e1", "e1", "e2", "e2", "e3", "e3", "e4", "e5")])
