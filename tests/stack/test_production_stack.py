"""The production path, run for real: `python -m eventdedup_dev.stack up` (what `make stack` runs)
starts PostgreSQL, Airflow's api-server, scheduler (LocalExecutor), dag-processor and triggerer,
a Spark standalone master with two one-core workers whose environment cannot import eventdedup,
and the S3 store (SeaweedFS). Nothing here calls dag.test(): Airflow's own scheduler decides what runs.

Two streams run side by side from a folder of stream files (EVENTDEDUP_STREAMS_DIR), each with its
own DAGs, pool, bucket, id and time fields, window and schedule (its file's [schedule], go-live T):
"web" every minute in the bucket `eventdedup`, "mobile" every five minutes in `eventdedup-mobile`
(its jobs share the two-core Spark cluster with web's).
The story of web:
1. the store already holds the batch of [T-4m, T-3m) (an `eventdedup run-batch`);
2. `airflow backfill create --max-active-runs 1` over [T-3m, T) runs those three intervals oldest
   first, while the scheduler starts [T, T+1m), which waits (retries) until [T-1m, T) commits;
3. the scheduler runs at least three consecutive intervals by itself;
4. one promotion COPY of web fails (fault proxy): that run alerts (alert object, log line, SNS on
   moto's local server), the next run halts at check_consistency and alerts once, and while web is
   halted mobile keeps committing its intervals;
5. a person runs `eventdedup recover`; the halted run goes on by itself and the scheduler
   catches up;
6. every committed batch's rows, of both streams, are exactly what the generator's ledger says, by
   the documented rules (keep-first, natural duplicates dropped and audited, bad lines quarantined);
7. every Spark job ran on the master with executors on both workers, from the packaged
   environment; a canary S3 secret never appeared on any command line or in any log.

Time: the scheduler runs on the wall clock, so this test waits for conditions (a commit, an
alert), never for durations, and its assertions do not depend on when things happened: the
fault proxy dates every landing object inside its minute (LIST replies), so which objects a
batch takes depends only on its interval. The waits have generous limits (minutes) for a loaded
2-core machine. Runs only with `-m stack` (make test-stack): ~10 minutes, beyond `make test`'s budget.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import boto3
import orjson
import pytest

from eventdedup.cli import main as cli_main
from eventdedup.s3store import S3Store
from eventdedup_dev.local_s3 import LocalAwsMocks, free_port
from eventdedup_dev.s3_fault_proxy import FaultProxy
from eventdedup_dev.s3_requests import first_request

from ..support.helpers import commit_counts, committed_rows, make_config
from ..support.invariants import assert_commits_are_whole, assert_seen_ids_match_output
from ..support.process_scan import command_lines_watched

pytestmark = pytest.mark.stack

PROJECT = Path(__file__).resolve().parents[2]
ARCHIVE = PROJECT / "dist" / "job" / "eventdedup-job-env.tar.gz"
BUCKET = "eventdedup"
MOBILE_BUCKET = "eventdedup-mobile"
MINUTE = timedelta(minutes=1)
CANARY_ACCESS_KEY = "AKIAEVENTDEDUPSTACKCANARY"
CANARY_SECRET_KEY = "canary-secret/stack+Hq47Tz"
DAG_ID = "eventdedup_web_pipeline"
MOBILE_DAG_ID = "eventdedup_mobile_pipeline"
BUCKETS = 4
# The mobile stream's events: their own id and time fields (its file's [events]); its intervals.
MOBILE_FIELDS = {"id_field": "message_id", "time_field": "sent_at"}
MOBILE_MINUTES = 5


# ---------------------------------------------------------------- the generator and its ledger

def stamp(minute: datetime) -> str:
    return minute.strftime("%Y%m%dT%H%M")


def batch_id(minute: datetime) -> str:
    return minute.strftime("%Y%m%dT%H%M%SZ")


def minute_events(minute: datetime, id_field: str = "event_id", time_field: str = "created_at") -> list[bytes]:
    """Minute m's landing object: six new events, one repeated inside the object, a copy of an
    event of m-1m and one of m-2m (retransmissions across intervals, byte-identical), a bad line."""
    def event(at: datetime, j: int) -> bytes:
        return orjson.dumps({id_field: f"{stamp(at)}-{j}", time_field: at.isoformat(), "n": j})

    new = [event(minute, j) for j in range(6)]
    return [*new, new[2], event(minute - MINUTE, 4), event(minute - 2 * MINUTE, 5),
            f"not json at {stamp(minute)}".encode()]


def landing_key(minute: datetime) -> str:
    return f"landing/{stamp(minute)}/part-0.jsonl"


def landing_date(key: str) -> datetime | None:
    """A landing object of either stream (each bucket's `landing/<minute>/part-0.jsonl`) is dated
    one second into its minute."""
    parts = key.split("/")
    if len(parts) == 3 and parts[0] == "landing" and len(parts[1]) == 13:
        return datetime.strptime(parts[1], "%Y%m%dT%H%M").replace(tzinfo=timezone.utc) + timedelta(seconds=1)
    return None


def expected_rows(batches: list[tuple[str, list[datetime]]], **fields: str) -> dict[str, Any]:
    """The documented rules over the batches (each its id and the minutes whose objects it took) in
    commit order: an id's first copy is emitted in the batch that first sees it; every later copy
    (same bytes) is audited, `in_batch_natural` inside that batch, `cross_batch_natural` in a later
    one; a line that is not JSON is quarantined."""
    seen: set[str] = set()
    data, audit, quarantine = [], [], []
    for batch, minutes in batches:
        for line in (line for minute in minutes for line in minute_events(minute, **fields)):
            try:
                event_id = orjson.loads(line)[fields.get("id_field", "event_id")]
            except orjson.JSONDecodeError:
                quarantine.append((batch, line))
                continue
            if event_id not in seen:
                seen.add(event_id)
                data.append((batch, event_id))
            else:
                first_here = any(b == batch and e == event_id for b, e in data)
                audit.append((batch, event_id, "in_batch_natural" if first_here else "cross_batch_natural"))
    return {"data": sorted(data), "audit": sorted(audit), "quarantine": sorted(quarantine)}


def committed(store: S3Store, config: Any, batches: set[str]) -> dict[str, Any]:
    def rows(kind: str) -> list[dict[str, Any]]:
        return [r for r in committed_rows(store, config, kind) if r["batch_id"] in batches]

    return {"data": sorted((r["batch_id"], r["event_id"]) for r in rows("data")),
            "audit": sorted((r["batch_id"], r["event_id"], r["reason"]) for r in rows("audit")),
            "quarantine": sorted((r["batch_id"], r["raw"]) for r in rows("quarantine"))}


# ---------------------------------------------------------------- the stack

def wait_for(what: str, condition: Callable[[], Any], timeout: float, every: float = 2.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"not within {timeout:.0f} s: {what}")


class Stack:
    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.home, self.env = home, env

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "eventdedup_dev.stack", *args], env=self.env, text=True,
                              capture_output=True, timeout=600)
        assert done.returncode == 0 or not check, f"stack {' '.join(args)}: {done.stdout}{done.stderr[-3000:]}"
        return done

    def airflow(self, *args: str) -> subprocess.CompletedProcess[str]:
        from eventdedup_dev.stack import StackSettings, service_command, stack_secrets

        settings = StackSettings.from_env(self.env)
        _, env = service_command(settings, "airflow-scheduler", stack_secrets(settings))
        done = subprocess.run([sys.executable, "-m", "airflow", *args], env=env, text=True, capture_output=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    def dag_runs(self, dag_id: str = DAG_ID) -> list[dict[str, Any]]:
        out = self.airflow("dags", "list-runs", dag_id, "-o", "json").stdout  # log lines come first
        return list(json.loads(next(line for line in out.splitlines() if line.startswith("[{") or line == "[]")))

    def pid(self, service: str) -> int:
        return int(json.loads((self.home / "pids" / f"{service}.json").read_text())["pid"])


def port_is_free(port: int) -> bool:
    import socket

    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


@pytest.fixture(scope="module")
def go_live() -> datetime:
    """T: two minutes ahead, so the stack is up before its first scheduled interval ends."""
    return datetime.now(timezone.utc).replace(second=0, microsecond=0) + 2 * MINUTE


@pytest.fixture(scope="module")
def scan() -> Iterator[dict[str, object]]:
    with command_lines_watched((CANARY_SECRET_KEY, CANARY_ACCESS_KEY), witness="dedup_batch.py",
                               every_seconds=0.1) as result:
        yield result


@pytest.fixture(scope="module")
def stack(go_live: datetime, scan: dict[str, object]) -> Iterator[Any]:
    assert ARCHIVE.exists(), f"{ARCHIVE} is missing: run `make package` (make test-stack does)"
    # Not under pytest's temporary root: pytest makes that 0700 whenever a session starts, and
    # PostgreSQL, which runs as `postgres` when the tests run as root, must reach its data there.
    home = Path(tempfile.mkdtemp(prefix="eventdedup-stack-"))
    home.chmod(0o711)
    print(f"stack home (logs kept): {home}")
    ports = {name: str(free_port()) for name in ("postgres_port", "s3_port", "api_port", "spark_master_port")}
    ui = free_port()
    while not all(port_is_free(ui + k) for k in (1, 2)):  # the workers' UIs take the next two
        ui = free_port()
    s3_url = f"http://127.0.0.1:{ports['s3_port']}"
    streams = home / "streams"
    streams.mkdir()
    (streams / "web.toml").write_text(
        f'[s3]\nbucket = "{BUCKET}"\n\n[dedup]\nbuckets = {BUCKETS}\nwindow_hours = 24\n\n[spark]\npartitions = 0\n\n'
        f'[schedule]\npipeline_cron = "* * * * *"\nstart_date = {go_live.isoformat()}\n')
    (streams / "mobile.toml").write_text(
        f'[s3]\nbucket = "{MOBILE_BUCKET}"\n\n[events]\nid_field = "{MOBILE_FIELDS["id_field"]}"\n'
        f'time_field = "{MOBILE_FIELDS["time_field"]}"\n\n[dedup]\nbuckets = 2\nwindow_hours = 12\n\n'
        f'[spark]\npartitions = 0\n\n[schedule]\npipeline_cron = "*/{MOBILE_MINUTES} * * * *"\n'
        f'start_date = {go_live.isoformat()}\n')
    with FaultProxy(s3_url) as proxy, LocalAwsMocks() as mocks:
        env = {**os.environ, "EVENTDEDUP_STACK_AWS_MOCKS_ENDPOINT": mocks.endpoint_url, "EVENTDEDUP_STACK_HOME": str(home), "EVENTDEDUP_STACK_SPARK_UI_PORT": str(ui),
               **{f"EVENTDEDUP_STACK_{k.upper()}": v for k, v in ports.items()},
               "EVENTDEDUP_STACK_S3_ENDPOINT": proxy.endpoint_url, "EVENTDEDUP_STACK_LOGIN": "false",
               "EVENTDEDUP_STACK_S3_ACCESS_KEY": CANARY_ACCESS_KEY, "EVENTDEDUP_STACK_S3_SECRET_KEY": CANARY_SECRET_KEY,
               # the pipeline's settings, passed through to Airflow: the streams (each file its own
               # schedule and go-live), each with its store pool (eventdedup_store_<stream>)
               "EVENTDEDUP_STREAMS_DIR": str(streams), "EVENTDEDUP_TASK_RETRIES": "0",
               "EVENTDEDUP_WAIT_RETRIES": "100", "EVENTDEDUP_RETRY_DELAY_SECONDS": "5",
               "EVENTDEDUP_ALERT_SNS_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:eventdedup-alerts"}
        for name in ("EVENTDEDUP_INTERVAL_SECONDS", "EVENTDEDUP_CONFIG", "EVENTDEDUP_SCHEDULE", "EVENTDEDUP_START_DATE"):
            env.pop(name, None)
        stack = Stack(home, env)
        try:
            stack.run("up")
            yield stack, proxy, s3_url, mocks.endpoint_url
        finally:
            stopped = stack.run("down", check=False)
            print(stopped.stdout, stopped.stderr)
            import shutil

            for unpacked in home.glob("spark-worker-*/app-*/*/environment"):  # ~320 MB each; logs stay
                shutil.rmtree(unpacked, ignore_errors=True)


def test_scheduler_backfill_alert_recover_on_a_spark_cluster(stack: Any, go_live: datetime,
                                                            scan: dict[str, object], monkeypatch) -> None:
    stack, proxy, s3_url, mocks_url = stack
    t = go_live
    session = boto3.session.Session(aws_access_key_id=CANARY_ACCESS_KEY, aws_secret_access_key=CANARY_SECRET_KEY,
                                     region_name="us-east-1")
    client = session.client("s3", endpoint_url=s3_url)
    store = S3Store(client, BUCKET)
    config = make_config(s3_url, BUCKET, dedup={"buckets": BUCKETS, "window_hours": 24})
    client.create_bucket(Bucket=MOBILE_BUCKET)
    mobile_store = S3Store(client, MOBILE_BUCKET)
    mobile_config = make_config(s3_url, MOBILE_BUCKET, events=MOBILE_FIELDS, dedup={"buckets": 2, "window_hours": 12})
    sns, sqs = session.client("sns", endpoint_url=mocks_url), session.client("sqs", endpoint_url=mocks_url)
    topic = sns.create_topic(Name="eventdedup-alerts")["TopicArn"]
    queue = sqs.create_queue(QueueName="eventdedup-alerts-inbox")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    published: list[dict[str, Any]] = []

    def alerts_published() -> list[str]:
        for message in sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", []):
            published.append(orjson.loads(message["Body"]))
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
        return [m["Subject"] for m in published]

    # Landing objects for 44 minutes (far more than the test lasts), each dated inside its minute
    # as every task sees it.
    minutes = [t + MINUTE * k for k in range(-4, 40)]
    for minute in minutes:
        store.put_bytes(landing_key(minute), b"".join(line + b"\n" for line in minute_events(minute)))
    # Mobile's intervals are five minutes long, the first from its cron's first tick at or after T;
    # each takes the five objects of its minutes.
    mobile_first = t + MINUTE * (-t.minute % MOBILE_MINUTES)
    for minute in (mobile_first + MINUTE * k for k in range(40)):
        mobile_store.put_bytes(landing_key(minute), b"".join(
            line + b"\n" for line in minute_events(minute, **MOBILE_FIELDS)))
    proxy.redate(landing_date)

    # 1. History: the store's first interval batch, [T-4m, T-3m), by the CLI.
    cli_toml = stack.home / "cli.toml"
    cli_toml.write_text((stack.home / "streams" / "web.toml").read_text().replace(
        f'bucket = "{BUCKET}"', f'bucket = "{BUCKET}"\nendpoint_url = "{proxy.endpoint_url}"'))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", CANARY_ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CANARY_SECRET_KEY)
    seed = t - 4 * MINUTE
    assert cli_main(["run-batch", "--config", str(cli_toml), "--batch-id", batch_id(seed),
                     "--since", seed.isoformat(), "--until", (seed + MINUTE).isoformat()]) == 0

    # 2. The backfill of [T-3m, T), created once T has passed, then the DAG unpaused.
    wait_for("the go-live minute", lambda: datetime.now(timezone.utc) >= t + timedelta(seconds=2), 300, every=1)
    wait_for("both streams' DAGs parsed", lambda: all(
        dag_id in stack.airflow("dags", "list", "-o", "json").stdout for dag_id in (DAG_ID, MOBILE_DAG_ID)), 180)
    stack.airflow("backfill", "create", "--dag-id", DAG_ID, "--from-date", (t - 3 * MINUTE).isoformat(),
                  "--to-date", (t - MINUTE).isoformat(), "--max-active-runs", "1")
    stack.airflow("dags", "unpause", DAG_ID)
    stack.airflow("dags", "unpause", MOBILE_DAG_ID)
    backfilled = [t - 3 * MINUTE, t - 2 * MINUTE, t - MINUTE]
    scheduled = [t, t + MINUTE, t + 2 * MINUTE]

    def committed_batches() -> list[str]:  # in commit order
        return list(commit_counts(store, config))

    def mobile_batches() -> list[str]:
        return list(commit_counts(mobile_store, mobile_config))

    # The waits below are deadlines, not pauses: a passing run goes on as soon as the condition
    # holds. They allow for a shared two-core machine under other work, where one interval's run
    # (four tasks and a Spark job) takes 1.5-2 minutes, and the six intervals here run one by one.
    wait_for("the backfill and three scheduled intervals committed",
             lambda: {batch_id(m) for m in backfilled + scheduled} <= set(committed_batches()), 900, every=5)
    order = committed_batches()
    assert order[:7] == [batch_id(m) for m in [seed, *backfilled, *scheduled]]  # oldest first, contiguous
    runs = {r["run_id"]: r for r in stack.dag_runs()}
    for minute in backfilled:
        assert runs[f"backfill__{(minute + MINUTE).isoformat()}"]["state"] == "success"
    for minute in scheduled:
        assert runs[f"scheduled__{(minute + MINUTE).isoformat()}"]["state"] == "success"
    # The first scheduled run starts while the backfill runs (here it always does: a run takes most
    # of a minute): each of its staging tries before the last was the order refusal, nothing else.
    task_logs = stack.home / "airflow" / "logs" / f"dag_id={DAG_ID}"
    tries = sorted((task_logs / f"run_id=scheduled__{(t + MINUTE).isoformat()}" / "task_id=stage_batch").iterdir(),
                   key=lambda path: int(path.stem.split("=")[1]))
    assert all("must commit first" in attempt.read_text() for attempt in tries[:-1])
    print(f"the first scheduled run staged on try {len(tries)}")

    # 4. One promotion COPY of web fails: that run alerts; the next halts at check_consistency.
    assert alerts_published() == []
    proxy.arm(first_request(lambda request: request.verb == "COPY" and request.bucket == BUCKET,
                            "web's first COPY"), sticky=False)
    failed = wait_for("a promotion_failed alert", lambda: next(
        (orjson.loads(store.get_bytes(o.key)) for o in store.list("alerts/")
         if orjson.loads(store.get_bytes(o.key))["kind"] == "promotion_failed"), None), 400, every=3)
    failed_minute = datetime.strptime(failed["batch_id"], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
    halted_id = batch_id(failed_minute + MINUTE)
    halted = wait_for("the next run halted", lambda: store.get_bytes(f"alerts/{halted_id}.json")
                      if store.head(f"alerts/{halted_id}.json") else None, 300, every=3)
    halted = orjson.loads(halted)
    assert halted["kind"] == "pipeline_halted"
    assert f"batch {failed['batch_id']} can be rolled forward" in halted["message"]
    assert "InjectedCrash" in failed["message"]
    assert wait_for("both alerts on SNS", lambda: len(alerts_published()) >= 2, 120)
    promote_log = task_logs / f"run_id=scheduled__{(failed_minute + MINUTE).isoformat()}" / "task_id=promote_batch"
    assert "EVENTDEDUP_ALERT" in (promote_log / "attempt=1.log").read_text()
    halted_check = task_logs / f"run_id=scheduled__{(failed_minute + 2 * MINUTE).isoformat()}" / "task_id=check_consistency"
    wait_for("the halted run re-checking", lambda: (halted_check / "attempt=2.log").exists(), 120)
    # the halted run keeps re-checking every 5 s; it must not alert again (asserted below)
    assert failed["batch_id"] not in committed_batches() and halted_id not in committed_batches()
    # Meanwhile mobile, in its own pool and store, keeps running: a run it started after web halted
    # (an interval's run starts at the interval's end) commits while web is still halted.
    halted_at = datetime.now(timezone.utc)
    wait_for("a mobile run started after web halted committed", lambda: any(
        datetime.strptime(b, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc) + MOBILE_MINUTES * MINUTE >= halted_at
        for b in mobile_batches()), 600, every=5)  # up to 5 min to its next interval's end, then its run
    assert failed["batch_id"] not in committed_batches() and halted_id not in committed_batches()
    assert list(mobile_store.list("alerts/")) == []

    # 5. A person runs `eventdedup recover`; the scheduler catches up by itself.
    proxy.arm(None)
    assert cli_main(["recover", "--config", str(cli_toml)]) == 0
    catch_up = [failed_minute, failed_minute + MINUTE, failed_minute + 2 * MINUTE]
    wait_for("the halted run and the next one committed",
             lambda: {batch_id(m) for m in catch_up} <= set(committed_batches()), 900, every=5)
    assert alerts_published() == [f"[web] eventdedup promotion failed: batch {failed['batch_id']}",
                                   f"[web] eventdedup pipeline halted: batch {halted_id}"]

    # 6. Exactly the generator's rows, batch by batch, over every committed interval. The scheduler
    # goes on committing: the log is read first, and only those batches' rows are compared.
    order = committed_batches()
    by_id = {batch_id(m): m for m in minutes}
    assert all(b in by_id for b in order), order
    committed_minutes = [by_id[b] for b in order]
    assert committed_minutes == sorted(committed_minutes)
    assert committed_minutes == [seed + MINUTE * k for k in range(len(committed_minutes))]  # no gap
    assert committed(store, config, set(order)) == expected_rows([(batch_id(m), [m]) for m in committed_minutes])
    assert_commits_are_whole(store, config)
    assert_seen_ids_match_output(store, config)
    # Mobile: its five-minute intervals from its first, no gap, its own fields, none of web's events.
    mobile_order = mobile_batches()
    mobile_starts = [datetime.strptime(b, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc) for b in mobile_order]
    assert mobile_starts == [mobile_first + MOBILE_MINUTES * MINUTE * k for k in range(len(mobile_starts))]
    assert committed(mobile_store, mobile_config, set(mobile_order)) == expected_rows(
        [(batch_id(m), [m + MINUTE * k for k in range(MOBILE_MINUTES)]) for m in mobile_starts], **MOBILE_FIELDS)
    assert_commits_are_whole(mobile_store, mobile_config)
    assert_seen_ids_match_output(mobile_store, mobile_config)

    # 7. Spark: every job on the master, executors on both workers, from the packaged environment.
    from eventdedup_dev.stack import WORKERS, StackSettings, http_json

    settings = StackSettings.from_env(stack.env)
    master = http_json(f"http://127.0.0.1:{settings.spark_ui_port}/json/")
    assert isinstance(master, dict)
    # Every committed interval of both streams but web's first (the CLI's) is one finished application
    # (a batch commits after its job ended; the failed promotion's batch was committed by recover, from its job).
    apps = {app["id"] for app in master["completedapps"]}
    jobs_on_cluster = len(committed_minutes) - 1 + len(mobile_starts)
    assert len(apps) >= jobs_on_cluster, (len(apps), jobs_on_cluster)
    for worker in WORKERS:
        state = http_json(f"http://127.0.0.1:{settings.worker_ui_port(worker)}/json/")
        assert isinstance(state, dict)
        ran = {e["appid"] for e in state["finishedexecutors"] + state["executors"]}
        assert apps <= ran, (worker, apps - ran)
        for app in apps:
            executor_dirs = list((stack.home / worker / app).iterdir())
            assert executor_dirs and all((d / "environment" / "bin" / "python").exists() for d in executor_dirs)
        environ = dict(item.split("=", 1) for item in
                       Path(f"/proc/{stack.pid(worker)}/environ").read_text().split("\0") if "=" in item)
        # Neither the host's python3 nor the interpreter the archive's venv links to can import
        # eventdedup in the workers' environment: only the unpacked environment/ can.
        unpacked = next((stack.home / worker).glob("app-*/*/environment/bin/python"))
        for python in ("python3", os.path.realpath(unpacked)):
            alone = subprocess.run([python, "-c", "import eventdedup"], env=environ, capture_output=True, text=True)
            assert alone.returncode != 0 and "No module named 'eventdedup'" in alone.stderr, python
        packed = subprocess.run([str(unpacked), "-c", "import eventdedup"], env=environ, capture_output=True)
        assert packed.returncode == 0, packed.stderr
        # The compiled parse and dedup cores travelled in the archive and load on the workers, as here.
        from eventdedup import native_dedup
        from eventdedup.parse import native_core

        manifest = json.loads((ARCHIVE.parent / "manifest.json").read_text())
        for name, module, loaded in (("parse", "from eventdedup.parse import native_core as core", native_core),
                                     ("dedup", "from eventdedup import native_dedup as core", native_dedup)):
            probe = f"{module}; raise SystemExit(0 if core.available() else 1)"
            core = subprocess.run([str(unpacked), "-c", probe], env=environ, capture_output=True)
            assert core.returncode == (0 if loaded.available() else 1), (name, core.stderr)
            assert manifest[f"native_{name}_core"] == loaded.available(), name

    # The canary: on no command line while everything ran (spark-submit's among those read), in no log.
    assert scan["hits"] == [] and int(str(scan["witnessed"])) >= jobs_on_cluster
    logs = [p for p in stack.home.rglob("*") if p.is_file() and "environment" not in p.parts
            and (p.suffix in (".log", ".out", ".cfg") or p.name in ("stdout", "stderr"))]
    leaked = [str(p) for p in logs if any(c.encode() in p.read_bytes() for c in (CANARY_SECRET_KEY, CANARY_ACCESS_KEY))]
    assert leaked == []
    assert any("dedup_batch" in p.read_text(errors="replace") for p in logs if p.suffix == ".log")

    # The README's picture: EVENTDEDUP_STACK_SCREENSHOT=docs/images/airflow-grid.png make test-stack
    # photographs the grid (scheduled and backfill runs) with Debian's headless Chromium.
    if os.environ.get("EVENTDEDUP_STACK_SCREENSHOT"):
        photograph_grid(settings.api_url, Path(os.environ["EVENTDEDUP_STACK_SCREENSHOT"]))


def photograph_grid(api_url: str, out: Path) -> None:
    import shutil

    chromium = shutil.which("chromium")
    assert chromium, "the screenshot needs Debian's chromium: apt-get install chromium"
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1920,1080", "--virtual-time-budget=25000", f"--screenshot={out.resolve()}",
                    f"{api_url}/dags/{DAG_ID}"], check=True, timeout=180, stderr=subprocess.DEVNULL)
    assert out.stat().st_size > 10_000
