"""The spark-submit shape for local mode and for a cluster (eventdedup.spark.deployment)."""
from __future__ import annotations

from pathlib import Path

import pytest

from eventdedup.errors import EventDedupError
from eventdedup.spark import driver_start
from eventdedup.spark.deployment import submit_shape

PYTHON = "/srv/airflow/venv/bin/python"
ALLOCATOR = {"MALLOC_TRIM_THRESHOLD_": str(4 << 30), "MALLOC_MMAP_THRESHOLD_": str(4 << 30), "MIMALLOC_PURGE_DELAY": "-1",
             "ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_ARENA_MAX": "2"}


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]"])
def test_local_mode_runs_this_interpreter_on_loopback(master: str, monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    monkeypatch.setattr(driver_start, "class_archive_path", lambda environ: tmp_path / "absent.jsa")
    shape = submit_shape(master, PYTHON, job_archive="/ignored.tar.gz", driver_host="10.1.2.3",
                         environ={"SPARK_CONF_DIR": str(tmp_path)})
    assert shape.archives is None
    # and its workers keep the memory they free, as a local job the CLI starts does (driver_start)
    assert shape.conf == {"spark.pyspark.python": PYTHON, "spark.pyspark.driver.python": PYTHON,
                          **{f"spark.executorEnv.{name}": value for name, value in ALLOCATOR.items()},
                          "spark.driver.defaultJavaOptions": "-XX:TieredStopAtLevel=1"}
    assert shape.env == {"PYSPARK_PYTHON": PYTHON, "PYSPARK_DRIVER_PYTHON": PYTHON, "SPARK_LOCAL_IP": "127.0.0.1"}


def test_a_local_submit_leaves_the_allocator_variable_spark_submit_will_inherit(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(driver_start, "class_archive_path", lambda environ: tmp_path / "absent.jsa")
    # the operator's env_vars, say: spark-submit's environment, not only the task process's
    conf = submit_shape("local[*]", PYTHON, environ={"MALLOC_MMAP_THRESHOLD_": "65536",
                                                    "SPARK_CONF_DIR": str(tmp_path)}).conf
    assert {key: value for key, value in conf.items() if key.startswith("spark.executorEnv.")} == {
        "spark.executorEnv.MALLOC_TRIM_THRESHOLD_": str(4 << 30), "spark.executorEnv.MIMALLOC_PURGE_DELAY": "-1",
        "spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL": "system", "spark.executorEnv.MALLOC_ARENA_MAX": "2"}


def test_a_cluster_ships_the_archive_and_never_pins_loopback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # the local settings never reach a cluster, even where this host has a class archive
    (tmp_path / "spark.jsa").write_bytes(b"archive")
    monkeypatch.setattr(driver_start, "class_archive_path", lambda environ: tmp_path / "spark.jsa")
    shape = submit_shape("spark://master:7077", PYTHON, job_archive="s3://b/job/env.tar.gz", environ={})
    assert shape.archives == "s3://b/job/env.tar.gz#environment"
    assert shape.conf == {"spark.pyspark.python": "./environment/bin/python", "spark.pyspark.driver.python": PYTHON}
    assert shape.env == {"PYSPARK_DRIVER_PYTHON": PYTHON}


def test_a_cluster_driver_host_is_the_deployments() -> None:
    shape = submit_shape("yarn", PYTHON, job_archive="/a.tar.gz", driver_host="airflow-worker-1.internal", environ={})
    assert shape.conf["spark.driver.host"] == shape.conf["spark.driver.bindAddress"] == "airflow-worker-1.internal"
    assert shape.env["SPARK_LOCAL_IP"] == "airflow-worker-1.internal"


def test_a_cluster_without_the_archive_says_how_to_build_it() -> None:
    with pytest.raises(EventDedupError, match="make package"):
        submit_shape("spark://master:7077", PYTHON, environ={})
