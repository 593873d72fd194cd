"""The dedup task's spark-submit never carries a credential on its command line, whatever the
master: the real provider hook builds the command for YARN, Kubernetes, standalone and local
masters from a connection holding canary credentials (session token included). A Kubernetes
master cannot be tested here: the provider's hook refuses one without the `kubernetes` client,
which this project does not install; the operator withholds secrets for it by the same rule."""
from __future__ import annotations

import json

import pytest

ACCESS_KEY = "AKIAEVENTDEDUPCANARY9"
SECRET_KEY = "canary-secret/submit+Qw93mZ"
SESSION_TOKEN = "canary-session-token/submit+Lp20"
CANARIES = (ACCESS_KEY, SECRET_KEY, SESSION_TOKEN)


@pytest.mark.parametrize("master, secrets_in_env", [
    ("yarn", False), ("yarn-cluster", False), ("local[2]", True), ("spark://127.0.0.1:7077", True),
])
def test_no_credential_reaches_the_spark_submit_command_line(monkeypatch, airflow_db, master: str,
                                                             secrets_in_env: bool) -> None:
    from eventdedup_airflow import EventDedupSparkSubmitOperator

    monkeypatch.setenv("EVENTDEDUP_AWS_CONN_ID", "aws_canary")
    monkeypatch.setenv("AIRFLOW_CONN_AWS_CANARY", json.dumps({
        "conn_type": "aws", "login": ACCESS_KEY, "password": SECRET_KEY,
        "extra": {"aws_session_token": SESSION_TOKEN, "region_name": "us-east-1"}}))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CANARY", json.dumps({"conn_type": "spark", "host": master}))
    monkeypatch.setenv("EVENTDEDUP_SPARK_JOB_ARCHIVE", "/opt/eventdedup/eventdedup-job-env.tar.gz")
    operator = EventDedupSparkSubmitOperator(task_id="dedup_batch", batch_id="b1", conn_id="spark_canary")
    operator.prepare_submit()
    hook = operator._get_hook()
    command = " ".join(hook._build_spark_submit_command(operator.application))
    assert [c for c in CANARIES if c in command] == [], command
    process_env = json.dumps(hook._env or {})
    # Local and standalone client mode get them as the process environment (never argv); YARN and
    # Kubernetes get none, the cluster's credential chain serves the job.
    assert [c for c in CANARIES if c in process_env] == (list(CANARIES) if secrets_in_env else [])
    # A cluster's executors run the packaged environment, never this host's interpreter path.
    shipped = "--archives /opt/eventdedup/eventdedup-job-env.tar.gz#environment" in command
    assert shipped == (not master.startswith("local"))
    assert ("spark.pyspark.python=./environment/bin/python" in command) == shipped


def test_a_cluster_master_without_the_job_archive_is_refused_with_the_fix(monkeypatch, airflow_db) -> None:
    from eventdedup_airflow import EventDedupSparkSubmitOperator

    from eventdedup.errors import EventDedupError

    monkeypatch.delenv("EVENTDEDUP_SPARK_JOB_ARCHIVE", raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps({"conn_type": "spark", "host": "spark://10.0.0.5",
                                                                 "port": 7077}))
    operator = EventDedupSparkSubmitOperator(task_id="dedup_batch", batch_id="b1", conn_id="spark_cluster")
    with pytest.raises(EventDedupError, match="make package.*EVENTDEDUP_SPARK_JOB_ARCHIVE"):
        operator.prepare_submit()


def test_the_command_line_watcher_sees_a_secret_on_a_short_lived_process() -> None:
    """The DAG test's scan of every command line is only evidence if it can see a leak."""
    import subprocess
    import sys
    import time

    from ..support.process_scan import command_lines_watched

    with command_lines_watched((SECRET_KEY,)) as scan:
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", SECRET_KEY])
        hits: list[str] = scan["hits"]  # type: ignore[assignment]
        try:
            for _ in range(6000):  # polls a condition (the watcher's finding), not a duration
                if hits:
                    break
                time.sleep(0.02)
        finally:
            sleeper.kill()
            sleeper.wait()
    assert len(hits) >= 1 and SECRET_KEY in hits[0]


def test_a_local_submit_carries_the_local_start_and_leaves_the_users_settings(  # type: ignore[no-untyped-def]
        monkeypatch, airflow_db, tmp_path) -> None:
    """What the provider's hook puts on spark-submit's command line for a local master: the
    workers' allocator and our Java options, but never over the user's own settings on the
    operator (its conf, its env_vars, its properties file)."""
    from eventdedup_airflow import EventDedupSparkSubmitOperator

    from eventdedup.spark import driver_start

    for name in (*driver_start.WORKER_ALLOCATOR_ENV, "SPARK_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))  # no site file: the runner's never counts
    archive = tmp_path / "spark.jsa"
    archive.write_bytes(b"archive")
    monkeypatch.setattr(driver_start, "class_archive_path", lambda environ: archive)
    properties = tmp_path / "job.properties"
    properties.write_text("spark.executorEnv.MALLOC_MMAP_THRESHOLD_ 65536\n")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    operator = EventDedupSparkSubmitOperator(
        task_id="dedup_batch", batch_id="b1", conn_id="spark_local", env_vars={"MIMALLOC_PURGE_DELAY": "10"},
        conf={"spark.driver.extraJavaOptions": "-Dsite.flag=1 -Xss4m"}, properties_file=str(properties))
    operator.prepare_submit()
    argv = operator._get_hook()._build_spark_submit_command(operator.application)
    confs = dict(argv[i + 1].split("=", 1) for i, arg in enumerate(argv) if arg == "--conf")
    assert {key: value for key, value in confs.items() if key.startswith("spark.executorEnv.")} == {
        "spark.executorEnv.MALLOC_TRIM_THRESHOLD_": str(4 << 30), "spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL": "system",
        "spark.executorEnv.MALLOC_ARENA_MAX": "2"}
    assert confs["spark.driver.extraJavaOptions"] == "-Dsite.flag=1 -Xss4m"  # one argument, whole
    assert confs["spark.driver.defaultJavaOptions"] == (
        f'-XX:SharedArchiveFile="{archive}" -Xlog:cds=off -Xlog:cds+dynamic=off -XX:TieredStopAtLevel=1')
