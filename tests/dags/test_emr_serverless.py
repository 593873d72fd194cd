"""The dedup job submitted to EMR Serverless (plugins/eventdedup_emr.py), wired end to end against
moto's EMR Serverless backend (the AWS API mocks beside the S3 store): a two-task DAG under dag.test() (the
batch id comes from XCom, as in the pipeline), then the job run read back with boto3.

moto records the request and reports the run SUCCESS at once: what is proven is the API calls
(application started, StartJobRun's exact job driver, role, name, timeout, logs; no credential
in it; the wait for the end state). A real run on EMR Serverless cannot be tested here."""
from __future__ import annotations

import json
import socket
from datetime import datetime, timezone
from pathlib import Path

import pytest

BATCH_ID = "20261122T0500Z"
ACCOUNT = "123456789012"  # moto's account: StartJobRun refuses a role of another account
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/eventdedup-emr-job"
JOB_ROOT = "s3://eventdedup-artifacts/jobs/eventdedup/"  # a trailing slash, as people write prefixes
LOG_URI = "s3://eventdedup-artifacts/emr-logs"
ACCESS_KEY = "AKIAEVENTDEDUPEMRCANARY"
SECRET_KEY = "canary-secret/emr+Zq81Wd"


def expected_job_driver(root: str, batch_id: str) -> dict[str, object]:
    """The job driver from the documented rules, written out independently of the module: AWS's
    venv recipe (archive #environment, driver and executor interpreters inside it) and the
    configuration shipped in the same --archives list, read by the job as ./eventdedup.toml."""
    python = "./environment/bin/python"
    return {"sparkSubmit": {
        "entryPoint": f"{root}/dedup_batch.py",
        "entryPointArguments": ["--config", "eventdedup.toml", "--batch-id", batch_id],
        "sparkSubmitParameters":
            f"--archives {root}/eventdedup-job-env.tar.gz#environment,{root}/eventdedup.toml#eventdedup.toml"
            f" --conf spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON={python}"
            f" --conf spark.emr-serverless.driverEnv.PYSPARK_PYTHON={python}"
            f" --conf spark.executorEnv.PYSPARK_PYTHON={python}",
    }}


@pytest.fixture
def emr(aws_mocks):  # type: ignore[no-untyped-def]
    return aws_mocks.client("emr-serverless")


@pytest.fixture
def emr_env(monkeypatch, aws_mocks, emr):  # type: ignore[no-untyped-def]
    """A stopped SPARK application (the operator must start it) and the deploy's variables, with
    the EMR API reached through an Airflow connection of its own holding canary credentials."""
    app = emr.create_application(name="eventdedup-test", releaseLabel="emr-7.9.0", type="SPARK")["applicationId"]
    emr.stop_application(applicationId=app)
    monkeypatch.setenv("AIRFLOW_CONN_EVENTDEDUP_EMR_TEST", json.dumps({
        "conn_type": "aws", "login": ACCESS_KEY, "password": SECRET_KEY,
        "extra": {"endpoint_url": aws_mocks.endpoint_url, "region_name": "us-east-1"}}))
    monkeypatch.setenv("EVENTDEDUP_AWS_CONN_ID", "eventdedup_emr_test")
    monkeypatch.setenv("EVENTDEDUP_SPARK_DEPLOY", "emr-serverless")
    monkeypatch.setenv("EVENTDEDUP_EMR_APPLICATION_ID", app)
    monkeypatch.setenv("EVENTDEDUP_EMR_EXECUTION_ROLE_ARN", ROLE_ARN)
    monkeypatch.setenv("EVENTDEDUP_EMR_JOB_ROOT", JOB_ROOT)
    monkeypatch.setenv("EVENTDEDUP_EMR_LOG_URI", LOG_URI)
    return app


