"""The batch as a user's scheduler runs it: `eventdedup run-batch` and the DAG's spark-submit, each a
new process whose JVM and workers run their first batch, on a server holding the window's history,
configured by its file alone. Wall time, the process tree's peak memory and CPU by process group
(the S3 store's apart), and run-batch's own phases (`--timings`)."""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from bench import ROOT
from bench.history import seed_eventdedup
from bench.processes import GroupCpu, TreeMemory, command_groups
from bench.stores import BenchSettings, command_environment, fresh_store, upload_lines
from bench.workload import Workload, WorkloadSpec, event_line
from eventdedup.config import Config
from eventdedup.inputs.manifest import freeze_batch_inputs
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store

BIN = Path(sys.executable).parent
ONE_ID = bytes(range(16))  # the one-event batches' id, new to every history


@dataclass(frozen=True)
class CommandRun:
    wall_seconds: float
    stdout: str
    stderr: str
    peak_memory: dict  # TreeMemory.peak
    cpu_seconds: dict  # GroupCpu.used: the command's Python, its JVM, Spark's Python processes, the store


def run_command(argv: list[str], env: dict[str, str] | None = None, server_pid: int | None = None) -> CommandRun:
    """A command in a new process, its wall time, its process tree's peak memory and CPU (and the S3
    store's beside it, given its process); fails with its stderr."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env or command_environment())
    with TreeMemory(process.pid) as memory, GroupCpu(command_groups(process.pid, server_pid)) as cpu:
        stdout, stderr = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:2])} failed (exit {process.returncode}): {stderr[-3000:]}\n"
                         f"its output: {stdout[-2000:]}")
    return CommandRun(time.perf_counter() - started, stdout, stderr, memory.peak, cpu.used)


def run_batch(config_file: Path, batch_id: str, prefix: str, server_pid: int | None = None) -> tuple[CommandRun, dict, dict]:
    """`eventdedup run-batch --timings`: the run, the phases it timed itself, its commit's counts."""
    run = run_command([str(BIN / "eventdedup"), "run-batch", "--config", str(config_file), "--batch-id", batch_id,
                       "--input-prefix", prefix, "--timings"], server_pid=server_pid)
    # The JVM's output is relayed by a thread: a line of it may follow ours.
    timings = next(json.loads(line) for line in reversed(run.stderr.splitlines())
                   if line.startswith("{") and '"total"' in line)
    counts = next(json.loads(line.split(": ", 1)[1]) for line in run.stdout.splitlines() if line.startswith("batch "))
    return run, timings, counts


@contextmanager
def store_with_history(settings: BenchSettings, workload: Workload) -> Iterator[tuple[Config, S3Store, Path, int]]:
    """A fresh server holding the workload's window of history (seeded), the configuration file for
    it, and the server's process."""
    with fresh_store(settings) as (server, config, store), tempfile.TemporaryDirectory() as directory:
        seed_eventdedup(store, config, workload)
        yield config, store, settings.write_file(Path(directory) / "eventdedup.toml", server.endpoint_url), server.pid


def median_phases(phases: list[dict]) -> dict:
    return {name: statistics.median(p[name] for p in phases) for name in phases[0]}


def one_event_run_batch(runs: int = 3) -> dict:
    """`eventdedup run-batch` of one event on an empty store: start-up, staging, the job and the
    promotion; `outside_main` is what `main` does not see (the interpreter, imports, the exit)."""
    walls, phases = [], []
    now_us = int(datetime.now(timezone.utc).timestamp()) * 1_000_000
    with tempfile.TemporaryDirectory() as directory:
        settings = BenchSettings("cli", {"spark": {"local_cache_dir": str(Path(directory) / "copies")}})
        with fresh_store(settings) as (server, _, store):
            config_file = settings.write_file(Path(directory) / "eventdedup.toml", server.endpoint_url)
            for run in range(runs):
                upload_lines(store, f"landing/cli-{run}/", [event_line(ONE_ID, now_us - 60_000_000)])
                done, timings, _ = run_batch(config_file, f"cli-{run}", f"landing/cli-{run}/", server.pid)
                walls.append(done.wall_seconds)
                phases.append({**timings, "outside_main": done.wall_seconds - timings["total"]})
    imports = run_command([sys.executable, "-c", "import eventdedup.cli, pyspark.sql"]).wall_seconds
    return {"wall_seconds": walls, "python_imports_seconds": imports, "phases": phases,
            "median_phases": median_phases(phases)}


