"""Where a batch's CPU goes, by function: the dedup job once on the main bench's store and batch,
Spark's Python profiler on every stage's workers and cProfile on the driver.

    python -m bench.profile [--events 1000000] [--history-batch-events 200000] [--top 25]

Profiling slows Python code several-fold, so the times are shares, not speeds (`make bench` measures
speed). Prints the top functions by own time for each stage's workers and the driver, and writes
bench/results/profile-latest.txt.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
from pathlib import Path

from bench import RESULTS
from bench.history import seed_eventdedup
from bench.stores import BenchSettings, fresh_store, upload_lines
from bench.workload import Workload, WorkloadSpec
from eventdedup.inputs.manifest import freeze_batch_inputs
from eventdedup.inputs.selector import InputSelector
from eventdedup.job.driver import run_dedup_job
from eventdedup.spark.session import build_spark_context
from eventdedup_dev.local_s3 import use_local_credentials


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--history-batches", type=int, default=24)
    parser.add_argument("--history-batch-events", type=int, default=200_000)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    spec = WorkloadSpec(events=args.events, history_batches=args.history_batches,
                        history_batch_events=args.history_batch_events)
    use_local_credentials()
    report = io.StringIO()
    workload = Workload(spec)
    with fresh_store(BenchSettings("bench", {"dedup": {"window_hours": spec.window_hours}})) as (_, config, store):
        seed_eventdedup(store, config, workload)
        upload_lines(store, "landing/profile/", workload.batch_lines())
        spark = build_spark_context(config.spark, "eventdedup-profile", {"spark.python.profile": "true"})
        freeze_batch_inputs(store, config, "profile", InputSelector(input_prefix="landing/profile/"), spec.anchor)
        driver = cProfile.Profile()
        job = driver.runcall(run_dedup_job, spark, config, "profile")
        print(f"{job.counts['input_lines']:,} lines, {job.counts['output_rows']:,} output rows", file=report)
        with tempfile.TemporaryDirectory() as dumps:
            spark.dump_profiles(dumps)
            for path in sorted(Path(dumps).glob("*.pstats")):
                print_top(pstats.Stats(str(path)), f"Python workers, RDD {path.stem}", args.top, report)
        print_top(pstats.Stats(driver), "driver", args.top, report)
        spark.stop()
    print(report.getvalue())
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "profile-latest.txt").write_text(report.getvalue())


def print_top(stats: pstats.Stats, title: str, count: int, report: io.StringIO) -> None:
    stream = io.StringIO()
    stats.stream = stream  # type: ignore[attr-defined]
    stats.sort_stats("tottime").print_stats(count)
    body = stream.getvalue()
    start = body.find("   ncalls")
    print(f"\n== {title}: {stats.total_tt:.2f} s profiled ==\n{body[start:] if start >= 0 else body}",  # type: ignore[attr-defined]
          file=report)


if __name__ == "__main__":
    main()
