"""The pipeline DAG end to end with `dag.test()`: real Airflow on SQLite, spark-submit in local
mode through SparkSubmitOperator, the tests' S3 server reached through the Airflow connection.

Time is injected, never waited for: intervals are 4 seconds long (EVENTDEDUP_INTERVAL_SECONDS)
from a fixed T0, and the fault proxy in front of the S3 server dates each landing object inside
its interval in LIST replies, so no test depends on when it runs or how fast the machine is.
"""
from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

import orjson

from eventdedup.cli import main as cli_main
from eventdedup.s3store import S3Store

from ..support.helpers import commit_counts, committed_rows, make_config, put_lines
from ..support.process_scan import command_lines_watched
from .conftest import CANARY_ACCESS_KEY, CANARY_SECRET_KEY

STEP = timedelta(seconds=4)
T0 = datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc)  # the first interval's start


def event(event_id: str, minutes_ago: int, **payload: object) -> bytes:
    at = T0 - timedelta(minutes=minutes_ago)
    return orjson.dumps({"event_id": event_id, "created_at": at.isoformat(), **payload})


INTERVALS = [  # landing objects per interval: cross-interval duplicates, a synthetic one, a bad line
    {"a.jsonl": [event("e1", 30), event("e2", 30), event("e1", 30)], "b.jsonl": [event("e3", 29), b"nope"]},
    {"c.jsonl": [event("e2", 30), event("e4", 20), event("e3", 29, v=2)]},
    {"d.jsonl": [event("e5", 10), event("e1", 30)]},
]


def landing_date(key: str) -> datetime | None:
    """Interval i's objects (landing/i<i>/...) are dated one second into [T0 + i*STEP, T0 + (i+1)*STEP)."""
    parts = key.split("/")
    if len(parts) == 3 and parts[0] == "landing" and parts[1][:1] == "i" and parts[1][1:].isdigit():
        return T0 + STEP * int(parts[1][1:]) + timedelta(seconds=1)
    return None


def upload_in_consecutive_intervals(stores: list[S3Store], proxy) -> datetime:  # type: ignore[no-untyped-def]
    """Land interval i's objects, dated inside [T0 + i*STEP, T0 + (i+1)*STEP) as seen through the
    proxy (which every task's S3 client uses); returns T0."""
    for index, objects in enumerate(INTERVALS):
        for name, lines in objects.items():
            for store in stores:
                put_lines(store, f"landing/i{index}/{name}", lines)
    proxy.redate(landing_date)
    return T0


def run_interval(dag, start: datetime, **conf):  # type: ignore[no-untyped-def]
    """dag.test() of the run whose data interval starts at `start`. The params are always given:
    dag.test() keeps a previous run's conf on the shared DAG object otherwise."""
    run = dag.test(logical_date=start + STEP, run_after=start + STEP, run_conf={"batch_id": None, "input_prefix": None, "reprocess": False, "sweep_before": None, **conf})
    return run, {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def batch_id(start: datetime) -> str:
    return start.strftime("%Y%m%dT%H%M%SZ")


def rows(store: S3Store, config) -> dict:  # type: ignore[no-untyped-def]
    return {kind: sorted(map(repr, committed_rows(store, config, kind))) for kind in ("data", "audit", "quarantine")}


@contextmanager
def statsd_listener(monkeypatch) -> Iterator[Callable[[], list[tuple[str, str, str]]]]:  # type: ignore[no-untyped-def]
    """A UDP socket as the StatsD server Airflow's [metrics] configuration names, and the metrics
    backend set up from that configuration as Airflow's task runner sets it up for each task (dag.test()
    runs tasks in this process, where nothing else would). Yields a reader of (name, value, type)."""
    from airflow.sdk.observability.metrics import stats_utils
    from airflow.sdk.observability.stats import Stats

    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    receiver.setblocking(False)
    for key, value in (("STATSD_ON", "True"), ("STATSD_HOST", "127.0.0.1"),
                       ("STATSD_PORT", str(receiver.getsockname()[1])), ("STATSD_PREFIX", "airflow")):
        monkeypatch.setenv(f"AIRFLOW__METRICS__{key}", value)
    Stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=False)
    received: list[tuple[str, str, str]] = []

    def read() -> list[tuple[str, str, str]]:
        while True:
            try:
                packet = receiver.recv(65536).decode()
            except BlockingIOError:
                return received
            for line in packet.splitlines():  # name:value|type[|@rate]
                name, _, rest = line.partition(":")
                value, _, kind = rest.partition("|")
                received.append((name, value, kind.split("|")[0]))

    try:
        yield read
    finally:
        monkeypatch.delenv("AIRFLOW__METRICS__STATSD_ON")
        Stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=False)
        receiver.close()


