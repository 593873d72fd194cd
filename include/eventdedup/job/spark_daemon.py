"""Spark's Python daemon with the executor side of eventdedup already imported.

PySpark starts one daemon per executor and forks a worker from it for every Python worker it
needs: a first task, a second core, and again after any task failure, since a worker that
raised is not reused. A plain daemon forks a bare interpreter and each worker then imports
pyarrow, numpy, boto3 and the job's modules itself, ~1.2 s of CPU every time. Importing them
once here, before any fork, makes every worker start warm. Nothing here opens a connection or
starts a thread, so forking after it is as safe as forking the plain daemon.

Selected by `spark.python.daemon.module` (see spark_session.py); needs eventdedup importable by
the executors' Python, which the job needs anyway.
"""
from __future__ import annotations

import eventdedup.job.dedup_stage  # noqa: F401  (imported for the forked workers)
import eventdedup.job.read_stage  # noqa: F401

if __name__ == "__main__":
    from pyspark.daemon import manager  # here, so the library itself imports without pyspark

    manager()