def test_dedup_task_starts_the_emr_serverless_job_run_with_the_packaged_job(airflow_db, emr_env, emr,
                                                                            monkeypatch, tmp_path) -> None:
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from airflow.sdk import DAG, task
    from eventdedup_emr import deploy_mode, emr_serverless_dedup_operator

    assert deploy_mode() == "emr-serverless"
    with DAG("eventdedup_emr_wiring", schedule=None, start_date=datetime(2026, 11, 1, tzinfo=timezone.utc)) as dag:
        @task
        def stage_batch() -> str:
            return BATCH_ID

        with monkeypatch.context() as parse_time:  # building the task is DAG parsing: no connection
            def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
                raise AssertionError("network access while building the task")
            parse_time.setattr(socket.socket, "connect", refuse)
            dedup = emr_serverless_dedup_operator("dedup_batch", "{{ ti.xcom_pull(task_ids='stage_batch') }}")
        stage_batch() >> dedup
    # dag.test() runs DAGs the metadata database knows; this one is in no bundle (the test is not
    # in dags/): written there as the DAG processor would, under the dags-folder bundle's name.
    DagBundlesManager().sync_bundles_to_db()
    bag = DagBag(dag_folder=str(tmp_path), collect_dags=False)
    bag.bag_dag(dag)
    sync_bag_to_db(bag, "dags-folder", None)

    run = dag.test(logical_date=datetime(2026, 11, 22, 5, 0, tzinfo=timezone.utc))
    assert {ti.task_id: str(ti.state) for ti in run.get_task_instances()} == {
        "stage_batch": "success", "dedup_batch": "success"}

    assert emr.get_application(applicationId=emr_env)["application"]["state"] == "STARTED"
    runs = emr.list_job_runs(applicationId=emr_env)["jobRuns"]
    assert len(runs) == 1
    job = emr.get_job_run(applicationId=emr_env, jobRunId=runs[0]["id"])["jobRun"]
    root = JOB_ROOT.rstrip("/")
    assert job["jobDriver"] == expected_job_driver(root, BATCH_ID)
    assert job["executionRole"] == ROLE_ARN
    assert job["name"] == f"eventdedup-{BATCH_ID}"
    assert job["executionTimeoutMinutes"] == 120  # the operator's wait: 240 polls, 30 s apart
    assert job["configurationOverrides"] == {
        "monitoringConfiguration": {"s3MonitoringConfiguration": {"logUri": f"{LOG_URI}/"}}}
    # The job runs with its execution role: the connection's keys go nowhere near it.
    request = json.dumps(job, default=str)
    assert ACCESS_KEY not in request and SECRET_KEY not in request and "AWS_" not in request


def test_deploy_mode_defaults_to_spark_submit_and_refuses_unknown_modes(monkeypatch) -> None:
    from eventdedup_emr import deploy_mode

    monkeypatch.delenv("EVENTDEDUP_SPARK_DEPLOY", raising=False)
    assert deploy_mode() == "spark-submit"
    monkeypatch.setenv("EVENTDEDUP_SPARK_DEPLOY", "emr-serverless")
    assert deploy_mode() == "emr-serverless"
    monkeypatch.setenv("EVENTDEDUP_SPARK_DEPLOY", "emr_serverless")
    with pytest.raises(ValueError, match=r"EVENTDEDUP_SPARK_DEPLOY='emr_serverless'.*spark-submit, emr-serverless"):
        deploy_mode()


@pytest.mark.parametrize("unset, bad, message", [
    ("EVENTDEDUP_EMR_APPLICATION_ID", {}, "EVENTDEDUP_EMR_APPLICATION_ID is not set"),
    ("EVENTDEDUP_EMR_EXECUTION_ROLE_ARN", {}, "EVENTDEDUP_EMR_EXECUTION_ROLE_ARN is not set"),
    (None, {"EVENTDEDUP_EMR_JOB_ROOT": "/opt/eventdedup"}, "is not an s3:// prefix"),
    (None, {"EVENTDEDUP_EMR_JOB_ROOT": "s3://bucket/a,b"}, "cannot be passed in spark-submit's --archives"),
    (None, {"EVENTDEDUP_EMR_LOG_URI": "logs/"}, "is not an s3:// prefix"),
])
def test_incomplete_emr_settings_fail_the_parse_with_the_variable_named(monkeypatch, unset, bad, message) -> None:
    from eventdedup_emr import emr_serverless_dedup_operator

    monkeypatch.setenv("EVENTDEDUP_EMR_APPLICATION_ID", "00fabcdefghij")
    monkeypatch.setenv("EVENTDEDUP_EMR_EXECUTION_ROLE_ARN", ROLE_ARN)
    monkeypatch.setenv("EVENTDEDUP_EMR_JOB_ROOT", JOB_ROOT)
    monkeypatch.delenv("EVENTDEDUP_EMR_LOG_URI", raising=False)
    if unset:
        monkeypatch.delenv(unset)
    for name, value in bad.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=message):
        emr_serverless_dedup_operator("dedup_batch", BATCH_ID)


