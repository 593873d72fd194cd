"""CPU seconds of the processes a batch runs on, from /proc.

The bench's two cores are shared by Spark's JVM, its Python workers and the S3 emulator, so a
batch's core-seconds per process group say where a target's budget goes: a 1M batch at 200k
events/s marginal on 2 cores has at most about 10 core-seconds for everything.

A process's CPU can be read only while it exists, and nobody else keeps it: PySpark's daemon
ignores SIGCHLD, so the kernel reaps its workers and their CPU never reaches the daemon's
counts of reaped children. Each process is therefore sampled while the batch runs, and one that
is gone at the end counts what it had used at its last sample (at most one interval is missed).
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from eventdedup_dev.stack import descendants, process_start_ticks, start_ticks_of, stat_fields

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")

ProcessKey = tuple[int, int]  # (pid, start time in ticks): a pid the kernel reuses is another process


def cpu_seconds(fields: list[str], ticks: int = TICKS_PER_SECOND) -> float:
    """A process's own CPU seconds, user plus system (its threads' included), from its stat
    fields (`stat_fields`): utime and stime are fields 14 and 15."""
    return (int(fields[11]) + int(fields[12])) / ticks


def process_cpu_seconds(pid: int) -> float | None:
    """A process's own CPU seconds so far; None once it is gone."""
    fields = stat_fields(pid)
    return None if fields is None else cpu_seconds(fields)


def is_spark_python(proc: Path) -> bool:
    """Spark's Python daemon or a worker it forked (`python -m eventdedup.spark.daemon`). The
    JVM's own command line names the daemon module too, as a --conf: until 2026-11-25 the JVM
    was counted as a worker as well as apart, so earlier "workers" figures hold it twice."""
    try:
        return b"-m\x00eventdedup.spark.daemon" in (proc / "cmdline").read_bytes()
    except OSError:
        return False


class GroupCpu:
    """The CPU seconds each group of processes uses between `start` and `stop`, by phase: every
    process a group's lister names at a sample is read then, and what it used since its last
    reading goes to the phase `phase()` names at that sample; `stop` samples once more.
    Processes that appear meanwhile count from zero (a new process's counters start at zero)."""

    def __init__(self, groups: Mapping[str, Callable[[], list[ProcessKey]]],
                 phase: Callable[[], str] = lambda: "all") -> None:
        self._groups, self._phase = groups, phase
        self._previous: dict[ProcessKey, float] = {}
        self.by_phase: dict[str, dict[str, float]] = {}

    def start(self) -> None:
        self._read(attribute=False)

    def sample(self) -> None:
        self._read(attribute=True)

    def stop(self) -> dict[str, float]:
        """Seconds per group over every phase, and their total."""
        self.sample()
        used = dict.fromkeys(self._groups, 0.0)
        for of_phase in self.by_phase.values():
            for name, seconds in of_phase.items():
                used[name] += seconds
        return _rounded(used)

    def rounded_by_phase(self) -> dict[str, dict[str, float]]:
        return {phase: _rounded(used) for phase, used in self.by_phase.items()}

    def _read(self, attribute: bool) -> None:
        phase = self._phase() if attribute else ""
        for name, lister in self._groups.items():
            for key in lister():
                fields = stat_fields(key[0])  # one read gives the start time and the CPU alike
                if fields is None or start_ticks_of(fields) != key[1]:
                    continue  # gone: it keeps what it used by its last reading
                seconds = cpu_seconds(fields)
                if attribute:
                    of_phase = self.by_phase.setdefault(phase, dict.fromkeys(self._groups, 0.0))
                    of_phase[name] += seconds - self._previous.get(key, 0.0)
                self._previous[key] = seconds


def _rounded(used: Mapping[str, float]) -> dict[str, float]:
    return {**{name: round(value, 2) for name, value in used.items()}, "total": round(sum(used.values()), 2)}


class SampledCpu:
    """GroupCpu sampled by a thread every `interval` seconds while a `with` block runs. A sample
    lists every process (~5 ms of CPU here, scanning /proc for the workers), so it is taken four
    times a second: ~1 % of a core, and a worker that exits loses at most a quarter second; a
    phase's figure may hold up to a quarter second of its neighbour's."""

    def __init__(self, groups: Mapping[str, Callable[[], list[ProcessKey]]],
                 phase: Callable[[], str] = lambda: "all", interval: float = 0.25) -> None:
        self._cpu = GroupCpu(groups, phase)
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.used: dict[str, float] = {}
        self.by_phase: dict[str, dict[str, float]] = {}

    def __enter__(self) -> SampledCpu:
        self._cpu.start()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.used = self._cpu.stop()
        self.by_phase = self._cpu.rounded_by_phase()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._cpu.sample()


def spark_groups(jvm_pid: int, server_pid: int) -> dict[str, Callable[[], list[ProcessKey]]]:
    """A local Spark context's process groups and the S3 emulator beside it."""

    def one(pid: int) -> Callable[[], list[ProcessKey]]:
        start = process_start_ticks(pid)
        return lambda: [] if start is None else [(pid, start)]

    def python_workers() -> list[ProcessKey]:
        return [(pid, start) for pid, start in descendants(jvm_pid) if is_spark_python(Path(f"/proc/{pid}"))]

    return {"python_workers": python_workers, "jvm": one(jvm_pid), "server": one(server_pid),
            "driver": one(os.getpid())}


def spark_phase(spark: object) -> Callable[[], str]:
    """Which stage of the dedup job runs now: the read stage (the shuffle's map side), the dedup
    stage (the result stage, whose action is the driver's collect), or neither (the driver's
    planning and commit work)."""
    tracker = spark.statusTracker()  # type: ignore[attr-defined]

    def phase() -> str:
        for stage in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage)
            if info is not None:
                return "dedup stage" if info.name.startswith("collect") else "read stage"
        return "outside stages"

    return phase