def batch_run_batch(settings: BenchSettings, spec: WorkloadSpec, objects: int, runs: int) -> dict:
    """`eventdedup run-batch` of the measured batch, each run on a fresh server whose history is seeded
    (bench.history) and with no local copies, the workload anchored at the current hour (the command
    judges the window by the clock); its output rows checked."""
    workload = Workload(spec.at_current_hour())
    lines, expected = workload.batch_lines(), workload.expected_counts()["unique_new"]
    walls, phases, rows, memory = [], [], [], []
    for run in range(runs):
        with (tempfile.TemporaryDirectory() as copies,
              store_with_history(settings.with_values("spark", local_cache_dir=copies), workload)
              as (_, store, config_file, server_pid)):
            upload_lines(store, "landing/cli/", lines, objects)
            done, timings, counts = run_batch(config_file, f"cli-batch-{run}", "landing/cli/", server_pid)
        output_rows = counts["output_rows"]
        walls.append(done.wall_seconds)
        phases.append(timings)
        memory.append(done.peak_memory)
        rows.append(output_rows)
        if output_rows != expected:
            raise SystemExit(f"run-batch emitted {output_rows:,} rows; the workload has {expected:,} unique events")
        print(f"eventdedup run-batch {run}: {done.wall_seconds:.2f}s wall, {timings}, peak memory "
              f"{done.peak_memory['total_bytes'] / 2**30:.2f} GiB", flush=True)
    return {"history": "seeded", "wall_seconds": walls, "phases": phases, "median_phases": median_phases(phases),
            "output_rows": rows, "expected_rows": expected, "peak_memory": memory}


def dedup_step_submitted(store: S3Store, config: Config, config_file: Path, workload: Workload, variant: int,
                         objects: int, runs: int, server_pid: int) -> dict:
    """The pipeline DAG's Spark task as Airflow's operator submits it on its default master
    (`spark-submit spark_jobs/dedup_batch.py`, the operator's shape for `local[*]`): one event and
    the measured batch (its `variant`, new to the store), alternating, on the given store (the step
    only stages, so each run sees the same history). Staging and promotion are tasks of their own,
    outside these figures."""
    from eventdedup.spark.deployment import submit_shape

    expected = {"one_event": 1, "batch": workload.expected_counts()["unique_new"]}
    shape = submit_shape("local[*]", sys.executable, environ=command_environment())
    submit = [str(BIN / "spark-submit"), "--master", "local[*]", "--name", "eventdedup-dedup-batch"]
    for key, value in {"spark.ui.enabled": "false", **shape.conf}.items():  # the operator's conf
        submit += ["--conf", f"{key}={value}"]
    walls: dict[str, list[float]] = {"one_event": [], "batch": []}
    cpu: dict[str, list[dict]] = {"one_event": [], "batch": []}
    upload_lines(store, "landing/submit-batch/", workload.batch_lines(variant), objects)
    upload_lines(store, "landing/submit-one_event/", [event_line(ONE_ID, workload.spec.anchor_us - 60_000_000)])
    for run in range(runs):
        for size in walls:
            batch_id = f"submit-{size.replace('_', '-')}-{run}"
            freeze_batch_inputs(store, config, batch_id, InputSelector(input_prefix=f"landing/submit-{size}/"),
                                workload.spec.anchor)
            done = run_command([*submit, str(ROOT / "spark_jobs" / "dedup_batch.py"), "--config", str(config_file),
                                "--batch-id", batch_id], {**command_environment(), **shape.env}, server_pid)
            store.delete_prefix(Layout(config.layout).staging_root(batch_id))
            walls[size].append(done.wall_seconds)
            cpu[size].append(done.cpu_seconds)
            counts = json.loads(next(line for line in reversed(done.stdout.splitlines()) if line.startswith("{")))
            if counts["output_rows"] != expected[size]:
                raise SystemExit(f"the submitted dedup step emitted {counts['output_rows']:,} rows; the {size} "
                                 f"batch has {expected[size]:,} unique events")
            print(f"spark-submit dedup step, {size} {run}: {done.wall_seconds:.2f}s wall", flush=True)
    return {"wall_seconds": walls, "cpu_seconds": cpu, "output_rows_exact": True}
