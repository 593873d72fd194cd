"""What the executors' Python workers run with, in a real local Spark."""
from __future__ import annotations

from collections.abc import Iterator


def _worker_facts(_: Iterator[int]) -> Iterator[tuple[str, bool]]:
    import sys

    import pyspark

    yield pyspark.__file__ or "", "eventdedup.job.dedup_stage" in sys.modules


def test_workers_run_the_installed_byte_compiled_pyspark_not_sparks_zip(spark) -> None:  # type: ignore[no-untyped-def]
    import pyspark

    facts = spark.sparkContext.parallelize(range(4), 4).mapPartitions(_worker_facts).collect()
    # The driver imports the installed package; Spark's pyspark.zip inside it is the same version.
    assert facts == [(pyspark.__file__, True)] * 4
