"""Build the SparkSession eventdedup jobs run in, after checking for the Java Spark needs.

`python -m eventdedup.job.spark_session` is the Java check `make` runs before anything starts
Spark: one check, in one place, with one message.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from eventdedup.config import SparkSettings
from eventdedup.errors import EventDedupError

MINIMUM_JAVA = 17

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def build_spark_session(settings: SparkSettings, app_name: str = "eventdedup",
                        extra_conf: dict[str, str] | None = None) -> SparkSession:
    require_java()
    # PySpark's SparkContext starts workers with $PYSPARK_PYTHON or else "python3" from PATH;
    # the spark.pyspark.python setting below is read only by spark-submit. Without this, a
    # plain `eventdedup run-batch` would start workers that cannot import eventdedup.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.python.worker.reuse", "true")
        # Workers fork from a daemon that has already imported the job's modules (spark_daemon.py).
        .config("spark.python.daemon.module", "eventdedup.job.spark_daemon")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if not launched_by_spark_submit():
        # Under spark-submit (Airflow's SparkSubmitOperator, a cluster) the master, driver memory,
        # host and interpreter come from spark-submit and its connection: do not override them.
        builder = (
            builder.master(settings.master)
            .config("spark.ui.enabled", "false")
            .config("spark.driver.memory", settings.driver_memory)
            # Workers must run this interpreter, the one with eventdedup and its dependencies.
            .config("spark.pyspark.python", sys.executable)
            # Local mode stays on loopback: no listening on external interfaces.
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
        )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def launched_by_spark_submit(environ: Mapping[str, str] | None = None) -> bool:
    """spark-submit starts a Python application with the gateway to its JVM in the environment."""
    return "PYSPARK_GATEWAY_PORT" in (os.environ if environ is None else environ)


def require_java(environ: Mapping[str, str] | None = None) -> int:
    """Spark 4 needs Java 17+; say so plainly instead of the JVM launcher's obscure failure."""
    env = os.environ if environ is None else environ
    java_home = env.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java", path=env.get("PATH"))
    if not java or not os.path.exists(java):
        raise EventDedupError(f"Java {MINIMUM_JAVA}+ is required by Spark but no 'java' was found "
                              f"(JAVA_HOME={java_home or 'unset'}); install openjdk-17-jre-headless or set JAVA_HOME")
    output = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)', output)
    version = int(match.group(1)) if match else 0
    if version < MINIMUM_JAVA:
        raise EventDedupError(f"Java {MINIMUM_JAVA}+ is required by Spark; {java} is version {version or 'unknown'}")
    return version


if __name__ == "__main__":
    try:
        print(f"Java {require_java()} found: Spark can start")
    except EventDedupError as exc:
        sys.exit(f"eventdedup: {exc}")
