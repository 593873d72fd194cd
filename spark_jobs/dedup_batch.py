"""spark-submit entry point of the dedup job: arguments in, exit code out, the work in eventdedup.job.

    spark-submit spark_jobs/dedup_batch.py --config eventdedup.toml --batch-id 20261122T0500Z

Exit codes: 0 the job result is in staging; 1 the job was refused or failed (message on stderr);
2 bad arguments.
"""
from __future__ import annotations

import argparse
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="eventdedup: deduplicate one staged batch")
    parser.add_argument("--config", required=True)
    parser.add_argument("--batch-id", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from eventdedup.config import load_config
    from eventdedup.errors import EventDedupError
    from eventdedup.job import run_dedup_job
    from eventdedup.naming import validate_batch_id
    from eventdedup.spark_session import build_spark_session

    try:
        config = load_config(args.config)
        batch_id = validate_batch_id(args.batch_id)
        spark = build_spark_session(config.spark, f"eventdedup-{batch_id}")
        try:
            result = run_dedup_job(spark, config, batch_id)
        finally:
            spark.stop()
    except EventDedupError as exc:
        print(f"eventdedup: {exc}", file=sys.stderr)
        return 1
    print(f"batch {batch_id}: {dict(result.counts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
