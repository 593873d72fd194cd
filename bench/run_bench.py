"""`make bench`: eventdedup against its peers on one seeded workload, in one run.

    .venv/bin/python bench/run_bench.py [--events 1000000] [--history-batches 24] [--runs 3] ...

eventdedup runs on the settings a new user gets (a new cache: 16 buckets; partitions and read tasks derived
from the input and the cores), the batch arriving as one object; --buckets/--partitions/--objects
give a tuned run, labelled as such in the result.

Writes bench/results/latest.json, bench/results/latest.png and a table on stdout. Every figure
is a median of --runs runs; each ratio is computed per run (peer time / eventdedup time of the
same round, the systems taking turns) and the median of those ratios is reported.

Each Spark peer runs in each --peer-configurations (bench/peers.py): "as configured" (keys
spark_batch, streaming: the session the bench has always given them, which carries eventdedup's
own 8 shuffle partitions, not Spark's default 200) and "tuned for the machine"
(spark_batch_tuned, streaming_tuned: 4 shuffle partitions a core, adaptive execution on, the
stream's state seeded as a snapshot under those settings). The tuned peers are also measured at
every history density above 1x, on that density's history, taking turns with eventdedup there.
"""
from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from parse_floor import measure_floor  # noqa: E402
from parse_shapes import parse_shapes  # noqa: E402
from peers import AS_CONFIGURED, PeerConfiguration, RedisPeer, configurations  # noqa: E402
from process_cpu import SampledCpu, is_spark_python, spark_groups, spark_phase  # noqa: E402
from report import PYTHON_PARSER, print_table, summarise, write_chart  # noqa: E402
from seed_history import seed_eventdedup, seed_id_parquet, seed_stream_files  # noqa: E402
from workload import Workload, WorkloadSpec, event_line  # noqa: E402

