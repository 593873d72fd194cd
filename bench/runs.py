"""The main bench's measured runs in one long-lived SparkContext: the rounds in which eventdedup (with
the compiled parse core on, then off) and the peers take turns, the one-event batch, the requests
and bytes one batch makes, the promotion with its Delta projection, and the denser histories."""
from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from bench.history import seed_eventdedup
from bench.peers import SPARK_PEERS, started_peers
from bench.processes import GroupCpu, spark_groups, spark_jvm_pid, spark_phase
from bench.stores import BenchSettings, fresh_store, upload_lines
from bench.summary import PYTHON_PARSER
from bench.traffic import requests, traffic
from bench.workload import Workload, WorkloadSpec
from eventdedup.commit.log import committed_record
from eventdedup.config import Config
from eventdedup.delta.projection import project
from eventdedup.inputs.manifest import freeze_batch_inputs
from eventdedup.inputs.selector import InputSelector
from eventdedup.job.driver import run_dedup_job
from eventdedup.layout import Layout
from eventdedup.promotion.promote import promote_batch
from eventdedup.s3store import S3Store
from eventdedup_dev.local_s3 import LocalS3Process
from eventdedup_dev.s3_fault_proxy import FaultProxy

BATCH = "landing/main/"
T = TypeVar("T")


class ContextRuns:
    """The dedup job on one store's history in a warm SparkContext, each run's CPU by process group
    and stage; staged batches are removed but for `keep`, promoted at the end."""

    def __init__(self, spark: object, server: LocalS3Process, settings: BenchSettings, config: Config,
                 store: S3Store, spec: WorkloadSpec, keep: str = "") -> None:
        self.spark, self.server, self.settings, self.config, self.store = spark, server, settings, config, store
        self.spec, self.keep = spec, keep

    def seed(self, workload: Workload) -> None:
        started = time.perf_counter()
        seed_eventdedup(self.store, self.config, workload)
        print(f"eventdedup history: {workload.spec.history_batches} batches of {workload.spec.history_batch_events:,} "
              f"seeded in {time.perf_counter() - started:.1f}s", flush=True)

    def run_job(self, prefix: str, batch_id: str, config: Config | None = None) -> dict:
        config = config or self.config
        freeze_batch_inputs(self.store, config, batch_id, InputSelector(input_prefix=prefix), self.spec.anchor)
        with GroupCpu(spark_groups(spark_jvm_pid(self.spark), self.server.pid), spark_phase(self.spark)) as cpu:
            started = time.perf_counter()
            job = run_dedup_job(self.spark, config, batch_id)
            seconds = time.perf_counter() - started
        print(f"eventdedup {batch_id}: {seconds:.2f}s ({job.counts['input_lines'] / seconds:,.0f} events/s)", flush=True)
        if batch_id != self.keep:
            self.store.delete_prefix(Layout(config.layout).staging_root(batch_id))
        return {"seconds": seconds, "server_cpu_seconds": cpu.used["server"], "cpu_seconds": cpu.used,
                "cpu_seconds_by_phase": cpu.by_phase, "output_rows": job.counts["output_rows"],
                "counts": dict(job.counts)}

    def one_event_batch(self, runs: int) -> dict:
        """The fixed cost of a batch: one event through the same job."""
        line = Workload(replace(self.spec, events=1)).batch_lines()
        seconds = []
        for run in range(runs):
            upload_lines(self.store, f"landing/one-{run}/", line)
            seconds.append(self.run_job(f"landing/one-{run}/", f"one-{run}")["seconds"])
        return {"seconds": seconds}

    def count_requests(self, prefix: str = BATCH) -> dict:
        """One more (untimed) job through a counting proxy: every request of driver and executors."""
        with FaultProxy(self.server.endpoint_url) as proxy:
            config = self.settings.config(proxy.endpoint_url)
            freeze_batch_inputs(self.store, config, "requests", InputSelector(input_prefix=prefix), self.spec.anchor)
            proxy.arm(None)
            run_dedup_job(self.spark, config, "requests")
            figures = traffic(Layout(config.layout), proxy)
        self.store.delete_prefix(Layout(config.layout).staging_root("requests"))
        return {"total": requests(figures), "by_kind": figures,
                "cache_bytes_read": figures["segments"]["read_bytes"] + figures["guards"]["read_bytes"]}

    def promote_once(self) -> dict:
        """The kept batch's promotion, its Delta projection timed apart: the table first created over
        the seeded history (one commit), then the batch committed, then projected (footers, one commit)."""
        on, off = (replace(self.config, table=replace(self.config.table, delta=delta)) for delta in ("on", "off"))
        _, backfill = timed(lambda: project(self.store, on))
        outcome, commit = timed(lambda: promote_batch(self.store, off, self.keep))
        projection, projecting = timed(lambda: project(self.store, on))
        assert projection.projected == (outcome.version,), projection
        files = sum(1 for obj in committed_record(self.store, Layout(self.config.layout), outcome.version).objects
                    if obj.kind == "data")
        print(f"promotion {commit:.2f}s; its Delta projection {projecting:.2f}s ({files} data files); the table "
              f"created over the history in {backfill:.2f}s", flush=True)
        return {"seconds": commit + projecting, "commit_seconds": commit, "delta_projection_seconds": projecting,
                "delta_data_files": files, "delta_backfill_seconds": backfill}


