"""The spark-submit shape for local mode and for a cluster (eventdedup.job.deployment)."""
from __future__ import annotations

import pytest

from eventdedup.errors import EventDedupError
from eventdedup.job.deployment import submit_shape

PYTHON = "/srv/airflow/venv/bin/python"


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]"])
def test_local_mode_runs_this_interpreter_on_loopback(master: str) -> None:
    shape = submit_shape(master, PYTHON, job_archive="/ignored.tar.gz", driver_host="10.1.2.3")
    assert shape.archives is None
    assert shape.conf == {"spark.pyspark.python": PYTHON, "spark.pyspark.driver.python": PYTHON}
    assert shape.env == {"PYSPARK_PYTHON": PYTHON, "PYSPARK_DRIVER_PYTHON": PYTHON, "SPARK_LOCAL_IP": "127.0.0.1"}


def test_a_cluster_ships_the_archive_and_never_pins_loopback() -> None:
    shape = submit_shape("spark://master:7077", PYTHON, job_archive="s3://b/job/env.tar.gz")
    assert shape.archives == "s3://b/job/env.tar.gz#environment"
    assert shape.conf == {"spark.pyspark.python": "./environment/bin/python", "spark.pyspark.driver.python": PYTHON}
    assert shape.env == {"PYSPARK_DRIVER_PYTHON": PYTHON}


def test_a_cluster_driver_host_is_the_deployments() -> None:
    shape = submit_shape("yarn", PYTHON, job_archive="/a.tar.gz", driver_host="airflow-worker-1.internal")
    assert shape.conf["spark.driver.host"] == shape.conf["spark.driver.bindAddress"] == "airflow-worker-1.internal"
    assert shape.env["SPARK_LOCAL_IP"] == "airflow-worker-1.internal"


def test_a_cluster_without_the_archive_says_how_to_build_it() -> None:
    with pytest.raises(EventDedupError, match="make package"):
        submit_shape("spark://master:7077", PYTHON)