from eventdedup.commit.log import committed_record  # noqa: E402
from eventdedup.config import Config, config_from_mapping  # noqa: E402
from eventdedup.delta.projection import project  # noqa: E402
from eventdedup.inputs.manifest import freeze_batch_inputs
from eventdedup.inputs.selector import InputSelector  # noqa: E402
from eventdedup.job.driver import run_dedup_job  # noqa: E402
from eventdedup.layout import Layout  # noqa: E402
from eventdedup.promotion.promote import promote_batch  # noqa: E402
from eventdedup.s3store import S3Store, make_client  # noqa: E402
from eventdedup.spark.session import build_spark_context  # noqa: E402
from eventdedup_dev.local_s3 import LocalS3Process, use_local_credentials  # noqa: E402
from eventdedup_dev.s3_fault_proxy import FaultProxy  # noqa: E402
from eventdedup_dev.stack import descendants  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    args = parse_args()
    use_local_credentials()
    spec = WorkloadSpec(events=args.events, history_batches=args.history_batches,
                        history_batch_events=args.history_batch_events or args.events, seed=args.seed)
    work = Path(tempfile.mkdtemp(prefix="eventdedup-bench-"))
    result: dict = {"started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
                    "workload": {**asdict(spec), "anchor": spec.anchor.isoformat(), "objects": args.objects},
                    "settings": {"buckets": args.buckets or bench_default_buckets(),
                                 "partitions": args.partitions, "runs": args.runs,
                                 "shipped_defaults": not (args.buckets or args.partitions)}}
    try:
        with LocalS3Process() as server:
            bench = EventdedupBench(server, args, spec, "main")
            spark, startup = bench.start_spark()
            result["spark_startup_seconds"] = startup
            workload = Workload(spec)
            lines = workload.batch_lines()
            bench.seed(workload)
            bench.upload("landing/main/", lines)
            batch_file = work / "batch.json"
            batch_file.write_bytes(b"\n".join(lines) + b"\n")
            wanted = [p for p in args.peers.split(",") if p]
            peers = make_peers(work, workload, wanted, configurations(args.peer_configurations))
            result["peer_settings"] = peer_settings(peers)
            rounds = []
            # The same job with the compiled parse core switched off ([events] compiled_parser =
            # false: the Python parser, as before issue 43), in the same rounds: the before and after.
            python_parser = replace(bench.config, events=replace(bench.config.events, compiled_parser=False))
            for run in range(args.runs):
                row = {"eventdedup": bench.run_job("landing/main/", f"main-{run}")}
                if args.python_parser:
                    row[PYTHON_PARSER] = bench.run_job("landing/main/", f"python-{run}", python_parser)
                for name, peer in peers.items():
                    row[name] = run_peer(name, peer, batch_file, lines, run)
                    print(f"  {name}: {row[name]['seconds']:.2f}s", flush=True)
                rounds.append(row)
            for peer in peers.values():
                peer.close()
            result["rounds"] = rounds
            result["one_event"] = bench.one_event_batch(args.runs)
            result["object_counts"] = bench.object_counts(args.also_objects, lines)
            if args.gzip:
                result["object_counts"] += bench.gzip_object(lines)
            result["peak_memory"] = peak_memory(spark)
            result["expected"] = workload.expected_counts()
            result["s3_requests"] = bench.count_requests(server, "landing/main/")
            result["cache_bytes_per_key"] = bench.cache_bytes_per_key()
            result["promotion"] = bench.promote_once()
            bench.promote_one_event(result["one_event"])
            result["batch_sizes"] = bench.batch_sizes(args.sizes, spec)
        result["history_scaling"] = history_scaling(args, spec, spark, work)
        result["cli_one_event"] = cli_one_event_batch(spec)
        result["cli_batch"] = cli_full_batch(args, spec)
        result["airflow_dedup_step"] = airflow_dedup_step(args, spec)
        if args.shift_hours:
            result["shifted_copies"] = shifted_copies(args, spec, spark)
        if args.parse_lines:
            result["parse_shapes"] = parse_shapes(args.parse_lines, args.runs, args.seed)
            result["parse_floor"] = measure_floor(args.parse_lines, args.runs, args.seed)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summarise(result)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n")
    write_chart(result, RESULTS / f"{args.out}.png")
    print_table(result)
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000, help="events per measured batch")
    parser.add_argument("--history-batches", type=int, default=24, help="hourly batches already in the window")
    parser.add_argument("--history-batch-events", type=int, default=200_000, help="events per history batch")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--objects", type=int, default=1, help="input objects the batch arrives in")
    parser.add_argument("--also-objects", type=int, default=100,
                        help="also measure eventdedup with the batch arriving in this many objects (0: skip)")
    parser.add_argument("--gzip", type=int, default=1, help="also measure the batch as one gzip object (0: skip)")
    parser.add_argument("--buckets", type=int, default=0, help="0: the shipped default")
    parser.add_argument("--partitions", type=int, default=0, help="0: the shipped default (derived per batch)")
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--history-scales", default="1,10",
                        help="history densities to measure, as multiples of the events per history hour; each on "
                             "a fresh S3 server after the peers are done, so 1x is the like-for-like baseline")
    parser.add_argument("--sizes", default="", help="further batch sizes to measure (linearity)")
    parser.add_argument("--peers", default="spark_batch,streaming,redis", help="comma-separated; empty for none")
    parser.add_argument("--peer-configurations", default="as_configured,tuned",
                        help="the Spark peers' configurations, comma-separated (bench/peers.py): as_configured "
                             "(keys spark_batch, streaming), tuned (keys *_tuned; also measured at every history "
                             "scale above 1)")
    parser.add_argument("--shift-hours", type=int, default=0,
                        help="also measure the batch with its cross-batch copies re-stamped up to this many hours "
                             "later, against the same batch unshifted (0: skip)")
    parser.add_argument("--python-parser", type=int, default=1,
                        help="also run eventdedup with the compiled parse core off in every round (0: skip)")
    parser.add_argument("--parse-lines", type=int, default=32_768,
                        help="lines per id and time shape in the parse section, one process (0: skip)")
    parser.add_argument("--out", default="latest", help="result name under bench/results/ (.json, .png)")
    return parser.parse_args()


def machine() -> dict:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


