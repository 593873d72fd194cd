"""`make bench`: eventdedup against its peers on one seeded workload, in one run.

    python -m bench [--events 1000000] [--history-batches 24] [--runs 3] ... (--help lists them)

eventdedup runs on the settings a new user gets (a new cache of 16 buckets, partitions and read tasks
derived per batch), the batch arriving as one object; --buckets/--partitions/--objects give a tuned
run, marked as such in the result. Each Spark peer runs as configured (keys spark_batch, streaming)
and tuned for the machine (*_tuned; also at every history density above 1x). Every figure is a
median of --runs rounds, in which the systems take turns; a ratio is the median of the rounds'
ratios. Writes bench/results/<out>.json and prints a table.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from bench import RESULTS, commands
from bench.parse_floor import measure_floor
from bench.peers import peer_settings, started_peers
from bench.runs import BATCH, ContextRuns, history_densities, rounds
from bench.spark_peers import configurations
from bench.stores import BenchSettings, fresh_store, upload_lines
from bench.summary import print_table, summarise
from bench.workload import Workload, WorkloadSpec
from eventdedup.config import DedupSettings
from eventdedup.spark.session import build_spark_context
from eventdedup_dev.local_s3 import use_local_credentials


def main() -> None:
    args = parse_args()
    use_local_credentials()
    spec = WorkloadSpec(events=args.events, history_batches=args.history_batches,
                        history_batch_events=args.history_batch_events, seed=args.seed)
    settings = BenchSettings("bench", {"dedup": {"window_hours": spec.window_hours,
                                                 **({"buckets": args.buckets} if args.buckets else {})},
                                       "spark": {"partitions": args.partitions} if args.partitions else {}})
    result: dict = {
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "workload": {**spec.to_dict(), "objects": args.objects},
        "settings": {"buckets": args.buckets or DedupSettings().new_cache_buckets, "partitions": args.partitions,
                     "runs": args.runs, "shipped_defaults": not (args.buckets or args.partitions)}}
    with tempfile.TemporaryDirectory(prefix="eventdedup-bench-") as directory:
        result.update(in_one_context(args, spec, settings, Path(directory)))
    result["cli_one_event"] = commands.one_event_run_batch()
    result["cli_batch"] = commands.batch_run_batch(settings, spec, args.objects, args.runs)
    result["airflow_dedup_step"] = commands.dedup_step_submitted(settings, spec, args.objects, args.runs)
    if args.parse_lines:
        result["parse_floor"] = measure_floor(args.parse_lines, args.runs, args.seed)
    summarise(result)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n")
    print_table(result)


def in_one_context(args: argparse.Namespace, spec: WorkloadSpec, settings: BenchSettings, work: Path) -> dict:
    """Everything measured in the bench's long-lived SparkContext: the rounds with the peers, then
    the one-event batch, the requests, the promotion, and the history densities."""
    wanted, configured = [p for p in args.peers.split(",") if p], configurations(args.peer_configurations)
    started = time.perf_counter()
    spark = build_spark_context(settings.config("http://127.0.0.1:1").spark, "eventdedup-bench")
    spark.parallelize([0], 1).count()  # executors and a Python worker up
    result: dict = {"spark_startup_seconds": time.perf_counter() - started}
    with fresh_store(settings) as (server, config, store):
        context = ContextRuns(spark, server, settings, config, store, spec, keep=f"main-{args.runs - 1}")
        workload = Workload(spec)
        context.seed(workload)
        lines = workload.batch_lines()
        upload_lines(store, BATCH, lines, args.objects)
        (work / "batch.json").write_bytes(b"\n".join(lines) + b"\n")
        with started_peers(work / "peers", workload, wanted, configured) as peers:
            result["peer_settings"] = peer_settings(peers)
            result["rounds"] = rounds(context, peers, work / "batch.json", lines, args.runs, bool(args.python_parser))
        result["one_event"] = context.one_event_batch(args.runs)
        result["expected"] = workload.expected_counts()
        result["s3_requests"] = context.count_requests()
        result["promotion"] = context.promote_once()
    scales = [int(scale) for scale in args.history_scales.split(",") if scale]
    result["history_scaling"] = history_densities(spark, settings, spec, scales, args.runs, wanted,
                                                  [c for c in configured if c.name == "tuned"], work)
    return result


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000, help="events per measured batch")
    parser.add_argument("--history-batches", type=int, default=24, help="hourly batches already in the window")
    parser.add_argument("--history-batch-events", type=int, default=200_000, help="events per history batch")
    parser.add_argument("--runs", type=int, default=3, help="rounds")
    parser.add_argument("--objects", type=int, default=1, help="input objects the batch arrives in")
    parser.add_argument("--buckets", type=int, default=0, help="0: the shipped default")
    parser.add_argument("--partitions", type=int, default=0, help="0: the shipped default (derived per batch)")
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--history-scales", default="1,10",
                        help="history densities, as multiples of the events per history hour, each on a fresh S3 "
                             "server after the peers' rounds (so 1x is the like-for-like baseline)")
    parser.add_argument("--peers", default="spark_batch,streaming,redis", help="comma-separated; empty for none")
    parser.add_argument("--peer-configurations", default="as_configured,tuned",
                        help="the Spark peers' configurations (bench/spark_peers.py): as_configured, tuned")
    parser.add_argument("--python-parser", type=int, default=1,
                        help="also run eventdedup with the compiled parse core off in every round (0: skip)")
    parser.add_argument("--parse-lines", type=int, default=32_768, help="lines for the parse floor (0: skip)")
    parser.add_argument("--out", default="latest", help="result name under bench/results/ (.json)")
    return parser.parse_args()


if __name__ == "__main__":
    main()
