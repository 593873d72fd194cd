"""Build the SparkContext eventdedup jobs run in, after checking for the Java Spark needs.

The job is RDD-only (`repartitionAndSortWithinPartitions` over Arrow chunks), so it starts a
SparkContext and no SparkSession: creating a session's SQL side in the driver JVM cost 1.1-1.5 s
of every batch's start-up on a 2-core host, for nothing the job uses. `build_spark_session`
remains for what does use SQL (the benchmark's Spark peers).

`python -m eventdedup.job.spark_session` is the Java check `make` runs before anything starts
Spark: one check, in one place, with one message. With `--class-archive` it also writes the
driver JVM's class-data archive (below) when the environment has none yet.

Starting the driver JVM loads ~10,000 of Spark's classes, most of the ~6 s a local session
takes to start, paid by every batch. Java's application class-data sharing (JEP 350) maps
them from an archive written once by a session that ran a task: `class_archive_path()`, in
the virtualenv whose jars it holds, named for the pyspark and Java versions. A local session
uses it when it exists; a JVM that finds it does not match its class path simply loads the
classes itself. Under spark-submit (a cluster) the driver's options are the deployment's.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from eventdedup.config import SparkSettings
from eventdedup.errors import EventDedupError

MINIMUM_JAVA = 17

if TYPE_CHECKING:
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

T = TypeVar("T")


# The local Python workers keep the memory they free for their next task instead of handing it
# back to the kernel and faulting it in again, page by page: glibc's heap (Python's objects,
# numpy) is neither trimmed nor bypassed with mmap, and mimalloc (pyarrow's pool) never purges.
# Per 1M-event batch, 4 jobs alternating: the workers' minor faults 620k -> 235k, their CPU
# 8.0-8.8 s -> 7.3-7.6 s, the job 5.7-6.1 s -> 5.3-5.6 s. The price is memory: a worker keeps
# its peak for life (summed peak RSS 2.0 -> 2.6 GiB), and over many jobs in one context its heap
# fragments and creeps; a command (and a spark-submit) runs one batch per process. Local masters
# only (local_driver_conf), whoever starts the driver: on a cluster the executors' environment is
# the deployment's, and an executor kept at its peak could outgrow its container's limit.
WORKER_ALLOCATOR_ENV = {
    "MALLOC_TRIM_THRESHOLD_": str(4 << 30),
    "MALLOC_MMAP_THRESHOLD_": str(4 << 30),
    "MIMALLOC_PURGE_DELAY": "-1",
}


def build_spark_context(settings: SparkSettings, app_name: str = "eventdedup",
                        extra_conf: dict[str, str] | None = None) -> SparkContext:
    _prepare_for_spark()
    from pyspark import SparkConf, SparkContext

    conf = SparkConf().setAppName(app_name).setAll(list(_settings_conf(settings, extra_conf).items()))
    if SparkContext._gateway is None and not launched_by_spark_submit():
        # The first context of this process starts the driver JVM: with its output relayed,
        # so that the command's end does not wait for the JVM's (eventdedup.job.jvm_output).
        context = SparkContext(conf=conf, gateway=_relayed_gateway(conf))
    else:
        context = SparkContext.getOrCreate(conf)
    context.setLogLevel("ERROR")
    return context


def _relayed_gateway(conf: SparkConf) -> Any:  # py4j's JavaGateway; py4j ships no types
    from pyspark.java_gateway import launch_gateway

    from eventdedup.job.jvm_output import relayed_launch

    return relayed_launch(lambda stdout, stderr: launch_gateway(  # type: ignore[no-untyped-call]
        conf, popen_kwargs={"stdout": stdout, "stderr": stderr}))


def build_spark_session(settings: SparkSettings, app_name: str = "eventdedup",
                        extra_conf: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession on the same settings, for code that uses Spark SQL (the benchmark's peers)."""
    _prepare_for_spark()
    from pyspark.sql import SparkSession

    # The builder, not SparkSession(context): it applies the settings to a session that exists.
    options: dict[str, bool | float | int | str | None] = {**_settings_conf(settings, extra_conf)}
    session = SparkSession.builder.appName(app_name).config(map=options).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _prepare_for_spark() -> None:
    require_java()
    # PySpark's SparkContext starts workers with $PYSPARK_PYTHON or else "python3" from PATH;
    # the spark.pyspark.python setting below is read only by spark-submit. Without this, a
    # plain `eventdedup run-batch` would start workers that cannot import eventdedup.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def _settings_conf(settings: SparkSettings, extra_conf: Mapping[str, str] | None) -> dict[str, str]:
    conf = {
        "spark.python.worker.reuse": "true",
        # Workers fork from a daemon that has already imported the job's modules (spark_daemon.py).
        "spark.python.daemon.module": "eventdedup.job.spark_daemon",
        "spark.sql.shuffle.partitions": "8",
        # What the job shuffles is Arrow IPC already compressed with LZ4 (eventdedup.tables):
        # compressing it again cost the JVM ~0.15 s of CPU per million events for nothing.
        "spark.shuffle.compress": "false",
        "spark.ui.showConsoleProgress": "false",
    }
    if not launched_by_spark_submit():
        # Under spark-submit (Airflow's SparkSubmitOperator, a cluster) the master, driver memory,
        # host and interpreter come from spark-submit and its connection: do not override them
        # (on a local master the submit carries local_driver_conf itself: eventdedup.job.deployment).
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
        conf.update(local_driver_conf(settings.master))
    conf.update(extra_conf or {})  # the caller's JVM options, say, replace ours whole
    return conf


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def local_driver_conf(master: str) -> dict[str, str]:
    """What a driver this host starts runs with on top of the job's settings, whoever starts it:
    this process (the CLI, the bench) or a local-master spark-submit (Airflow's operator,
    eventdedup.job.deployment). The driver JVM maps its classes from this environment's
    class-data archive when there is one; on a local master its workers also keep the memory
    they free (WORKER_ALLOCATOR_ENV; a variable the user has set is theirs, inherited instead).
    Never the workers' settings on a cluster: there the executors' environment is the
    deployment's."""
    conf: dict[str, str] = {}
    if is_local_master(master):
        conf.update({f"spark.executorEnv.{name}": value for name, value in WORKER_ALLOCATOR_ENV.items()
                     if name not in os.environ})
    archive = class_archive_path()
    if archive.exists():
        conf["spark.driver.extraJavaOptions"] = _use_archive(archive)
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


