"""The shifted-copies section of `make bench` alone (smaller sizes for a quick look):

    .venv/bin/python bench/shifted_copies.py --events 200000 --history-batch-events 200000 --runs 3

Same arguments as bench/run_bench.py; prints and writes bench/results/<out>-shifted.json.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import print_shifted, summarise_shifted  # noqa: E402
from run_bench import RESULTS, machine, parse_args, shifted_copies  # noqa: E402
from workload import WorkloadSpec  # noqa: E402

from eventdedup.config import SparkSettings  # noqa: E402
from eventdedup.spark.session import build_spark_context  # noqa: E402
from eventdedup_dev.local_s3 import use_local_credentials  # noqa: E402


def main() -> int:
    args = parse_args()
    use_local_credentials()
    spec = WorkloadSpec(events=args.events, history_batches=args.history_batches,
                        history_batch_events=args.history_batch_events or args.events, seed=args.seed)
    spark = build_spark_context(SparkSettings(master="local[2]", partitions=args.partitions), "eventdedup-bench")
    measured = shifted_copies(args, spec, spark)
    rows = summarise_shifted(measured)
    print_shifted(rows)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}-shifted.json").write_text(json.dumps(
        {"machine": machine(), "workload": {**asdict(spec), "anchor": spec.anchor.isoformat()},
         "settings": vars(args), "shifted_copies": measured, "summary": rows}, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