class EventdedupBench:
    def __init__(self, server: LocalS3Process, args: argparse.Namespace, spec: WorkloadSpec, name: str,
                 **dedup: object) -> None:
        self.server, self.args, self.spec = server, args, spec
        server.client().create_bucket(Bucket="bench")
        self.config = bench_config(server.endpoint_url, args, spec, **dedup)
        self.store = S3Store(make_client(self.config.s3), "bench")
        self.spark = None
        self.last_batch: str | None = None

    def start_spark(self) -> tuple[object, float]:
        started = time.perf_counter()
        self.spark = build_spark_context(self.config.spark, "eventdedup-bench")
        self.spark.parallelize([0], 1).count()  # executors and a Python worker up
        return self.spark, time.perf_counter() - started

    def seed(self, workload: Workload) -> None:
        started = time.perf_counter()
        seed_eventdedup(self.store, self.config, workload)
        print(f"eventdedup history: {workload.spec.history_batches} batches seeded in "
              f"{time.perf_counter() - started:.1f}s", flush=True)

    def upload(self, prefix: str, lines: list[bytes], objects: int = 0) -> None:
        upload_lines(self.store, prefix, lines, objects or self.args.objects)

    def run_job(self, prefix: str, batch_id: str, config: Config | None = None) -> dict:
        config = config or self.config
        freeze_batch_inputs(self.store, config, batch_id, InputSelector(input_prefix=prefix), self.spec.anchor)
        groups = spark_groups(spark_jvm_pid(self.spark), self.server.pid)
        with SampledCpu(groups, spark_phase(self.spark)) as cpu:
            started = time.perf_counter()
            job = run_dedup_job(self.spark, config, batch_id)
            seconds = time.perf_counter() - started
        record = {"seconds": seconds, "server_cpu_seconds": cpu.used["server"], "cpu_seconds": cpu.used,
                  "cpu_seconds_by_phase": cpu.by_phase,
                  "output_rows": job.counts["output_rows"], "counts": dict(job.counts)}
        print(f"eventdedup {batch_id}: {seconds:.2f}s ({job.counts['input_lines'] / seconds:,.0f} events/s)",
              flush=True)
        if batch_id not in (self.last_batch_to_keep(), "one-promoted"):
            self.store.delete_prefix(Layout(config.layout).staging_root(batch_id))
        self.last_batch = batch_id
        return record

    def one_event_batch(self, runs: int) -> dict:
        """The fixed cost of a batch: one event through the same job."""
        line = Workload(replace(self.spec, events=1)).batch_lines()[:1]
        seconds = []
        for run in range(runs):
            prefix = f"landing/one-{run}/"
            self.upload(prefix, line, objects=1)
            seconds.append(self.run_job(prefix, f"one-{run}")["seconds"])
        return {"seconds": seconds}

    def promote_one_event(self, record: dict) -> None:
        """A one-event batch's promotion, on top of the promoted main batch."""
        self.run_job("landing/one-0/", "one-promoted")
        started = time.perf_counter()
        promote_batch(self.store, self.config, "one-promoted")
        record["promotion_seconds"] = [time.perf_counter() - started]

    def object_counts(self, count: int, lines: list[bytes]) -> list[dict]:
        if not count:
            return []
        prefix = f"landing/objects-{count}/"
        self.upload(prefix, lines, objects=count)
        runs = [self.run_job(prefix, f"objects-{count}-{run}") for run in range(self.args.runs)]
        self.store.delete_prefix(prefix)
        return [{"objects": count, "runs": runs}]

    def gzip_object(self, lines: list[bytes]) -> list[dict]:
        """The batch as one gzip object (level 1): it cannot be read in byte ranges, so it is cut
        into shares of its inflated lines, each share inflating the whole object."""
        prefix = "landing/gzip/"
        self.store.put_bytes(f"{prefix}part-000.jsonl.gz", gzip.compress(b"\n".join(lines) + b"\n", 1, mtime=0))
        runs = [self.run_job(prefix, f"gzip-{run}") for run in range(self.args.runs)]
        self.store.delete_prefix(prefix)
        return [{"objects": 1, "gzip": True, "runs": runs}]

    def last_batch_to_keep(self) -> str:
        return f"main-{self.args.runs - 1}"

    def count_requests(self, server: LocalS3Process, prefix: str) -> dict:
        """One more (untimed) job through a counting proxy: every request of driver and executors."""
        with FaultProxy(server.endpoint_url) as proxy:
            config = bench_config(proxy.endpoint_url, self.args, self.spec)
            freeze_batch_inputs(self.store, config, "requests", InputSelector(input_prefix=prefix), self.spec.anchor)
            proxy.arm(None)
            job = run_dedup_job(self.spark, config, "requests")
            requests = list(proxy.requests)
        self.store.delete_prefix(Layout(config.layout).staging_root("requests"))
        by_method: dict[str, int] = {}
        for request in requests:
            by_method[request.split()[0]] = by_method.get(request.split()[0], 0) + 1
        cache_bytes = sum(size for request, size in proxy.bytes_served.items() if "/cache/" in request)
        touched = len([r for r in requests if r.startswith("GET") and "/cache/" in r])
        written = job.counts["cache_keys_written"]
        touched_keys = len({r.split("/cache/")[1].rsplit("/", 1)[0] for r in requests if "/cache/" in r})
        return {"total": len(requests), "by_method": by_method, "cache_segment_gets": touched,
                "touched_cache_keys": touched_keys, "per_touched_key": len(requests) / max(touched_keys, 1),
                "input_objects": self.args.objects, "cache_keys_written": written, "cache_bytes_read": cache_bytes}

    def cache_bytes_per_key(self) -> dict:
        """Staged segments of the last measured batch: bytes on S3 over the entries they hold."""
        from eventdedup.cache.guard import decode_guard
        from eventdedup.cache.segment import decode_segment
        from eventdedup.layout import GUARD_SUFFIX

        root = Layout(self.config.layout).staging_root(self.last_batch_to_keep())
        size = entries = guard_size = guard_entries = 0
        for item in self.store.list(root):
            if "/cache/" in item.key and item.key.endswith(GUARD_SUFFIX):
                guard_size += item.size
                guard_entries += len(decode_guard(self.store.get_bytes(item.key), item.key))
            elif "/cache/" in item.key:
                runs = decode_segment(self.store.get_bytes(item.key), item.key)
                size += item.size
                entries += sum(len(run) for run in runs)
        return {"bytes": size, "entries": entries, "bytes_per_key": size / max(entries, 1),
                "guard_bytes": guard_size, "guard_entries": guard_entries,
                "guard_bytes_per_id": guard_size / max(guard_entries, 1)}

    def promote_once(self) -> dict:
        """The main batch's promotion, its Delta table projection timed on its own: the table is
        first brought up to the seeded history (created from its committed view, one commit), then
        the batch is committed, then its one Delta commit is projected (footers read, then the commit)."""
        on = replace(self.config, table=replace(self.config.table, delta="on"))
        off = replace(self.config, table=replace(self.config.table, delta="off"))
        started = time.perf_counter()
        project(self.store, on)
        backfill = time.perf_counter() - started
        started = time.perf_counter()
        outcome = promote_batch(self.store, off, self.last_batch_to_keep())
        commit = time.perf_counter() - started
        started = time.perf_counter()
        projection = project(self.store, on)
        projecting = time.perf_counter() - started
        assert projection.projected == (outcome.version,), projection
        files = sum(1 for obj in committed_record(self.store, Layout(self.config.layout), outcome.version).objects
                    if obj.kind == "data")
        print(f"promotion {commit:.2f}s; its Delta table projection {projecting:.2f}s ({files} data files); "
              f"the table created over the seeded history in {backfill:.2f}s", flush=True)
        return {"seconds": commit + projecting, "commit_seconds": commit, "delta_projection_seconds": projecting,
                "delta_data_files": files, "delta_backfill_seconds": backfill, "outcome": str(outcome)}

    def batch_sizes(self, sizes: str, spec: WorkloadSpec) -> list[dict]:
        out = []
        for size in [int(s) for s in sizes.split(",") if s]:
            lines = Workload(replace(spec, events=size)).batch_lines()
            prefix = f"landing/size-{size}/"
            self.upload(prefix, lines)
            del lines
            runs = [self.run_job(prefix, f"size-{size}-{run}") for run in range(self.args.runs)]
            self.store.delete_prefix(prefix)
            out.append({"events": size, "runs": runs})
        return out