def test_three_intervals_commit_exactly_what_the_cli_commits_and_order_is_enforced(
        pipeline_dag, pipeline_config, s3_server, bucket, dag_proxy, spark, tmp_path, capfd, monkeypatch) -> None:
    dag_proxy.arm(None)
    store = S3Store(s3_server.client(), bucket)
    twin = f"{bucket}-cli"
    s3_server.client().create_bucket(Bucket=twin)
    twin_store = S3Store(s3_server.client(), twin)
    t0 = upload_in_consecutive_intervals([store, twin_store], dag_proxy)
    starts = [t0 + STEP * i for i in range(len(INTERVALS))]

    capfd.readouterr()
    with command_lines_watched((CANARY_SECRET_KEY, CANARY_ACCESS_KEY), witness="dedup_batch.py") as scan, \
            statsd_listener(monkeypatch) as datagrams:
        for start in starts:
            run, states = run_interval(pipeline_dag, start)
            assert (run.data_interval_start, run.data_interval_end) == (start, start + STEP)
            assert set(states.values()) == {"success"}, states
        received = datagrams()
    # Each batch's counts reached StatsD through Airflow's own [metrics] configuration, summed here
    # per name against the intervals' plan: 10 lines; "nope" quarantined; e1 copied within interval
    # 0; e2 (natural, dropped) and e3 v=2 (synthetic, renamed) in interval 1; e1 again in interval 2.
    counters: dict[str, int] = {}
    gauges: dict[str, list[float]] = {}
    for name, value, kind in received:
        if kind == "c":
            counters[name] = counters.get(name, 0) + int(value)
        elif kind == "g":
            gauges.setdefault(name, []).append(float(value))
    assert {name: counters.get(f"airflow.eventdedup.{name}", 0) for name in (
        "input_lines", "malformed", "in_batch_duplicates", "cross_batch_duplicates", "cross_batch_natural",
        "cross_batch_synthetic", "renamed", "output_rows")} == {
        "input_lines": 10, "malformed": 1, "in_batch_duplicates": 1, "cross_batch_duplicates": 2,
        "cross_batch_natural": 2, "cross_batch_synthetic": 1, "renamed": 1, "output_rows": 6}
    # Gauges per batch: intervals 1 and 2 decided copies against interval 0, which arrived the same
    # hour (4-second intervals); each committed after its as_of.
    assert gauges["airflow.eventdedup.copy_lag.earlier_batches"] == [0.0, 1.0, 1.0]
    assert gauges["airflow.eventdedup.copy_lag.max_arrival_hours"] == [0.0, 0.0, 0.0]
    assert gauges["airflow.eventdedup.copy_lag.copies_over_24_arrival_hours"] == [0.0, 0.0, 0.0]
    assert len(gauges["airflow.eventdedup.batch.latency_seconds"]) == 3
    assert all(seconds > 0 for seconds in gauges["airflow.eventdedup.batch.latency_seconds"])
    # The connection's credentials reached spark-submit's environment, never a command line or a log.
    assert scan["hits"] == [] and int(str(scan["witnessed"])) >= 1  # spark-submit's processes were read
    logged = capfd.readouterr()
    assert "dedup_batch" in logged.out + logged.err
    assert [c for c in (CANARY_SECRET_KEY, CANARY_ACCESS_KEY) if c in logged.out + logged.err] == []

    # The CLI on the same objects, interval by interval: identical committed rows and counts.
    twin_toml = tmp_path / "twin.toml"
    twin_toml.write_text(pipeline_config.read_text().replace(
        f'[s3]\nbucket = "{bucket}"', f'[s3]\nbucket = "{twin}"\nendpoint_url = "{dag_proxy.endpoint_url}"'))
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
    # Its last try (the tests allow no re-checks) gave up waiting: that alerts, once.
    stalled = orjson.loads(store.get_bytes(f"alerts/{batch_id(ahead)}.json"))
    assert (stalled["kind"], stalled["batch_id"]) == ("pipeline_stalled", batch_id(ahead))
    assert "must commit first" in stalled["message"]
    _, states = run_interval(pipeline_dag, starts[0] - STEP)
    assert states["stage_batch"] == "failed", states
    assert f"older than the committed batch {batch_id(starts[-1])}" in capfd.readouterr().out

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
