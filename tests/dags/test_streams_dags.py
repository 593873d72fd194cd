"""Many streams, one deployment: a folder of stream files (EVENTDEDUP_STREAMS_DIR) gives each stream
its own DAGs, and under dag.test() two streams' pipelines, run interleaved in one bucket, each commit
their own batches under their own prefixes; a retraction in one leaves the other's objects as they
were. A broken or colliding stream file is refused as the one import error of
dags/eventdedup_stream_errors.py, and every other stream keeps its DAGs. Without a folder, the one
configuration is a one-stream deployment with today's DAG ids; `make airflow`'s two demo streams
each get their own.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import orjson

from eventdedup.config import load_config
from eventdedup.s3store import S3Store

from ..support.helpers import bucket_listing, commit_counts, committed_rows, put_lines
from .conftest import PROJECT
from .test_pipeline_dag import STEP, T0, batch_id, statsd_listener

KINDS = ("pipeline", "maintenance", "populate", "retract", "reshard")
PREFIXES = ("landing", "output", "cache", "staging", "audit", "quarantine", "commit_log", "state", "manifest",
            "alerts", "reports")


def stream_file(folder: Path, name: str, bucket: str, events: str, window_hours: int) -> Path:
    """A stream whose every prefix lies under `<name>/` of the shared bucket."""
    layout = "".join(f'{prefix}_prefix = "{name}/{prefix}/"\n' for prefix in PREFIXES)
    path = folder / f"{name}.toml"
    path.write_text(f'[s3]\nbucket = "{bucket}"\n[layout]\n{layout}[events]\n{events}\n'
                    f'[dedup]\nbuckets = 2\ncheckpoint_interval = 3\nwindow_hours = {window_hours}\n'
                    '[spark]\npartitions = 2\n[schedule]\npipeline_cron = "*/10 * * * *"\n')
    return path


def web_event(event_id: str, minutes_ago: int) -> bytes:
    return orjson.dumps({"event_id": event_id, "created_at": (T0 - timedelta(minutes=minutes_ago)).isoformat()})


def mobile_event(message_id: str, minutes_ago: int) -> bytes:
    return orjson.dumps({"message_id": message_id, "sent_at": (T0 - timedelta(minutes=minutes_ago)).isoformat(),
                         "app": "ios"})


# Interval i's landing objects per stream. Both streams see an id "e1": each keeps its own first copy.
LANDING = {
    "web": [{"a.jsonl": [web_event("e1", 30), web_event("e2", 30), web_event("e1", 30)]},
            {"b.jsonl": [web_event("e2", 30), web_event("e3", 20)]}],
    "mobile": [{"m.jsonl": [mobile_event("e1", 50), mobile_event("m1", 40)]},
               {"n.jsonl": [mobile_event("e1", 50), mobile_event("m2", 10)]}],
}


def landing_date(key: str) -> datetime | None:
    """`<stream>/landing/i<i>/...` is dated one second into interval i."""
    parts = key.split("/")
    if len(parts) == 4 and parts[1] == "landing" and parts[2][:1] == "i" and parts[2][1:].isdigit():
        return T0 + STEP * int(parts[2][1:]) + timedelta(seconds=1)
    return None


def parse_dags_folder(monkeypatch, folder: Path):  # type: ignore[no-untyped-def]
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("EVENTDEDUP_STREAMS_DIR", str(folder))
    return DagBag(dag_folder=str(PROJECT / "dags"))


def run_interval(dag, start: datetime, **conf):  # type: ignore[no-untyped-def]
    run = dag.test(logical_date=start + STEP, run_after=start + STEP,
                   run_conf={"batch_id": None, "input_prefix": None, "reprocess": False, "sweep_before": None, **conf})
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def rows(store: S3Store, config) -> dict[str, list]:  # type: ignore[no-untyped-def]
    return {"data": sorted((r["batch_id"], r["event_id"]) for r in committed_rows(store, config, "data")),
            "audit": sorted((r["batch_id"], r["event_id"], r["reason"]) for r in committed_rows(store, config, "audit"))}


def test_two_streams_interleaved_commit_into_their_own_prefixes_and_a_retraction_stays_in_its_stream(
        airflow_db, airflow_connections, dag_proxy, s3_server, bucket, tmp_path, monkeypatch) -> None:
    folder = tmp_path / "streams"
    folder.mkdir()
    files = {"web": stream_file(folder, "web", bucket, 'id_field = "event_id"\ntime_field = "created_at"', 24),
             "mobile": stream_file(folder, "mobile", bucket, 'id_field = "message_id"\ntime_field = "sent_at"', 48)}
    bag = parse_dags_folder(monkeypatch, folder)
    assert bag.import_errors == {}
    assert set(bag.dag_ids) == {f"eventdedup_{name}_{kind}" for name in files for kind in KINDS}
    pipelines = {name: bag.get_dag(f"eventdedup_{name}_pipeline") for name in files}
    assert "stream:web" in pipelines["web"].tags and "stream:mobile" in pipelines["mobile"].tags

    dag_proxy.arm(None)
    store = S3Store(s3_server.client(), bucket)
    for name, intervals in LANDING.items():
        for index, objects in enumerate(intervals):
            for object_name, lines in objects.items():
                put_lines(store, f"{name}/landing/i{index}/{object_name}", lines)
    dag_proxy.redate(landing_date)
    starts = [T0, T0 + STEP]
    with statsd_listener(monkeypatch) as datagrams:
        for start in starts:  # interleaved: web, mobile, web, mobile
            for name in ("web", "mobile"):
                states = run_interval(pipelines[name], start)
                assert set(states.values()) == {"success"}, (name, start, states)
        received = datagrams()
    # Each stream's metrics under its own name: never summed into one series.
    lines = {name: sum(int(value) for metric, value, kind in received
                       if metric == f"airflow.eventdedup.{name}.input_lines" and kind == "c") for name in files}
    assert lines == {"web": 5, "mobile": 4}
    assert not [metric for metric, _, _ in received if metric == "airflow.eventdedup.input_lines"]

    configs = {name: load_config(path, {"EVENTDEDUP_S3__ENDPOINT_URL": s3_server.endpoint_url})
               for name, path in files.items()}
    first, second = batch_id(starts[0]), batch_id(starts[1])
    # The same interval ids, committed in each stream's own log, each batch from its own landing objects.
    for name in files:
        assert list(commit_counts(store, configs[name])) == [first, second]
    expected = {
        "web": {"data": sorted([(first, "e1"), (first, "e2"), (second, "e3")]),
                "audit": sorted([(first, "e1", "in_batch_natural"), (second, "e2", "cross_batch_natural")])},
        "mobile": {"data": sorted([(first, "e1"), (first, "m1"), (second, "m2")]),
                   "audit": [(second, "e1", "cross_batch_natural")]},
    }
    assert {name: rows(store, configs[name]) for name in files} == expected
    assert all(key.split("/", 1)[0] in files for key in bucket_listing(store)), sorted(bucket_listing(store))

    # Web's latest batch retracted by web's own operations DAG: mobile's objects stay as they were.
    mobile_before = {key: etag for key, etag in bucket_listing(store).items() if key.startswith("mobile/")}
    retract = bag.get_dag("eventdedup_web_retract")
    run = retract.test(logical_date=starts[1] + 3 * STEP, run_after=starts[1] + 3 * STEP,
                       run_conf={"batch_id": second, "reason": "republished", "cascade": False})
    assert {ti.task_id: str(ti.state) for ti in run.get_task_instances()} == {"retract": "success"}
    assert rows(store, configs["web"]) == {"data": sorted([(first, "e1"), (first, "e2")]),
                                           "audit": [(first, "e1", "in_batch_natural")]}
    assert rows(store, configs["mobile"]) == expected["mobile"]
    assert {key: etag for key, etag in bucket_listing(store).items() if key.startswith("mobile/")} == mobile_before


def test_a_broken_and_two_colliding_stream_files_are_one_import_error_and_the_good_stream_keeps_its_dags(
        airflow_db, tmp_path, monkeypatch) -> None:
    folder = tmp_path / "streams"
    folder.mkdir()
    (folder / "web.toml").write_text('[s3]\nbucket = "web-events"\n')
    (folder / "app.toml").write_text('[s3]\nbucket = "shared-events"\n[layout]\noutput_prefix = "app/deduped/"\n')
    # Its output lies inside app's: the two would write the same objects.
    (folder / "app_eu.toml").write_text('[s3]\nbucket = "shared-events"\n[layout]\noutput_prefix = "app/"\n'
                                        'landing_prefix = "eu/landing/"\n' + "".join(
                                            f'{p}_prefix = "eu/{p}/"\n' for p in PREFIXES[2:]))
    (folder / "broken.toml").write_text('[s3]\nbucket = "broken-events"\n[dedup]\nwindow_hours = "a week"\n')
    (folder / "late.toml").write_text('[s3]\nbucket = "late-events"\n[schedule]\npipeline_cron = "61 * * * *"\n')
    (folder / "notes.txt").write_text("not a stream")
    bag = parse_dags_folder(monkeypatch, folder)
    assert set(bag.dag_ids) == {f"eventdedup_web_{kind}" for kind in KINDS}
    assert list(bag.import_errors) == [str(PROJECT / "dags" / "eventdedup_stream_errors.py")]
    error = bag.import_errors[str(PROJECT / "dags" / "eventdedup_stream_errors.py")]
    assert f"3 problem(s) in the streams folder {folder}" in error
    assert (f"{folder / 'app.toml'} and {folder / 'app_eu.toml'} would write where the other reads or writes, so "
            "neither runs: [layout] app's output_prefix s3://shared-events/app/deduped/ and app_eu's output_prefix "
            "s3://shared-events/app/.") in error
    assert f"{folder / 'broken.toml'}: [dedup] window_hours must be an integer, got 'a week'" in error
    assert f"{folder / 'late.toml'}: [schedule] pipeline_cron: [61 * * * *] is not acceptable, out of range" in error
    assert "notes.txt" not in error


def test_the_one_configuration_is_a_one_stream_deployment_with_todays_dag_ids(airflow_db, monkeypatch) -> None:
    """Without a streams folder the DAGs run the file EVENTDEDUP_CONFIG names, as before: today's ids,
    the deployment's store pool itself, today's Asset, no stream tag, and no import error."""
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.delenv("EVENTDEDUP_STREAMS_DIR", raising=False)
    monkeypatch.setenv("EVENTDEDUP_CONFIG", str(PROJECT / "conf" / "eventdedup.airflow.toml"))
    monkeypatch.setenv("EVENTDEDUP_STORE_POOL", "eventdedup_store")
    monkeypatch.setenv("EVENTDEDUP_OUTPUT_ASSET", "s3://eventdedup/deduped/")
    bag = DagBag(dag_folder=str(PROJECT / "dags"))
    assert bag.import_errors == {}
    assert set(bag.dag_ids) == {f"eventdedup_{kind}" for kind in KINDS}
    pipeline = bag.get_dag("eventdedup_pipeline")
    assert not [tag for dag in bag.dags.values() for tag in dag.tags if tag.startswith("stream:")]
    assert {task.pool for task in pipeline.tasks} == {"eventdedup_store", "default_pool"}
    # (Airflow drops the URI's trailing /)
    assert [asset.uri for task in pipeline.tasks for asset in task.outlets] == ["s3://eventdedup/deduped"]
    maintenance = bag.get_dag("eventdedup_maintenance")
    assert [task.trigger_dag_id for task in maintenance.tasks if hasattr(task, "trigger_dag_id")] == [
        "eventdedup_pipeline"]


def test_make_airflows_two_demo_streams_have_their_own_fields_windows_schedules_and_pools(
        airflow_db, monkeypatch) -> None:
    """conf/demo-streams/, which `make airflow` runs (scripts/airflow_standalone.py copies it to
    .demo/standalone/streams/ and creates every stream's bucket and pool from it)."""
    from eventdedup.streams import read_stream_folder
    from eventdedup_dev.stack import store_pools

    folder = PROJECT / "conf" / "demo-streams"
    monkeypatch.setenv("EVENTDEDUP_STORE_POOL", "eventdedup_store")
    monkeypatch.delenv("EVENTDEDUP_INTERVAL_SECONDS")  # the tests' seconds-long intervals: each stream's cron here
    found = read_stream_folder(folder, {})
    assert found.errors == ()
    settings = {stream.name: (stream.config.s3.bucket, stream.config.events.id_field,
                              stream.config.events.time_field, stream.config.dedup.window_hours)
                for stream in found.streams}
    assert settings == {"mobile": ("mobile-events", "message_id", "sent_at", 72),
                        "web": ("web-events", "event_id", "created_at", 24)}
    assert set(store_pools({"EVENTDEDUP_STREAMS_DIR": str(folder)})) == {
        "eventdedup_store", "eventdedup_store_mobile", "eventdedup_store_web"}
    bag = parse_dags_folder(monkeypatch, folder)
    assert bag.import_errors == {}
    assert set(bag.dag_ids) == {f"eventdedup_{name}_{kind}" for name in settings for kind in KINDS}
    schedules = {name: bag.get_dag(f"eventdedup_{name}_pipeline").timetable for name in settings}
    assert {name: timetable.expression for name, timetable in schedules.items()} == {
        "web": "*/5 * * * *", "mobile": "*/10 * * * *"}
    assert {task.pool for task in bag.get_dag("eventdedup_mobile_pipeline").tasks} == {
        "eventdedup_store_mobile", "default_pool"}
