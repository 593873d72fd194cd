"""The main store as the pipeline leaves it: its history committed by `eventdedup run-batch` itself,
then the measured batches, each a new `run-batch` process committed on top of the ones before, as
consecutive pipeline batches are.

A manual batch's as_of is the clock, so the workload is anchored at the current hour and every
history batch arrives now (the window is judged by arrival: all of it is in the window). A measured
run is one event or the whole batch, cold (a configuration whose [spark] local_cache_dir is a new,
empty directory: a new executor) or warm (the directory the history's batches and the runs before
filled); each is a variant of its own (bench.workload), so that what the earlier ones committed is
not in it, and its counts are checked exactly. The runs alternate so that drift (the store grows by
each batch committed, the host's speed wanders) falls on both modes and both sizes alike.
"""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

from bench.commands import run_batch
from bench.stores import BenchSettings, upload_lines
from bench.workload import Workload
from eventdedup.s3store import S3Store

HISTORY_PREFIX = "landing/history/"
MODES = ("cold", "warm")
SIZES = ("one_event", "batch")
ROUND = (("cold", "one_event"), ("cold", "batch"), ("warm", "one_event"), ("warm", "batch"))


@dataclass(frozen=True)
class CommandStore:
    """A store the commands run on, as their configuration files name it: the server's endpoint and
    process (its CPU is reported apart), the settings, and the warm local-copies directory."""

    store: S3Store
    endpoint: str
    server_pid: int
    settings: BenchSettings
    warm_copies: Path

    def config_file(self, path: Path, copies: Path | None = None) -> Path:
        """A configuration file whose local copies live in `copies` (default: the warm directory)."""
        settings = self.settings.with_values("spark", local_cache_dir=str(copies or self.warm_copies))
        return settings.write_file(path, self.endpoint)


def run_order(runs: int) -> list[tuple[str, str]]:
    """(mode, size) of each measured run: every round runs the four, every other round in reverse,
    so that the batches committed before a run number alike for cold and warm, one event and batch."""
    return [pair for r in range(runs) for pair in (ROUND if r % 2 == 0 else ROUND[::-1])]


def check_counts(counts: dict, expected: dict, what: str) -> None:
    """A commit's counts against the workload's: every event read, every planted copy found as planted."""
    found = {"events": counts.get("input_lines"), "cross_batch_duplicates": counts.get("cross_batch_natural"),
             "in_batch_duplicates": counts.get("in_batch_natural"), "unique_new": counts.get("output_rows")}
    if found != expected:
        raise SystemExit(f"{what}: the commit counted {found}; the workload planted {expected} (counts: {counts})")


def commit_history(place: CommandStore, workload: Workload, work: Path) -> dict:
    """Every history batch through `eventdedup run-batch --input-prefix`, oldest first, each in a new
    process with the warm local copies; how long committing took (the commands' wall time; writing
    the landing objects apart) and what each committed, checked."""
    spec, config_file = workload.spec, place.config_file(work / "history.toml")
    walls, phases, cpu, landing = [], [], [], 0.0
    for j in range(spec.history_batches):
        started, prefix = time.perf_counter(), f"{HISTORY_PREFIX}{j:04d}/"
        upload_lines(place.store, prefix, workload.history_lines(j))
        landing += time.perf_counter() - started
        done, timings, counts = run_batch(config_file, f"history-{j:04d}", prefix, place.server_pid)
        check_counts(counts, {"events": spec.history_batch_events, "cross_batch_duplicates": 0,
                              "in_batch_duplicates": 0, "unique_new": spec.history_batch_events}, f"history batch {j}")
        walls.append(done.wall_seconds)
        phases.append(timings)
        cpu.append(done.cpu_seconds)
        print(f"history batch {j + 1}/{spec.history_batches} committed by run-batch: {done.wall_seconds:.2f}s wall "
              f"({timings})", flush=True)
    return {"history": "committed", "batches": spec.history_batches, "batch_events": spec.history_batch_events,
            "seconds": sum(walls), "wall_seconds": walls, "phases": phases, "landing_seconds": landing,
            "cpu_seconds": {name: round(sum(c.get(name, 0.0) for c in cpu), 2) for name in cpu[0]}}


def measured_runs(place: CommandStore, workload: Workload, runs: int, objects: int, work: Path,
                  first_variant: int = 1, history: str = "committed") -> dict:
    """One event and the batch, cold and warm, `runs` times each in the order `run_order` gives,
    each a new `run-batch` process committing a variant of its own (from `first_variant` on)."""
    sources = {"one_event": Workload(replace(workload.spec, events=1)), "batch": workload}
    out = []
    for variant, (mode, size) in enumerate(run_order(runs), start=first_variant):
        source, name = sources[size], f"measured-{variant:02d}-{mode}-{size.replace('_', '-')}"
        prefix = f"landing/measured-{variant:02d}/"
        upload_lines(place.store, prefix, source.batch_lines(variant), objects if size == "batch" else 1)
        copies = work / f"cold-{variant:02d}" if mode == "cold" else place.warm_copies
        held_before = directory_bytes(copies)
        done, timings, counts = run_batch(place.config_file(work / f"{name}.toml", copies), name, prefix,
                                          place.server_pid)
        check_counts(counts, source.expected_counts(), name)
        out.append({"mode": mode, "size": size, "variant": variant, "wall_seconds": done.wall_seconds,
                    "phases": timings, "cpu_seconds": done.cpu_seconds, "peak_memory": done.peak_memory,
                    "output_rows": counts["output_rows"], "counts": counts, "local_copies_bytes_before": held_before,
                    "local_copies_bytes_after": directory_bytes(copies)})
        if mode == "cold":
            shutil.rmtree(copies, ignore_errors=True)
        print(f"run-batch {mode}, {size}: {done.wall_seconds:.2f}s wall, {timings}, store CPU "
              f"{done.cpu_seconds.get('server', 0.0):.1f}s", flush=True)
    return {"history": history, "events": workload.spec.events, "runs": out,
            "expected": {size: source.expected_counts() for size, source in sources.items()}}


def directory_bytes(path: Path) -> int:
    """What the files under `path` hold (0 for none)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0
