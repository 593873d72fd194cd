"""How a spark-submit of the dedup job is shaped for where it runs: local mode or a cluster.

Local mode (`local`, `local[N]`) is the machine the scheduler runs on: the driver stays on
loopback and the workers run the submitting interpreter, which has eventdedup installed; the
job runs with the local settings a CLI run starts its own driver with (eventdedup.spark.driver_start).

On a cluster (standalone `spark://`, YARN, Kubernetes) none of that holds. Executor hosts have
neither this interpreter's path nor eventdedup, so the job ships its own environment: the
archive `make package` builds (venv-pack, the Spark documentation's way for Python
dependencies), unpacked by Spark in every executor's working directory as `environment/`.
The driver runs in client mode on the submitting host, in the submitting interpreter; its
host and bind address are the deployment's (a name executors can reach), never loopback by
default. Credentials are not part of the submit at all: executors take them from their host
(the instance role on AWS; the workers' environment on the local stack), see `make stack`.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from eventdedup.errors import EventDedupError
from eventdedup.spark.driver_start import driver_start_conf, is_local_master

# The fragment after '#' is the directory Spark unpacks the archive into on every executor.
ENVIRONMENT_DIR = "environment"
EXECUTOR_PYTHON = f"./{ENVIRONMENT_DIR}/bin/python"


@dataclass(frozen=True)
class SubmitShape:
    """spark-submit settings and the driver environment (never secrets: those are added apart)."""

    conf: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    archives: str | None = None


def submit_shape(master: str, interpreter: str, job_archive: str | None = None,
                 driver_host: str | None = None, *, environ: Mapping[str, str],
                 properties_file: str | None = None) -> SubmitShape:
    """The settings for `master`. `job_archive` is the packaged environment (a path or URL the
    driver can read); `driver_host` the address executors reach the driver at; `environ` the
    environment spark-submit will run in and `properties_file` its --properties-file, if any
    (the user's settings in either come first)."""
    if is_local_master(master):
        return SubmitShape(
            # and what a driver the CLI starts on this host runs with (spark-submit applies the
            # driver's Java options from its --conf in client mode, the only mode of a local master)
            conf={"spark.pyspark.python": interpreter, "spark.pyspark.driver.python": interpreter,
                  **driver_start_conf(master, environ, properties_file=properties_file)},
            env={"PYSPARK_PYTHON": interpreter, "PYSPARK_DRIVER_PYTHON": interpreter,
                 # local mode listens on loopback only
                 "SPARK_LOCAL_IP": "127.0.0.1"})
    if not job_archive:
        raise EventDedupError(
            f"Spark master {master} is a cluster: its executors cannot run this host's interpreter "
            f"({interpreter}). Build the job archive with `make package` and set EVENTDEDUP_SPARK_JOB_ARCHIVE "
            "to its path or URL (dist/job/eventdedup-job-env.tar.gz)")
    conf = {"spark.pyspark.python": EXECUTOR_PYTHON,
            # client mode: the driver is this process's host and interpreter
            "spark.pyspark.driver.python": interpreter}
    env = {"PYSPARK_DRIVER_PYTHON": interpreter}
    if driver_host:
        conf["spark.driver.host"] = driver_host
        conf["spark.driver.bindAddress"] = driver_host
        env["SPARK_LOCAL_IP"] = driver_host
    return SubmitShape(conf=conf, env=env, archives=f"{job_archive}#{ENVIRONMENT_DIR}")