def bench_config(endpoint: str, args: argparse.Namespace, spec: WorkloadSpec, **dedup: object) -> Config:
    """The shipped defaults, but for the window (the workload's) and what the arguments tune."""
    tuned: dict = {"buckets": args.buckets} if args.buckets else {}
    return config_from_mapping({
        "s3": {"endpoint_url": endpoint, "bucket": "bench"},
        "dedup": {"window_hours": spec.window_hours, **tuned, **dedup},
        "spark": {"partitions": args.partitions},
    })


def bench_default_buckets() -> int:
    from eventdedup.config import DedupSettings

    return DedupSettings().new_cache_buckets


def peak_memory(spark: object) -> dict:
    """Peak resident memory (VmHWM) of the driver's Python, its JVM and every Spark Python process
    of that JVM alive now (workers are reused, so those that ran the rounds): an upper bound on
    the job's peak (pages a forked worker shares with the daemon count in both)."""
    jvm_pid = spark_jvm_pid(spark)
    workers = [pid for pid, _ in descendants(jvm_pid) if is_spark_python(Path(f"/proc/{pid}"))]
    return {"driver_python_bytes": _peak(os.getpid()), "jvm_bytes": _peak(jvm_pid),
            "python_workers": len(workers), "python_workers_bytes": sum(_peak(pid) for pid in workers)}


