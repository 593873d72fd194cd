"""Where a batch's CPU goes, by function: the dedup job once on the bench's workload, Spark's Python
profiler on every stage's workers and cProfile on the driver.

    .venv/bin/python bench/profile_batch.py [--events 1000000] [--history-batch-events 200000] [--top 25]

The same seeded store and batch as `make bench` (bench/run_bench.py): the shipped defaults, the
batch as one object. Profiling slows Python code several-fold, so the times here are shares, not
speeds; `make bench` measures speed. Prints the top functions by own time for each stage (the
read stage's workers, the dedup stage's, the driver) and writes bench/results/profile-latest.txt.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_bench import bench_config, upload_lines  # noqa: E402
from seed_history import seed_eventdedup  # noqa: E402
from workload import Workload, WorkloadSpec  # noqa: E402

from eventdedup.inputs.manifest import freeze_batch_inputs  # noqa: E402
from eventdedup.inputs.selector import InputSelector  # noqa: E402
from eventdedup.job.driver import run_dedup_job  # noqa: E402
from eventdedup.s3store import S3Store, make_client  # noqa: E402
from eventdedup.spark.session import build_spark_context  # noqa: E402
from eventdedup_dev.local_s3 import LocalS3Process, use_local_credentials  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--history-batches", type=int, default=24)
    parser.add_argument("--history-batch-events", type=int, default=200_000)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    spec = WorkloadSpec(events=args.events, history_batches=args.history_batches,
                        history_batch_events=args.history_batch_events)
    workload = Workload(spec)
    use_local_credentials()
    report = io.StringIO()
    with LocalS3Process() as server:
        server.client().create_bucket(Bucket="bench")
        bench_args = argparse.Namespace(buckets=0, partitions=0)
        config = bench_config(server.endpoint_url, bench_args, spec)
        store = S3Store(make_client(config.s3), "bench")
        seed_eventdedup(store, config, workload)
        upload_lines(store, "incoming/profile/", workload.batch_lines(), 1)
        spark = build_spark_context(config.spark, "eventdedup-profile", {"spark.python.profile": "true"})
        freeze_batch_inputs(store, config, "profile", InputSelector(input_prefix="incoming/profile/"), spec.anchor)
        driver = cProfile.Profile()
        driver.enable()
        job = run_dedup_job(spark, config, "profile")
        driver.disable()
        print(f"{job.counts['input_lines']:,} lines, {job.counts['output_rows']:,} output rows", file=report)
        with tempfile.TemporaryDirectory() as dumps:
            spark.dump_profiles(dumps)
            for path in sorted(Path(dumps).glob("*.pstats")):
                _top(pstats.Stats(str(path)), f"Python workers, RDD {path.stem}", args.top, report)
        _top(pstats.Stats(driver), "driver", args.top, report)
        spark.stop()
    text = report.getvalue()
    print(text)
    (RESULTS / "profile-latest.txt").write_text(text)
    return 0


def _top(stats: pstats.Stats, title: str, count: int, report: io.StringIO) -> None:
    stream = io.StringIO()
    stats.stream = stream  # type: ignore[attr-defined]
    stats.sort_stats("tottime").print_stats(count)
    body = stream.getvalue()
    start = body.find("   ncalls")
    print(f"\n== {title}: {stats.total_tt:.2f} s profiled ==\n{body[start:] if start >= 0 else body}",  # type: ignore[attr-defined]
          file=report)


if __name__ == "__main__":
    raise SystemExit(main())
