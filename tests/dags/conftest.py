"""Real Airflow for the DAG tests: a throw-away AIRFLOW_HOME on SQLite (`airflow db migrate`),
the project's dags/ and plugins/, connections from AIRFLOW_CONN_* variables pointing at the
tests' S3 server (through the fault proxy) and Spark in local mode.

Airflow reads its configuration when first imported, so the environment is set here, at import.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ..support.canaries import DAG_ACCESS_KEY, DAG_SECRET_KEY

PROJECT = Path(__file__).resolve().parents[2]
# The S3 connection's credentials: canaries, searched for on every process's command line and
# in the task logs while the DAG runs (the tests' store knows them: tests/support/canaries.py).
CANARY_ACCESS_KEY, CANARY_SECRET_KEY = DAG_ACCESS_KEY, DAG_SECRET_KEY
AIRFLOW_HOME = tempfile.mkdtemp(prefix="eventdedup-airflow-")
os.environ.update({
    "AIRFLOW_HOME": AIRFLOW_HOME,
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT / "dags"),
    "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT / "plugins"),
    "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{AIRFLOW_HOME}/airflow.db",
    # No waiting between retries inside dag.test; retries themselves are exercised by rerunning.
    "EVENTDEDUP_TASK_RETRIES": "0",
    "EVENTDEDUP_WAIT_RETRIES": "0",
    # before every interval the tests run (dag.test() places runs at fixed dates in November 2026)
    "EVENTDEDUP_START_DATE": "2026-11-01T00:00:00+00:00",
    "EVENTDEDUP_INTERVAL_SECONDS": "4",
    # The one-configuration deployment (today's DAG ids) even when a developer keeps stream files
    # in conf/streams/; the streams tests name their folder with EVENTDEDUP_STREAMS_DIR.
    "EVENTDEDUP_CONFIG": str(PROJECT / "conf" / "eventdedup.airflow.toml"),
})
for folder in ("dags", "plugins"):
    if str(PROJECT / folder) not in sys.path:
        sys.path.insert(0, str(PROJECT / folder))


@pytest.fixture(scope="session")
def airflow_db() -> str:
    done = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return AIRFLOW_HOME


@pytest.fixture(scope="session")
def dag_proxy(s3_server):  # type: ignore[no-untyped-def]
    from eventdedup_dev.s3_fault_proxy import FaultProxy

    with FaultProxy(s3_server.endpoint_url) as proxy:
        yield proxy


@pytest.fixture(autouse=True)
def _real_dates_after_each_test(request):  # type: ignore[no-untyped-def]
    """A test that redates LIST replies on the shared proxy leaves the server's dates behind it."""
    yield
    if "dag_proxy" in request.fixturenames:
        request.getfixturevalue("dag_proxy").redate(None)


@pytest.fixture(scope="session")
def airflow_connections(dag_proxy, aws_mocks) -> None:  # type: ignore[no-untyped-def]
    """S3 through the proxy to the tests' store; SNS and SQS (alerts) at moto's mocks, as the
    amazon provider routes one connection's services (`service_config`)."""
    mocks = {"endpoint_url": aws_mocks.endpoint_url}
    os.environ["AIRFLOW_CONN_AWS_DEFAULT"] = json.dumps({
        "conn_type": "aws", "login": CANARY_ACCESS_KEY, "password": CANARY_SECRET_KEY,
        "extra": {"endpoint_url": dag_proxy.endpoint_url, "region_name": "us-east-1",
                  "service_config": {"sns": mocks, "sqs": mocks}}})
    os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps({"conn_type": "spark", "host": "local[2]"})


@pytest.fixture(scope="session")
def pipeline_dag(airflow_db, airflow_connections):  # type: ignore[no-untyped-def]
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(PROJECT / "dags" / "eventdedup_pipeline.py"))
    assert bag.import_errors == {}
    return bag.get_dag("eventdedup_pipeline")


@pytest.fixture
def pipeline_config(tmp_path, bucket, monkeypatch):  # type: ignore[no-untyped-def]
    """A configuration file for this test's bucket, as the DAG's tasks will read it."""
    path = tmp_path / "eventdedup.toml"
    path.write_text(f'[s3]\nbucket = "{bucket}"\n[dedup]\nbuckets = 2\ncheckpoint_interval = 3\n'
                    '[spark]\npartitions = 2\n')
    monkeypatch.setenv("EVENTDEDUP_CONFIG", str(path))
    return path
