"""Build the SparkContext eventdedup jobs run in, after checking for the Java Spark needs.

The job is RDD-only (`repartitionAndSortWithinPartitions` over Arrow chunks), so it starts a
SparkContext and no SparkSession: creating a session's SQL side in the driver JVM cost 1.1-1.5 s
of every batch's start-up on a 2-core host, for nothing the job uses. `build_spark_session`
remains for what does use SQL (the benchmark's Spark peers).

`python -m eventdedup.spark.session` is the Java check `make` runs before anything starts
Spark: one check, in one place, with one message. With `--class-archive` it also writes the
driver JVM's class-data archive (eventdedup.spark.driver_start) when the environment has none yet.

A driver this process starts also gets what eventdedup.spark.driver_start adds for a driver
started on this host (the driver JVM's class-data archive, the local workers' allocator);
under spark-submit those come with the submit (eventdedup.spark.deployment, a local master) or
are the deployment's (a cluster).
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from eventdedup.config import SparkSettings
from eventdedup.errors import EventDedupError
from eventdedup.spark.driver_start import class_archive_path, driver_start_conf
from eventdedup.spark.java import require_java

if TYPE_CHECKING:
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

T = TypeVar("T")


def build_spark_context(settings: SparkSettings, app_name: str = "eventdedup",
                        extra_conf: dict[str, str] | None = None) -> SparkContext:
    _prepare_for_spark()
    from pyspark import SparkConf, SparkContext

    conf = SparkConf().setAppName(app_name).setAll(list(_settings_conf(settings, extra_conf).items()))
    if SparkContext._gateway is None and not launched_by_spark_submit():
        # The first context of this process starts the driver JVM: with its output relayed,
        # so that the command's end does not wait for the JVM's (eventdedup.spark.jvm_output).
        context = SparkContext(conf=conf, gateway=_relayed_gateway(conf))
    else:
        context = SparkContext.getOrCreate(conf)
    context.setLogLevel("ERROR")
    return context


def _relayed_gateway(conf: SparkConf) -> Any:  # py4j's JavaGateway; py4j ships no types
    from pyspark.java_gateway import launch_gateway

    from eventdedup.spark.jvm_output import relayed_launch

    return relayed_launch(lambda stdout, stderr: launch_gateway(  # type: ignore[no-untyped-call]
        conf, popen_kwargs={"stdout": stdout, "stderr": stderr}))


def build_spark_session(settings: SparkSettings, app_name: str = "eventdedup",
                        extra_conf: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession on the same settings, for code that uses Spark SQL (the benchmark's peers)."""
    _prepare_for_spark()
    from pyspark.sql import SparkSession

    # The builder, not SparkSession(context): it applies the settings to a session that exists.
    # Spark's own JIT: SQL runs generated code that a long-lived session keeps hot, where C2's
    # code is the faster, and a peer measured against the job must never be slowed by our choice.
    options: dict[str, bool | float | int | str | None] = {**_settings_conf(settings, extra_conf, c1_only=False)}
    session = SparkSession.builder.appName(app_name).config(map=options).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _prepare_for_spark() -> None:
    require_java()
    # PySpark's SparkContext starts workers with $PYSPARK_PYTHON or else "python3" from PATH;
    # the spark.pyspark.python setting below is read only by spark-submit. Without this, a
    # plain `eventdedup run-batch` would start workers that cannot import eventdedup.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def _settings_conf(settings: SparkSettings, extra_conf: Mapping[str, str] | None,
                   c1_only: bool = True) -> dict[str, str]:
    conf = {
        "spark.python.worker.reuse": "true",
        # Workers fork from a daemon that has already imported the job's modules (eventdedup.spark.daemon).
        "spark.python.daemon.module": "eventdedup.spark.daemon",
        "spark.sql.shuffle.partitions": "8",
        # What the job shuffles is Arrow IPC already compressed (zstd, eventdedup.tables):
        # compressing it again cost the JVM ~0.15 s of CPU per million events for nothing.
        "spark.shuffle.compress": "false",
        "spark.ui.showConsoleProgress": "false",
    }
    if not launched_by_spark_submit():
        # Under spark-submit (Airflow's SparkSubmitOperator, a cluster) the master, driver memory,
        # host and interpreter come from spark-submit and its connection: do not override them
        # (on a local master the submit carries driver_start_conf itself: eventdedup.spark.deployment).
        conf.update({
            "spark.master": settings.master,
            "spark.ui.enabled": "false",
            "spark.driver.memory": settings.driver_memory,
            # Workers must run this interpreter, the one with eventdedup and its dependencies.
            "spark.pyspark.python": sys.executable,
            # Local mode stays on loopback: no listening on external interfaces.
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
        })
        conf.update(driver_start_conf(settings.master, os.environ, c1_only))
    conf.update(extra_conf or {})  # the caller's settings win
    return conf


def started_in_background(start: Callable[[], T]) -> Callable[[], T]:
    """Call `start` now in a thread and return a function that waits for its result.

    A command that will need Spark starts it before staging and state loads: the driver JVM's
    start-up then overlaps work that waits on S3, instead of following it. The thread is a
    daemon: a command that fails before it needs Spark exits at once, and the JVM, whose stdin
    is our pipe, exits with us. A failed start is raised where Spark is first wanted, not lost
    in the thread. (PySpark installs its SIGINT handler only from the main thread, so Ctrl-C
    still interrupts the command itself.)"""
    result: Future[T] = Future()

    def run() -> None:
        try:
            result.set_result(start())
        except BaseException as exc:  # noqa: BLE001 (handed to the caller, raised there)
            result.set_exception(exc)

    threading.Thread(target=run, name="eventdedup-spark-start", daemon=True).start()
    return result.result


def write_class_archive(archive: Path | None = None) -> Path:
    """Write the archive (by default `class_archive_path`'s), once: a context in a child process
    runs a task and stops, and its JVM dumps the classes it loaded as it exits, which the child
    waits for (its output is relayed, so nothing else would wait for the JVM). Written aside,
    then renamed: never half an archive."""
    archive = archive or class_archive_path(os.environ)
    if archive.exists():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    script = ("import sys; from eventdedup.config import SparkSettings; "
              "from eventdedup.spark.session import build_spark_context; "
              "s = build_spark_context(SparkSettings(master='local[1]'), 'eventdedup-class-archive', "
              "{'spark.driver.defaultJavaOptions': sys.argv[1]}); "
              "s.parallelize(range(8), 2).map(lambda x: (x, x)).partitionBy(2).count(); "
              "jvm = type(s)._gateway.proc; s.stop(); jvm.stdin.close(); jvm.wait()")
    options = f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds=off -Xlog:cds+dynamic=off"
    subprocess.run([sys.executable, "-c", script, options], check=True, capture_output=True,
                   env={**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)})
    if not partial.exists():
        raise EventDedupError(f"the driver JVM wrote no class-data archive at {partial}")
    os.replace(partial, archive)
    return archive


def launched_by_spark_submit(environ: Mapping[str, str] | None = None) -> bool:
    """spark-submit starts a Python application with the gateway to its JVM in the environment."""
    return "PYSPARK_GATEWAY_PORT" in (os.environ if environ is None else environ)


if __name__ == "__main__":
    try:
        print(f"Java {require_java()} found: Spark can start")
        if "--class-archive" in sys.argv[1:]:
            print(f"driver class-data archive: {write_class_archive()}")
    except (EventDedupError, subprocess.CalledProcessError) as exc:
        sys.exit(f"eventdedup: {exc}")