def spark_jvm_pid(spark: object) -> int:
    return int(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[attr-defined]


def _peak(pid: int) -> int:
    return _status_bytes(pid, "VmHWM:")


def _status_bytes(pid: int, field: str) -> int:
    """A memory field of /proc/<pid>/status in bytes; 0 once the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class TreeMemory:
    """The peak of a process tree's summed resident memory, sampled every `interval` seconds (a
    spike shorter than that can be missed; pages a forked worker shares with its parent count in
    both, so the sum errs high), and the tree's make-up at that peak: the command's own Python,
    its JVM, Spark's Python daemon and workers."""

    def __init__(self, root: int, interval: float = 0.05) -> None:
        self.root, self.interval = root, interval
        self.peak = {"total_bytes": 0, "command_python_bytes": 0, "jvm_bytes": 0, "python_workers_bytes": 0,
                     "python_workers": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            parts = {"command_python_bytes": 0, "jvm_bytes": 0, "python_workers_bytes": 0, "python_workers": 0}
            for pid in [self.root, *(child for child, _ in descendants(self.root))]:
                rss = _resident(pid)
                if pid == self.root:
                    parts["command_python_bytes"] += rss
                elif is_spark_python(Path(f"/proc/{pid}")):
                    parts["python_workers_bytes"] += rss
                    parts["python_workers"] += 1
                else:  # the JVM (and nothing else the command starts)
                    parts["jvm_bytes"] += rss
            total = parts["command_python_bytes"] + parts["jvm_bytes"] + parts["python_workers_bytes"]
            if total > self.peak["total_bytes"]:
                self.peak = {"total_bytes": total, **parts}


def _resident(pid: int) -> int:
    return _status_bytes(pid, "VmRSS:")


def upload_lines(store: S3Store, prefix: str, lines: list[bytes], objects: int) -> None:
    """The lines as `objects` landing objects of about equal length, in order."""
    per = -(-len(lines) // objects)
    for i in range(objects):
        store.put_bytes(f"{prefix}part-{i:03d}.jsonl", b"\n".join(lines[i * per:(i + 1) * per]) + b"\n")


def run_batch_command(config: Path, batch_id: str, prefix: str,
                      env: dict[str, str] | None = None) -> tuple[float, str, dict, dict]:
    """`eventdedup run-batch --timings` as a new process: its wall seconds, its stdout, the
    phases it timed itself, and its process tree's peak memory (TreeMemory)."""
    started = time.perf_counter()
    process = subprocess.Popen([str(Path(sys.executable).parent / "eventdedup"), "run-batch", "--config", str(config),
                                "--batch-id", batch_id, "--input-prefix", prefix, "--timings"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    with TreeMemory(process.pid) as memory:
        stdout, stderr = process.communicate()
    wall = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"run-batch failed: {stderr[-3000:]}")
    # The JVM's output is relayed by a thread: a line of it may follow ours.
    timings = next(json.loads(line) for line in reversed(stderr.splitlines())
                   if line.startswith("{") and '"total"' in line)
    return wall, stdout, timings, memory.peak


def median_phases(phases: list[dict]) -> dict:
    return {name: statistics.median(p[name] for p in phases) for name in phases[0]}


def cli_one_event_batch(spec: WorkloadSpec) -> dict:
    """`eventdedup run-batch` of a one-event batch as a user runs it: a new process, Spark start-up,
    staging, the job and the promotion, wall time; its own phase breakdown (`--timings`, measured
    inside `main`); and Python's start-up and imports alone."""
    with LocalS3Process() as server, tempfile.TemporaryDirectory(prefix="eventdedup-cli-") as root:
        server.client().create_bucket(Bucket="cli")
        config = Path(root) / "eventdedup.toml"
        config.write_text(f'[s3]\nbucket = "cli"\nendpoint_url = "{server.endpoint_url}"\n')
        now = datetime.now(timezone.utc)
        line = event_line(bytes(range(16)), int(now.timestamp()) * 1_000_000 - 60_000_000)
        store = S3Store(server.client(), "cli")
        walls, phases = [], []
        for run in range(3):
            store.put_bytes(f"landing/cli-{run}/part-0.jsonl", line + b"\n")
            wall, _, timings, _ = run_batch_command(config, f"cli-{run}", f"landing/cli-{run}/")
            walls.append(wall)
            # What `main` does not see: the interpreter's start, imports before it, and the exit.
            timings["outside_main"] = walls[-1] - timings["total"]
            phases.append(timings)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import eventdedup.cli, pyspark.sql"], check=True)
        imports = time.perf_counter() - started
    return {"wall_seconds": walls, "python_imports_seconds": imports, "phases": phases,
            "median_phases": median_phases(phases)}


def cli_full_batch(args: argparse.Namespace, spec: WorkloadSpec) -> dict:
    """The measured batch through `eventdedup run-batch` as the CLI runs every batch: a new
    process whose JVM and Python workers run their first batch (the rounds above reuse one
    context), on a fresh server holding the window's history, configured by its file alone. The
    workload is anchored at the current hour, since the command judges the window by the clock. Wall time, the command's own
    phases (--timings), and its output rows against the workload's unique events."""
    workload = Workload(anchored_now(spec))
    lines = workload.batch_lines()
    expected = workload.expected_counts()["unique_new"]
    walls, phases, rows, memory = [], [], [], []
    for run in range(args.runs):
        with server_with_history(args, workload) as (_, store, toml):
            upload_lines(store, "landing/cli/", lines, args.objects)  # as the rounds above receive it
            wall, stdout, timings, peak = run_batch_command(toml, f"cli-batch-{run}", "landing/cli/",
                                                            command_environment())
            walls.append(wall)
            phases.append(timings)
            memory.append(peak)
            counts = next(json.loads(line.split(": ", 1)[1]) for line in stdout.splitlines() if line.startswith("batch "))
            rows.append(counts["output_rows"])
            if rows[-1] != expected:
                raise SystemExit(f"run-batch emitted {rows[-1]:,} rows; the workload has {expected:,} unique events")
        print(f"eventdedup run-batch {run}: {walls[-1]:.2f}s wall, {phases[-1]}, peak memory "
              f"{memory[-1]['total_bytes'] / 2**30:.2f} GiB", flush=True)
    return {"wall_seconds": walls, "phases": phases, "median_phases": median_phases(phases), "output_rows": rows,
            "expected_rows": expected, "peak_memory": memory}


def anchored_now(spec: WorkloadSpec) -> WorkloadSpec:
    """The workload anchored at the current hour: a command judges the window by the clock."""
    return replace(spec, anchor=datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0))


@contextlib.contextmanager
def server_with_history(args: argparse.Namespace, workload: Workload) -> Iterator[tuple[Config, S3Store, Path]]:
    """A fresh S3 server holding the workload's window of history, and the configuration file a
    command run against it reads."""
    with LocalS3Process() as server, tempfile.TemporaryDirectory(prefix="eventdedup-command-") as root:
        config = bench_config(server.endpoint_url, args, workload.spec)
        server.client().create_bucket(Bucket=config.s3.bucket)
        store = S3Store(make_client(config.s3), config.s3.bucket)
        seed_eventdedup(store, config, workload)
        yield config, store, command_config(Path(root), config, args, workload.spec)


def command_config(root: Path, config: Config, args: argparse.Namespace, spec: WorkloadSpec) -> Path:
    """The bench's settings as the configuration file a command reads."""
    toml = root / "eventdedup.toml"
    toml.write_text(f'[s3]\nbucket = "{config.s3.bucket}"\nendpoint_url = "{config.s3.endpoint_url}"\n'
                    f"[dedup]\nwindow_hours = {spec.window_hours}\n"
                    + (f"buckets = {args.buckets}\n" if args.buckets else "")
                    + (f"[spark]\npartitions = {args.partitions}\n" if args.partitions else ""))
    return toml


def command_environment() -> dict[str, str]:
    # EVENTDEDUP_* variables would override the file: the rounds above ignore them.
    return {name: value for name, value in os.environ.items() if not name.startswith("EVENTDEDUP_")}


def airflow_dedup_step(args: argparse.Namespace, spec: WorkloadSpec) -> dict:
    """The pipeline DAG's Spark task as Airflow's operator submits it on its default master:
    `spark-submit spark_jobs/dedup_batch.py` (a new driver JVM and new workers every batch) with
    the operator's shape for `local[*]` (eventdedup.spark.deployment), wall time, for a one-event
    batch and the measured batch, alternating. One server holds the window's history; the step
    only stages its result, so every run sees the same history. Staging and promotion are tasks
    of their own and are not in these figures."""
    from eventdedup.spark.deployment import submit_shape

    anchored = anchored_now(spec)
    workload = Workload(anchored)
    lines = workload.batch_lines()
    expected = {"one_event": 1, "batch": workload.expected_counts()["unique_new"]}
    shape = submit_shape("local[*]", sys.executable, environ=command_environment())
    command = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[*]",
               "--name", "eventdedup-dedup-batch"]
    for key, value in {"spark.ui.enabled": "false", **shape.conf}.items():  # the operator's conf
        command += ["--conf", f"{key}={value}"]
    walls: dict[str, list[float]] = {"one_event": [], "batch": []}
    with server_with_history(args, workload) as (config, store, toml):
        upload_lines(store, "landing/batch/", lines, args.objects)
        # an id of its own, a minute before the anchor: one new event (as cli_one_event_batch's)
        upload_lines(store, "landing/one_event/", [event_line(bytes(range(16)), anchored.anchor_us - 60_000_000)], 1)
        for run in range(args.runs):
            for size in ("one_event", "batch"):
                batch_id = f"submit-{size.replace('_', '-')}-{run}"
                freeze_batch_inputs(store, config, batch_id, InputSelector(input_prefix=f"landing/{size}/"),
                                    anchored.anchor)
                started = time.perf_counter()
                done = subprocess.run([*command, str(ROOT / "spark_jobs" / "dedup_batch.py"), "--config", str(toml),
                                       "--batch-id", batch_id], capture_output=True, text=True,
                                      env={**command_environment(), **shape.env})
                walls[size].append(time.perf_counter() - started)
                if done.returncode != 0:
                    raise SystemExit(f"spark-submit of the dedup step failed: {done.stderr[-3000:]}")
                counts = json.loads(next(line for line in reversed(done.stdout.splitlines()) if line.startswith("{")))
                if counts["output_rows"] != expected[size]:
                    raise SystemExit(f"the submitted dedup step emitted {counts['output_rows']:,} rows; "
                                     f"the {size} batch has {expected[size]:,} unique events")
                print(f"spark-submit dedup step, {size} {run}: {walls[size][-1]:.2f}s wall", flush=True)
    return {"wall_seconds": walls, "output_rows_exact": True}


class SubprocessPeer:
    """A Spark peer served by its own long-lived process and JVM (bench/peer_run.py)."""

    def __init__(self, name: str, root: Path, spec: WorkloadSpec,
                 configuration: PeerConfiguration = AS_CONFIGURED) -> None:
        self.name, self.key = name, configuration.key(name)
        spec_json = json.dumps({**asdict(spec), "anchor": spec.anchor.isoformat()})
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve().parent / "peer_run.py"), name, str(root), spec_json,
             configuration.to_json()],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def step(self, **command: object) -> dict:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        for line in self.process.stdout:
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])
        raise RuntimeError(f"the {self.key} peer process died (exit {self.process.wait()})")

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(120)