@functools.cache
def class_archive_path() -> Path:
    """Where this environment's driver class-data archive lives (it may not exist)."""
    from importlib.metadata import version

    java = _java_version_text(_java_binary(os.environ))
    name = f"spark-{version('pyspark')}-java-{re.sub(r'[^0-9A-Za-z.]+', '_', java)}.jsa"
    return Path(sys.prefix) / "share" / "eventdedup" / name


def _use_archive(archive: Path) -> str:
    # -Xlog:cds=off: a stale archive (another class path) is skipped without a warning on stdout.
    return f"-XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+dynamic=off"


def write_class_archive(archive: Path | None = None) -> Path:
    """Write the archive (by default `class_archive_path()`), once: a context in a child process
    runs a task and stops, and its JVM dumps the classes it loaded as it exits, which the child
    waits for (its output is relayed, so nothing else would wait for the JVM). Written aside,
    then renamed: never half an archive."""
    archive = archive or class_archive_path()
    if archive.exists():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    script = ("import sys; from eventdedup.config import SparkSettings; "
              "from eventdedup.job.spark_session import build_spark_context; "
              "s = build_spark_context(SparkSettings(master='local[1]'), 'eventdedup-class-archive', "
              "{'spark.driver.extraJavaOptions': sys.argv[1]}); "
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


def _java_binary(env: Mapping[str, str]) -> str:
    java_home = env.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java", path=env.get("PATH"))
    if not java or not os.path.exists(java):
        raise EventDedupError(f"Java {MINIMUM_JAVA}+ is required by Spark but no 'java' was found "
                              f"(JAVA_HOME={java_home or 'unset'}); install openjdk-17-jre-headless or set JAVA_HOME")
    return java


@functools.cache
def _java_version_text(java: str) -> str:
    """`java -version`'s version string, e.g. "17.0.15" (once per binary: it costs a JVM start)."""
    output = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "([^"]+)"', output)
    return match.group(1) if match else "unknown"


def require_java(environ: Mapping[str, str] | None = None) -> int:
    """Spark 4 needs Java 17+; say so plainly instead of the JVM launcher's obscure failure."""
    env = os.environ if environ is None else environ
    java = _java_binary(env)
    match = re.match(r"(\d+)", _java_version_text(java))
    version = int(match.group(1)) if match else 0
    if version < MINIMUM_JAVA:
        raise EventDedupError(f"Java {MINIMUM_JAVA}+ is required by Spark; {java} is version {version or 'unknown'}")
    return version


if __name__ == "__main__":
    try:
        print(f"Java {require_java()} found: Spark can start")
        if "--class-archive" in sys.argv[1:]:
            print(f"driver class-data archive: {write_class_archive()}")
    except (EventDedupError, subprocess.CalledProcessError) as exc:
        sys.exit(f"eventdedup: {exc}")
