"""spark-submit entry point of the dedup job; the same code path as `eventdedup dedup`.

    spark-submit spark_jobs/dedup_batch.py --config eventdedup.toml --batch-id 20261122T0500Z

Exit codes: 0 the job result is in staging; 1 the job was refused or failed (message on stderr);
2 bad arguments.
"""
from __future__ import annotations

import sys

from eventdedup.cli import main

if __name__ == "__main__":
    sys.exit(main(["--verbose", "dedup", *sys.argv[1:]]))