SPARK_PEERS = ("spark_batch", "streaming")


def make_peers(work: Path, workload: Workload, wanted: list[str], configured: list[PeerConfiguration]) -> dict:
    """The peers in the order they take turns: each Spark peer in each configuration, then Redis.
    A Spark peer's configurations after the first get hard links to the first's history files
    (never modified: the batch peer adds and removes files of its own, the stream only reads)."""
    peers: dict = {}
    for name in [p for p in SPARK_PEERS if p in wanted]:
        first: Path | None = None
        for configuration in configured:
            started = time.perf_counter()
            key, history = configuration.key(name), work / configuration.key(name) / HISTORY_DIRS[name]
            if first is None:
                (seed_id_parquet if name == "spark_batch" else seed_stream_files)(history, workload)
                first = history
            else:
                shutil.copytree(first, history, copy_function=os.link)
            peer = SubprocessPeer(name, work / key, workload.spec, configuration)
            if name == "streaming":
                peer.step(action="seed")
            peers[key] = peer
            print(f"{key} history {'through the query' if name == 'streaming' else 'written'} in "
                  f"{time.perf_counter() - started:.1f}s", flush=True)
        if name == "streaming":
            drop_stream_history(work, configured)
    if "redis" in wanted:
        if shutil.which("redis-server") is None:
            raise SystemExit("redis-server is not installed: `apt-get install redis-server` "
                             "(make bench does it as root)")
        peer = RedisPeer(work / "redis", workload)
        started = time.perf_counter()
        peer.seed()
        print(f"redis history loaded in {time.perf_counter() - started:.1f}s ({peer.memory_bytes() / 2**20:.0f} MiB)",
              flush=True)
        peers["redis"] = peer
    return peers