def timed(step: Callable[[], T]) -> tuple[T, float]:
    started = time.perf_counter()
    return step(), time.perf_counter() - started


def rounds(context: ContextRuns, peers: dict, batch_file: Path, lines: list[bytes], runs: int,
           python_parser: bool) -> list[dict]:
    """The systems taking turns, round by round: eventdedup, the same job with the compiled parse
    core off ([events] compiled_parser = false: the Python parser, as before issue 43), the peers."""
    without_core = replace(context.config, events=replace(context.config.events, compiled_parser=False))
    out = []
    for run in range(runs):
        row = {"eventdedup": context.run_job(BATCH, f"main-{run}")}
        if python_parser:
            row[PYTHON_PARSER] = context.run_job(BATCH, f"python-{run}", without_core)
        for key, peer in peers.items():
            row[key] = peer.run(batch_file, lines, run)
            print(f"  {key}: {row[key]['seconds']:.2f}s", flush=True)
        out.append(row)
    return out


def history_densities(spark: object, settings: BenchSettings, spec: WorkloadSpec, scales: list[int], runs: int,
                      peers: list[str], tuned: list, work: Path) -> list[dict]:
    """The same batch on histories of each scale x the events per hour, each on its own server and
    seeded (bench.history: committing 10x through `run-batch` would take longer than the rest of the
    bench), with the bytes one more (untimed) run reads. The servers are up together and the densities take
    turns round by round, so a host whose speed drifts hits each alike; above 1x the tuned Spark
    peers take their turns right after eventdedup's run on the same history."""
    with contextlib.ExitStack() as stack:
        densities = []
        for scale in scales:
            scaled = replace(spec, history_batch_events=spec.history_batch_events * scale)
            server, config, store = stack.enter_context(fresh_store(settings))
            context = ContextRuns(spark, server, settings, config, store, scaled)
            workload = Workload(scaled)
            context.seed(workload)
            lines = workload.batch_lines()
            upload_lines(store, BATCH, lines)
            wanted = [p for p in peers if p in SPARK_PEERS] if scale != 1 else []
            density_peers = stack.enter_context(started_peers(work / f"x{scale}", workload, wanted, tuned))
            batch_file = work / f"x{scale}" / "batch.json"
            if density_peers:
                batch_file.write_bytes(b"\n".join(lines) + b"\n")
            densities.append((scale, context, density_peers, batch_file))
        measured: dict[int, list[dict]] = {scale: [] for scale in scales}
        peer_runs: dict[int, dict[str, list[dict]]] = {scale: {} for scale in scales}
        for run in range(runs):
            for scale, context, density_peers, batch_file in densities:
                measured[scale].append(context.run_job(BATCH, f"x{scale}-{run}"))
                for key, peer in density_peers.items():
                    peer_runs[scale].setdefault(key, []).append(peer.run(batch_file, [], run))
                    print(f"  {key} at {scale}x: {peer_runs[scale][key][-1]['seconds']:.2f}s", flush=True)
        out = []
        for scale, context, _, _ in densities:
            counted = context.count_requests()
            out.append({"scale": scale, "history": "seeded", "history_batch_events": context.spec.history_batch_events,
                        "runs": measured[scale], "cache_bytes_read": counted["cache_bytes_read"],
                        "s3_requests": counted["total"], **({"peers": peer_runs[scale]} if peer_runs[scale] else {})})
            print(f"{scale}x history: median {statistics.median(r['seconds'] for r in measured[scale]):.2f}s", flush=True)
    return out
