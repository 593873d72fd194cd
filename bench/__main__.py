"""`make bench`: eventdedup against its peers on one workload, in one run, on the real path.

    python -m bench [--events 1000000] [--history-batches 24] [--runs 3] ... (--help lists them)

The main store's history is committed by `eventdedup run-batch` itself, a new process per history
batch (--history seeded writes it directly instead: quicker, and marked so). On it: the rounds in one
warm SparkContext with the peers (their CPU by process group, the S3 store's apart), then the
measured `run-batch` processes (bench.committed): one event and the batch, each from a cold start
(new process, empty local copies) and warm, each a batch of its own committed on top of the ones
before. The history densities (--history-scales) and the seeded `run-batch` figure stay seeded.

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

from bench import RESULTS, commands, committed
from bench.committed import CommandStore, run_order
from bench.history import seed_eventdedup
from bench.parse_floor import measure_floor
from bench.peers import peer_settings, started_peers
from bench.runs import BATCH, ContextRuns, history_densities, rounds
from bench.spark_peers import configurations
from bench.stores import BenchSettings, fresh_store, upload_lines
from bench.summary import print_table, summarise
from bench.workload import Workload, WorkloadSpec
from eventdedup.config import Config, DedupSettings
from eventdedup.s3store import S3Store
from eventdedup.spark.session import build_spark_context
from eventdedup_dev.local_s3 import LocalS3Process, use_local_credentials


def main() -> None:
    args = parse_args()
    use_local_credentials()
    spec = WorkloadSpec(events=args.events, history_batches=args.history_batches,
                        history_batch_events=args.history_batch_events, seed=args.seed).at_current_hour()
    result: dict = {
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "workload": {**spec.to_dict(), "objects": args.objects},
        "settings": {"buckets": args.buckets or DedupSettings().new_cache_buckets, "partitions": args.partitions,
                     "runs": args.runs, "shipped_defaults": not (args.buckets or args.partitions)},
        "history_of": history_of(args.history)}
    with tempfile.TemporaryDirectory(prefix="eventdedup-bench-") as directory:
        work = Path(directory)
        settings = bench_settings(args, spec, work / "copies")
        with fresh_store(settings) as (server, config, store):
            place = CommandStore(store, server.endpoint_url, server.pid, settings, work / "copies")
            workload, variants = Workload(spec), len(run_order(args.runs))
            result["main_history"] = main_history(args.history, place, config, workload, variants, work)
            result.update(in_one_context(args, spec, settings, (server, config, store), work))
            result["real_path"] = committed.measured_runs(place, workload, args.runs, args.objects, work,
                                                          history=args.history)
            result["airflow_dedup_step"] = commands.dedup_step_submitted(
                store, config, place.config_file(work / "submit.toml"), workload, variants + 1, args.objects,
                args.runs, server.pid)
        result["cli_one_event"] = commands.one_event_run_batch()
        result["cli_batch"] = commands.batch_run_batch(settings, spec, args.objects, args.runs)
    if args.parse_lines:
        result["parse_floor"] = measure_floor(args.parse_lines, args.runs, args.seed)
    summarise(result)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n")
    print_table(result)


def bench_settings(args: argparse.Namespace, spec: WorkloadSpec, copies: Path) -> BenchSettings:
    """The shipped defaults but for the window, the tuning asked for, and the host's local-copies
    directory (the bench's own, so that a cold start is an empty directory and warm is this one)."""
    return BenchSettings("bench", {"dedup": {"window_hours": spec.window_hours,
                                             **({"buckets": args.buckets} if args.buckets else {})},
                                   "spark": {"local_cache_dir": str(copies),
                                             **({"partitions": args.partitions} if args.partitions else {})}})


def history_of(main: str) -> dict[str, str]:
    """Each figure's history: committed by `run-batch` itself or seeded (bench.history)."""
    return {"rounds": main, "one_event": main, "s3_requests": main, "promotion": main, "real_path": main,
            "airflow_dedup_step": main, "history_scaling": "seeded", "cli_batch": "seeded", "cli_one_event": "none"}


def main_history(kind: str, place: CommandStore, config: Config, workload: Workload, variants: int, work: Path) -> dict:
    """The main store's history: committed by `eventdedup run-batch` of each history batch, or seeded
    directly (the measured variants' resent events with their true fingerprints)."""
    if kind == "committed":
        return committed.commit_history(place, workload, work)
    started = time.perf_counter()
    seed_eventdedup(place.store, config, workload, variants=range(variants + 2))
    seconds = time.perf_counter() - started
    print(f"eventdedup history: {workload.spec.history_batches} batches seeded in {seconds:.1f}s", flush=True)
    return {"history": "seeded", "batches": workload.spec.history_batches,
            "batch_events": workload.spec.history_batch_events, "seconds": seconds}


def in_one_context(args: argparse.Namespace, spec: WorkloadSpec, settings: BenchSettings,
                   main_store: tuple[LocalS3Process, Config, S3Store], work: Path) -> dict:
    """Everything measured in the bench's long-lived SparkContext: on the main store, the rounds with
    the peers, then the one-event batch, the requests and the promotion (which commits the rounds'
    batch); then the history densities, each on a seeded server of its own. The context stops after."""
    wanted, configured = [p for p in args.peers.split(",") if p], configurations(args.peer_configurations)
    started = time.perf_counter()
    spark = build_spark_context(settings.config("http://127.0.0.1:1").spark, "eventdedup-bench")
    spark.parallelize([0], 1).count()  # executors and a Python worker up
    result: dict = {"spark_startup_seconds": time.perf_counter() - started}
    server, config, store = main_store
    context = ContextRuns(spark, server, settings, config, store, spec, keep=f"main-{args.runs - 1}")
    workload = Workload(spec)
    lines = workload.batch_lines()
    upload_lines(context.store, BATCH, lines, args.objects)
    (work / "batch.json").write_bytes(b"\n".join(lines) + b"\n")
    with started_peers(work / "peers", workload, wanted, configured) as peers:
        result["peer_settings"] = peer_settings(peers)
        result["rounds"] = rounds(context, peers, work / "batch.json", lines, args.runs, bool(args.python_parser))
    (work / "batch.json").unlink()
    result["one_event"] = context.one_event_batch(args.runs)
    result["expected"] = workload.expected_counts()
    result["s3_requests"] = context.count_requests()
    result["promotion"] = context.promote_once()
    scales = [int(scale) for scale in args.history_scales.split(",") if scale]
    result["history_scaling"] = history_densities(spark, settings, spec, scales, args.runs, wanted,
                                                  [c for c in configured if c.name == "tuned"], work)
    spark.stop()  # its executors and Python workers leave the cores to the commands measured next
    return result


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000, help="events per measured batch")
    parser.add_argument("--history-batches", type=int, default=24, help="hourly batches already in the window")
    parser.add_argument("--history-batch-events", type=int, default=200_000, help="events per history batch")
    parser.add_argument("--history", choices=("committed", "seeded"), default="committed",
                        help="the main store's history: committed by `eventdedup run-batch` of each history batch "
                             "(the real path), or seeded directly (bench.history; quicker, marked as such)")
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