HISTORY_DIRS = {"spark_batch": "ids", "streaming": "source"}


def drop_stream_history(work: Path, configured: list[PeerConfiguration]) -> None:
    """Once every streaming peer is seeded, its history's JSON and the seed's output are read no
    more (the source's log in the checkpoint lists the files seen): 4 GB of disk at 10x."""
    for configuration in configured:
        root = work / configuration.key("streaming")
        for history_file in (root / "source").glob("history-*.json"):
            history_file.unlink()
        shutil.rmtree(root / "out-history", ignore_errors=True)


def peer_settings(peers: dict) -> dict:
    """What each Spark peer's session runs with, asked of the session itself."""
    return {key: {"peer": peer.name, **peer.step(action="settings")} for key, peer in peers.items()
            if isinstance(peer, SubprocessPeer)}


def run_peer(name: str, peer: object, batch_file: Path, lines: list[bytes], run: int) -> dict:
    if isinstance(peer, SubprocessPeer):
        return peer.step(action="run", run=run, batch_file=str(batch_file))
    ids, times = ids_and_times(lines)
    outcome = peer.run(ids, times, f"main-{run}")
    return {"seconds": outcome.seconds, "output_rows": outcome.output_rows, **outcome.detail}


def ids_and_times(lines: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """What the Redis peer's caller hands it: id bytes and event times (parsing is not timed)."""
    import uuid

    events = [orjson.loads(line) for line in lines]
    ids = np.array([uuid.UUID(e["event_id"]).bytes for e in events], "S16")
    times = np.array([int(datetime.fromisoformat(e["created_at"]).timestamp() * 1_000_000) for e in events], np.int64)
    return ids, times


def history_scaling(args: argparse.Namespace, spec: WorkloadSpec, spark: object, work: Path) -> list[dict]:
    """The same batch on histories of 1x and 10x the events per hour (the same hours), each on its
    own S3 server, with the cache bytes one more (untimed) run reads. The servers are up together
    and the densities take turns round by round, as the peers do: a host whose speed drifts over
    the minutes this takes (one run's 10x rounds came 12-16 % slower in a stage the history does
    not touch) then hits each density alike, and growth is read per round.

    Above 1x the tuned Spark peers are measured too, each on that density's history in its own
    format (the rounds above hold them at 1x), taking their turns right after eventdedup's run on
    the same density; their ratios are read per round against it."""
    scales = [int(s) for s in args.history_scales.split(",") if s]
    tuned = [c for c in configurations(args.peer_configurations) if c.name == "tuned"]
    wanted = [p for p in args.peers.split(",") if p in SPARK_PEERS]
    with contextlib.ExitStack() as servers:
        benches = []
        for scale in scales:
            scaled = replace(spec, history_batch_events=spec.history_batch_events * scale)
            server = servers.enter_context(LocalS3Process())
            bench = EventdedupBench(server, args, scaled, f"x{scale}")
            bench.spark = spark
            workload = Workload(scaled)
            bench.seed(workload)
            lines = workload.batch_lines()
            bench.upload("landing/main/", lines)
            peers = servers.enter_context(scaled_peers(work / f"x{scale}", workload, lines, wanted,
                                                       tuned if scale != 1 else []))
            benches.append((scale, scaled, server, bench, peers))
        runs: dict[int, list[dict]] = {scale: [] for scale in scales}
        peer_runs: dict[int, dict[str, list[dict]]] = {scale: {} for scale in scales}
        for run in range(args.runs):
            for scale, _, _, bench, (peers, batch_file) in benches:
                runs[scale].append(bench.run_job("landing/main/", f"x{scale}-{run}"))
                for key, peer in peers.items():
                    peer_runs[scale].setdefault(key, []).append(run_peer(key, peer, batch_file, [], run))
                    print(f"  {key} at {scale}x: {peer_runs[scale][key][-1]['seconds']:.2f}s", flush=True)
        out = []
        for scale, scaled, server, bench, _ in benches:
            requests = bench.count_requests(server, "landing/main/")
            out.append({"scale": scale, "history_batch_events": scaled.history_batch_events, "runs": runs[scale],
                        "cache_bytes_read": requests["cache_bytes_read"], "s3_requests": requests["total"],
                        **({"peers": peer_runs[scale]} if peer_runs[scale] else {})})
    return out


@contextlib.contextmanager
def scaled_peers(root: Path, workload: Workload, lines: list[bytes], wanted: list[str],
                 configured: list[PeerConfiguration]) -> Iterator[tuple[dict, Path]]:
    """The Spark peers of one history density and the batch file they read, closed and their
    files removed afterwards (a 10x history is several GB in the peers' formats)."""
    root.mkdir(parents=True, exist_ok=True)
    batch_file = root / "batch.json"
    peers: dict = {}
    try:
        if configured and wanted:
            batch_file.write_bytes(b"\n".join(lines) + b"\n")
            peers = make_peers(root, workload, wanted, configured)
        yield peers, batch_file
    finally:
        for peer in peers.values():
            peer.close()
        shutil.rmtree(root, ignore_errors=True)


def shifted_copies(args: argparse.Namespace, spec: WorkloadSpec, spark: object) -> list[dict]:
    """The batch whose cross-batch copies carry their original times, then the same batch with
    them re-stamped up to --shift-hours later, each on its own S3 server and measured with the
    Spark batch peer beside it. The time is left out of the fingerprint (a re-stamped retry is a
    natural duplicate), so every copy must be dropped: output rows equal the anti-join's."""
    out = []
    for shift in (0, args.shift_hours):
        shifted = replace(spec, cross_batch_shift_hours=shift)
        workload = Workload(shifted)
        lines = workload.batch_lines()
        with LocalS3Process() as server, tempfile.TemporaryDirectory(prefix="eventdedup-shift-") as root:
            bench = EventdedupBench(server, args, shifted, f"shift{shift}", fingerprint_exclude=["created_at"])
            bench.spark = spark
            bench.seed(workload)
            bench.upload("landing/main/", lines)
            batch_file = Path(root) / "batch.json"
            batch_file.write_bytes(b"\n".join(lines) + b"\n")
            seed_id_parquet(Path(root) / "spark_batch" / "ids", workload)
            peer = SubprocessPeer("spark_batch", Path(root) / "spark_batch", shifted)
            rounds = []
            for run in range(args.runs):
                rounds.append({"eventdedup": bench.run_job("landing/main/", f"shift{shift}-{run}"),
                               "spark_batch": run_peer("spark_batch", peer, batch_file, lines, run)})
                print(f"  spark_batch: {rounds[-1]['spark_batch']['seconds']:.2f}s", flush=True)
            peer.close()
        out.append({"shift_hours": shift, "expected": workload.expected_counts(), "rounds": rounds})
    return out


if __name__ == "__main__":
    sys.exit(main())
