"""What the executors' Python workers run with, in a real local Spark."""
from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _worker_facts(_: Iterator[int]) -> Iterator[tuple[str, bool, list[str]]]:
    import os
    import sys

    import pyspark

    # the path and the parent's command line say, if this fails, why the zip was kept
    parent = open(f"/proc/{os.getppid()}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
    yield pyspark.__file__ or "", "eventdedup.job.dedup_stage" in sys.modules, [*sys.path[:6], f"parent: {parent}"]


def test_workers_run_the_installed_byte_compiled_pyspark_not_sparks_zip(spark) -> None:  # type: ignore[no-untyped-def]
    """Failed once (2026-11-25, a fresh clone under heavy load) with workers importing the zip:
    the message then holds each worker's sys.path and parent, to find out why."""
    import pyspark

    facts = spark.parallelize(range(4), 4).mapPartitions(_worker_facts).collect()
    # The driver imports the installed package; Spark's pyspark.zip inside it is the same version.
    assert [(path, warm) for path, warm, _ in facts] == [(pyspark.__file__, True)] * 4, [
        where for _, _, where in facts]


def _collector_facts(_: Iterator[int]) -> Iterator[tuple[int, bool, bool]]:
    import gc
    import sys

    namespace = vars(sys.modules["eventdedup.job.dedup_stage"])  # imported by the daemon, before the fork
    made_here: list[object] = []  # a list is always tracked (a dict of strings is not)
    collected = {id(item) for item in gc.get_objects()}  # every generation a collection walks
    yield gc.get_freeze_count(), id(namespace) in collected, id(made_here) in collected


def test_workers_never_walk_what_the_daemon_imported_in_their_collections(spark) -> None:  # type: ignore[no-untyped-def]
    """PySpark's daemon runs gc.collect() in a worker after each task; what the daemon imported
    before forking is frozen, so those collections skip it. Without the freeze the job's module
    namespaces are in the collected generations and the freeze count is 0."""
    facts = spark.parallelize(range(2), 2).mapPartitions(_collector_facts).collect()
    assert [(frozen > 0, daemons_walked, workers_walked) for frozen, daemons_walked, workers_walked in facts] == [
        (True, False, True)] * 2, facts


def test_commands_start_a_spark_context_and_no_sql_session(spark, config) -> None:  # type: ignore[no-untyped-def]
    """The job is RDD-only: a SparkSession's SQL side costs a batch's start-up over a second and
    serves nothing, so what commands start is a SparkContext (the one this test run shares)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from eventdedup.cli import _spark_factory

    started = _spark_factory(config)()
    assert isinstance(started, SparkContext) and started is spark
    assert SparkSession._instantiatedSession is None and SparkSession.getActiveSession() is None


def _allocator_facts(_: Iterator[int]) -> Iterator[tuple[dict[str, str | None], int, int]]:
    import os
    import resource

    from eventdedup.spark.driver_start import WORKER_ALLOCATOR_ENV

    def faults_to_fill(size: int) -> int:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        block = bytearray(size)  # malloc, then every byte written
        del block
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    size = 64 << 20  # above glibc's largest default mmap threshold (32 MiB)
    faults_to_fill(size)
    yield {name: os.environ.get(name) for name in WORKER_ALLOCATOR_ENV}, faults_to_fill(size), size // 4096


def test_workers_keep_the_memory_they_free_for_their_next_allocation(spark) -> None:  # type: ignore[no-untyped-def]
    """A 64 MiB block freed and allocated again costs no page faults the second time: without the
    allocator settings glibc maps it afresh each time and faults in every one of its pages."""
    from eventdedup.spark.driver_start import WORKER_ALLOCATOR_ENV

    # A variable the environment already sets is the user's: the workers inherit it instead.
    expected = {name: os.environ.get(name, value) for name, value in WORKER_ALLOCATOR_ENV.items()}
    facts = spark.parallelize(range(2), 2).mapPartitions(_allocator_facts).collect()
    assert [env for env, _, _ in facts] == [expected] * 2
    if expected == WORKER_ALLOCATOR_ENV:
        for _, refaulted, pages in facts:
            assert refaulted < pages // 100, (refaulted, pages)


def test_the_allocator_settings_yield_to_the_users_and_a_submitted_driver_adds_none(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Under spark-submit the submit carries them, for a local master only (eventdedup.spark.deployment)."""
    from eventdedup.config import SparkSettings
    from eventdedup.spark.driver_start import WORKER_ALLOCATOR_ENV
    from eventdedup.spark.session import _settings_conf

    for name in WORKER_ALLOCATOR_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.setenv("MIMALLOC_PURGE_DELAY", "10")
    local = _settings_conf(SparkSettings(), None)
    assert {key: value for key, value in local.items() if key.startswith("spark.executorEnv.")} == {
        f"spark.executorEnv.{name}": value for name, value in WORKER_ALLOCATOR_ENV.items()
        if name != "MIMALLOC_PURGE_DELAY"}
    on_a_cluster = _settings_conf(SparkSettings(master="spark://spark-master:7077"), None)
    assert not [key for key in on_a_cluster if key.startswith("spark.executorEnv.")]  # the deployment's
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")  # how spark-submit starts a driver's Python
    submitted = _settings_conf(SparkSettings(), None)
    assert not [key for key in submitted if key.startswith("spark.executorEnv.")]


_DRIVER = """
import os, sys
from eventdedup.config import SparkSettings
from eventdedup.spark.session import build_spark_context

context = build_spark_context(SparkSettings(master="local[1]"), "eventdedup-jvm-output")
jvm = context._jvm
pid = jvm.java.lang.ProcessHandle.current().pid()
print("jvm", os.readlink(f"/proc/{pid}/fd/1"), os.readlink(f"/proc/{pid}/fd/2"))
print("ours", os.readlink("/proc/self/fd/1"), os.readlink("/proc/self/fd/2"))
jvm.java.lang.System.err.println("written by the driver JVM")
jvm.java.lang.System.err.flush()
diagnostics = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
    jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
print("TieredStopAtLevel", diagnostics.getVMOption("TieredStopAtLevel").getValue())
"""


@pytest.fixture(scope="module")
def cli_driver() -> subprocess.CompletedProcess[str]:
    """A driver JVM started as the CLI starts one, in a process of its own, without the tests'
    own JVM options."""
    import sys

    env = {**_environ_without_ours(), "PYSPARK_PYTHON": sys.executable}
    return subprocess.run([sys.executable, "-c", _DRIVER], capture_output=True, text=True, env=env, check=True)


def test_the_driver_jvm_writes_through_our_relay_not_into_the_callers_pipes(cli_driver) -> None:  # type: ignore[no-untyped-def]
    """A caller that reads a command's output to its end (Airflow, the bench) must not wait for
    the driver JVM's shutdown after the command exits, yet sees what the JVM wrote."""
    lines = dict(line.split(" ", 1) for line in cli_driver.stdout.splitlines() if line.startswith(("jvm ", "ours ")))
    jvm_out, jvm_err = lines["jvm"].split()
    ours_out, ours_err = lines["ours"].split()
    assert jvm_out.startswith("pipe:") and jvm_err.startswith("pipe:")
    assert {jvm_out, jvm_err}.isdisjoint({ours_out, ours_err})
    assert "written by the driver JVM\n" in cli_driver.stderr


def test_the_driver_jvm_the_cli_starts_compiles_with_c1_only(cli_driver) -> None:  # type: ignore[no-untyped-def]
    """It lives for one batch (eventdedup.spark.driver_start); read from the JVM's own diagnostics."""
    assert "TieredStopAtLevel 1" in cli_driver.stdout.splitlines()


def test_the_class_archive_is_whole_when_its_writer_returns(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The JVM writes the archive as it exits, after the child's Python is gone: the writer must
    wait for the JVM itself, not only for the child's output to end."""
    from eventdedup.spark.session import write_class_archive

    archive = write_class_archive(tmp_path / "classes.jsa")
    assert archive == tmp_path / "classes.jsa" and archive.stat().st_size > 1_000_000
    assert [path.name for path in tmp_path.iterdir()] == ["classes.jsa"]  # no partial left behind


_SUBMITTED_APP = """
import os
from eventdedup.config import SparkSettings
from eventdedup.spark.session import build_spark_context

context = build_spark_context(SparkSettings(), "eventdedup-local-submit")
arguments = context._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
print("jvm", " ".join(str(argument) for argument in arguments))
from eventdedup.spark.driver_start import WORKER_ALLOCATOR_ENV
names = tuple(WORKER_ALLOCATOR_ENV)


def facts(_):
    import pyarrow
    return [*(os.environ.get(name) for name in names), pyarrow.default_memory_pool().backend_name]


for worker in context.parallelize(range(2), 2).map(facts).collect():
    print("worker", " ".join(map(str, worker)))
"""


def _submit(app: str, tmp_path: Path, environ: dict[str, str]) -> list[str]:
    """spark-submit of `app` on local[2] as the operator shapes it for `environ`, its stdout lines."""
    import sys

    from eventdedup.spark.deployment import submit_shape

    shape = submit_shape("local[2]", sys.executable, environ=environ)
    # as the provider's hook renders the operator's conf: each setting one --conf argument
    command = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]"]
    for key, value in shape.conf.items():
        command += ["--conf", f"{key}={value}"]
    script = tmp_path / "app.py"
    script.write_text(app)
    done = subprocess.run([*command, str(script)], capture_output=True, text=True, env={**environ, **shape.env},
                          check=True)
    return done.stdout.splitlines()


def _worker_line(changed: dict[str, str]) -> str:
    """What _SUBMITTED_APP prints for a worker: each allocator variable it sees (ours, or as
    `changed`), then pyarrow's pool (glibc's: ARROW_DEFAULT_MEMORY_POOL=system)."""
    from eventdedup.spark.driver_start import WORKER_ALLOCATOR_ENV

    return " ".join(["worker", *({**WORKER_ALLOCATOR_ENV, **changed}.values()), "system"])


def _environ_without_ours() -> dict[str, str]:
    """The runner's environment without what would decide these tests for them: the allocator
    variables, the tests' own JVM options (C1-only, conftest), a site's Spark configuration."""
    from eventdedup.spark.driver_start import WORKER_ALLOCATOR_ENV

    return {key: value for key, value in os.environ.items()
            if key not in {"PYSPARK_GATEWAY_PORT", *WORKER_ALLOCATOR_ENV, "JDK_JAVA_OPTIONS", "SPARK_CONF_DIR",
                           "SPARK_HOME"}}


def test_a_local_spark_submit_runs_with_the_settings_a_cli_run_starts_its_own_driver_with(  # type: ignore[no-untyped-def]
        tmp_path, monkeypatch) -> None:
    """Airflow's operator starts the job with spark-submit on a local master: its workers keep the
    memory they free and its driver JVM maps its classes from the archive, as under `eventdedup
    run-batch`. The archive sits under a path with a space, which Spark's launcher would split
    on unless it is quoted."""
    import shutil

    from eventdedup.spark import driver_start

    archive = tmp_path / "jvm classes" / "spark.jsa"
    archive.parent.mkdir()
    shutil.copy(driver_start.class_archive_path(os.environ), archive)  # `make` wrote it (its Java check)
    monkeypatch.setattr(driver_start, "class_archive_path", lambda environ: archive)
    loaded = tmp_path / "loaded"
    loaded.mkdir()
    environ = _environ_without_ours()
    environ["JDK_JAVA_OPTIONS"] = f"-Xlog:class+load:file={loaded}/%p.log"  # every JVM: which classes, whence
    lines = _submit(_SUBMITTED_APP, tmp_path, environ)
    assert [line for line in lines if line.startswith("worker ")] == [_worker_line({})] * 2
    from_archive = max(log.read_text().count("source: shared objects file (top)") for log in loaded.iterdir())
    assert from_archive > 1000, from_archive  # ~6,500 of Spark's classes mapped from the archive


def test_a_local_spark_submit_keeps_what_the_sites_spark_defaults_set(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A `--conf` replaces a spark-defaults.conf setting whole: the submit leaves the site's
    allocator variable alone and its Java options come after the site's."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "spark-defaults.conf").write_text("spark.executorEnv.MIMALLOC_PURGE_DELAY 25\n"
                                              "spark.driver.defaultJavaOptions -Dsite.default=1\n"
                                              "spark.driver.extraJavaOptions -Dsite.extra=1\n")
    lines = _submit(_SUBMITTED_APP, tmp_path, {**_environ_without_ours(), "SPARK_CONF_DIR": str(site)})
    assert [line for line in lines if line.startswith("worker ")] == [_worker_line({"MIMALLOC_PURGE_DELAY": "25"})] * 2
    jvm_arguments = next(line for line in lines if line.startswith("jvm ")).split()
    assert {"-Dsite.default=1", "-Dsite.extra=1", "-XX:TieredStopAtLevel=1"} <= set(jvm_arguments)
    assert any(argument.startswith("-XX:SharedArchiveFile=") for argument in jvm_arguments)