def test_upload_puts_entry_point_archive_and_config_under_the_job_root(s3_server, bucket, tmp_path: Path) -> None:
    """`make package --upload` writes the job root under the names this operator reads."""
    from eventdedup_emr import JOB_CONFIG, JOB_ENV_ARCHIVE, JOB_SCRIPT

    from eventdedup_dev.package import ARCHIVE_NAME, upload

    out = tmp_path / "job"
    out.mkdir()
    (out / "dedup_batch.py").write_bytes(b"print('entry point')\n")
    (out / ARCHIVE_NAME).write_bytes(b"\x1f\x8b archive bytes")
    config = tmp_path / "prod.toml"
    config.write_bytes(b'[s3]\nbucket = "prod"\n')
    client = s3_server.client()

    uploaded = upload(out, f"s3://{bucket}/jobs/eventdedup/", config, client)

    expected = {f"jobs/eventdedup/{JOB_SCRIPT}": b"print('entry point')\n",
                f"jobs/eventdedup/{JOB_ENV_ARCHIVE}": b"\x1f\x8b archive bytes",
                f"jobs/eventdedup/{JOB_CONFIG}": b'[s3]\nbucket = "prod"\n'}
    assert uploaded == [f"s3://{bucket}/{key}" for key in expected]
    assert {key: client.get_object(Bucket=bucket, Key=key)["Body"].read() for key in expected} == expected


def test_the_pipeline_dag_submits_to_emr_serverless_when_configured(airflow_db, tmp_path) -> None:
    """Chosen by configuration at parse time: the same DAG, its dedup task the EMR operator."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    project = Path(__file__).resolve().parents[2]
    probe = ("import sys, json; from airflow.dag_processing.dagbag import DagBag; "
             "bag = DagBag(dag_folder=sys.argv[1]); "
             "dag = bag.get_dag('eventdedup_pipeline'); "
             "print(json.dumps({'errors': {k: str(v) for k, v in bag.import_errors.items()}, "
             "'dedup': type(dag.get_task('dedup_batch')).__name__, "
             "'upstream': sorted(dag.get_task('dedup_batch').upstream_task_ids), "
             "'downstream': sorted(dag.get_task('dedup_batch').downstream_task_ids)}))")
    env = {**os.environ, "EVENTDEDUP_SPARK_DEPLOY": "emr-serverless", "EVENTDEDUP_EMR_APPLICATION_ID": "00fabc",
           "EVENTDEDUP_EMR_EXECUTION_ROLE_ARN": ROLE_ARN, "EVENTDEDUP_EMR_JOB_ROOT": JOB_ROOT}
    done = subprocess.run([sys.executable, "-c", probe, str(project / "dags" / "eventdedup_pipeline.py")],
                          capture_output=True, text=True, env=env, timeout=120, cwd=project)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"errors": {}, "dedup": "EmrServerlessStartJobOperator", "upstream": ["stage_batch"],
                      "downstream": ["promote_batch"]}


def test_each_stream_runs_with_its_own_uploaded_configuration(s3_server, bucket, tmp_path: Path, monkeypatch) -> None:
    """With a folder of streams, `package --upload --streams-dir` puts each stream's file at
    streams/<stream>.toml under the job root, and that stream's job ships it as ./eventdedup.toml."""
    from eventdedup_emr import JOB_CONFIG, emr_serverless_dedup_operator

    from eventdedup_dev.package import ARCHIVE_NAME, upload

    out, streams = tmp_path / "job", tmp_path / "streams"
    out.mkdir()
    streams.mkdir()
    (out / "dedup_batch.py").write_bytes(b"print('entry point')\n")
    (out / ARCHIVE_NAME).write_bytes(b"\x1f\x8b archive bytes")
    for name in ("web", "mobile"):
        (streams / f"{name}.toml").write_bytes(f'[s3]\nbucket = "{name}-events"\n'.encode())
    client = s3_server.client()
    uploaded = upload(out, f"s3://{bucket}/jobs/eventdedup/", None, client, streams_dir=streams)
    assert uploaded[2:] == [f"s3://{bucket}/jobs/eventdedup/streams/{name}.toml" for name in ("mobile", "web")]
    assert client.get_object(Bucket=bucket, Key="jobs/eventdedup/streams/web.toml")["Body"].read() == (
        b'[s3]\nbucket = "web-events"\n')

    monkeypatch.setenv("EVENTDEDUP_EMR_APPLICATION_ID", "00fabcdefghij")
    monkeypatch.setenv("EVENTDEDUP_EMR_EXECUTION_ROLE_ARN", ROLE_ARN)
    monkeypatch.setenv("EVENTDEDUP_EMR_JOB_ROOT", JOB_ROOT)
    operator = emr_serverless_dedup_operator("dedup_batch", BATCH_ID, "web")
    root = JOB_ROOT.rstrip("/")
    parameters = operator.job_driver["sparkSubmit"]["sparkSubmitParameters"]
    assert f"{root}/eventdedup-job-env.tar.gz#environment,{root}/streams/web.toml#{JOB_CONFIG} " in parameters
    assert operator.job_driver["sparkSubmit"]["entryPointArguments"] == ["--config", JOB_CONFIG, "--batch-id", BATCH_ID]
    assert operator.name == f"eventdedup-web-{BATCH_ID}"
