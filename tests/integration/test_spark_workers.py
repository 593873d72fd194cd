"""What the executors' Python workers run with, in a real local Spark."""
from __future__ import annotations

import os
from collections.abc import Iterator


def _worker_facts(_: Iterator[int]) -> Iterator[tuple[str, bool]]:
    import sys

    import pyspark

    yield pyspark.__file__ or "", "eventdedup.job.dedup_stage" in sys.modules


def test_workers_run_the_installed_byte_compiled_pyspark_not_sparks_zip(spark) -> None:  # type: ignore[no-untyped-def]
    import pyspark

    facts = spark.parallelize(range(4), 4).mapPartitions(_worker_facts).collect()
    # The driver imports the installed package; Spark's pyspark.zip inside it is the same version.
    assert facts == [(pyspark.__file__, True)] * 4


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

    from eventdedup.job.spark_session import WORKER_ALLOCATOR_ENV

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
    from eventdedup.job.spark_session import WORKER_ALLOCATOR_ENV

    # A variable the environment already sets is the user's: the workers inherit it instead.
    expected = {name: os.environ.get(name, value) for name, value in WORKER_ALLOCATOR_ENV.items()}
    facts = spark.parallelize(range(2), 2).mapPartitions(_allocator_facts).collect()
    assert [env for env, _, _ in facts] == [expected] * 2
    if expected == WORKER_ALLOCATOR_ENV:
        for _, refaulted, pages in facts:
            assert refaulted < pages // 100, (refaulted, pages)


def test_the_allocator_settings_yield_to_the_users_and_stay_off_spark_submit(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from eventdedup.config import SparkSettings
    from eventdedup.job.spark_session import WORKER_ALLOCATOR_ENV, _settings_conf

    for name in WORKER_ALLOCATOR_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.setenv("MIMALLOC_PURGE_DELAY", "10")
    local = _settings_conf(SparkSettings(), None)
    assert {key: value for key, value in local.items() if key.startswith("spark.executorEnv.")} == {
        f"spark.executorEnv.{name}": value for name, value in WORKER_ALLOCATOR_ENV.items()
        if name != "MIMALLOC_PURGE_DELAY"}
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")  # how spark-submit starts a driver's Python
    submitted = _settings_conf(SparkSettings(), None)
    assert not [key for key in submitted if key.startswith("spark.executorEnv.")]


_DRIVER = """
import os, sys
from eventdedup.config import SparkSettings
from eventdedup.job.spark_session import build_spark_context

context = build_spark_context(SparkSettings(master="local[1]"), "eventdedup-jvm-output")
jvm = context._jvm
pid = jvm.java.lang.ProcessHandle.current().pid()
print("jvm", os.readlink(f"/proc/{pid}/fd/1"), os.readlink(f"/proc/{pid}/fd/2"))
print("ours", os.readlink("/proc/self/fd/1"), os.readlink("/proc/self/fd/2"))
jvm.java.lang.System.err.println("written by the driver JVM")
jvm.java.lang.System.err.flush()
"""


def test_the_driver_jvm_writes_through_our_relay_not_into_the_callers_pipes() -> None:
    """A caller that reads a command's output to its end (Airflow, the bench) must not wait for
    the driver JVM's shutdown after the command exits, yet sees what the JVM wrote."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-c", _DRIVER], capture_output=True, text=True, env=env, check=True)
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.startswith(("jvm ", "ours ")))
    jvm_out, jvm_err = lines["jvm"].split()
    ours_out, ours_err = lines["ours"].split()
    assert jvm_out.startswith("pipe:") and jvm_err.startswith("pipe:")
    assert {jvm_out, jvm_err}.isdisjoint({ours_out, ours_err})
    assert "written by the driver JVM\n" in done.stderr


def test_the_class_archive_is_whole_when_its_writer_returns(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The JVM writes the archive as it exits, after the child's Python is gone: the writer must
    wait for the JVM itself, not only for the child's output to end."""
    from eventdedup.job.spark_session import write_class_archive

    archive = write_class_archive(tmp_path / "classes.jsa")
    assert archive == tmp_path / "classes.jsa" and archive.stat().st_size > 1_000_000
    assert [path.name for path in tmp_path.iterdir()] == ["classes.jsa"]  # no partial left behind
