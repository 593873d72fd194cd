"""What the executors' Python workers run with, in a real local Spark."""
from __future__ import annotations

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
