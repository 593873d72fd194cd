"""CPU seconds and resident memory of the processes a batch runs on, sampled from /proc.

A process's CPU can be read only while it exists: PySpark's daemon ignores SIGCHLD, so the kernel
reaps its workers and their CPU reaches nobody's count of reaped children. Each process is sampled
while the batch runs; one gone at the end keeps what it used by its last sample.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from eventdedup_dev.stack import descendants, process_start_ticks, start_ticks_of, stat_fields

ProcessKey = tuple[int, int]  # (pid, start time in ticks): a pid the kernel reuses is another process
Lister = Callable[[], list[ProcessKey]]


def cpu_seconds(fields: list[str], ticks: int = os.sysconf("SC_CLK_TCK")) -> float:
    """A process's own CPU seconds, user plus system, from its stat fields (utime, stime: 14, 15)."""
    return (int(fields[11]) + int(fields[12])) / ticks


def process_cpu_seconds(pid: int) -> float | None:
    fields = stat_fields(pid)
    return None if fields is None else cpu_seconds(fields)


def is_spark_python(pid: int) -> bool:
    """Spark's Python daemon or a worker it forked; the JVM names the daemon module too, but in a --conf."""
    try:
        return b"-m\x00eventdedup.spark.daemon" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


class Sampler:
    """Calls `sample` every `interval` seconds in a thread while a `with` block runs."""

    interval = 0.25

    def __enter__(self) -> Sampler:
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stopping.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        raise NotImplementedError


class GroupCpu(Sampler):
    """The CPU seconds each group of processes uses in a `with` block, or between `start` and `stop`,
    by phase: what a process used since its last reading goes to the phase `phase()` names then. A
    new process counts from zero. A sample scans /proc (~5 ms of CPU): four a second cost ~1 % of a
    core, and a phase's figure may hold up to a quarter second of its neighbour's."""

    def __init__(self, groups: Mapping[str, Lister], phase: Callable[[], str] = lambda: "all") -> None:
        self._groups, self._phase = groups, phase
        self._previous: dict[ProcessKey, float] = {}
        self.by_phase: dict[str, dict[str, float]] = {}
        self.used: dict[str, float] = {}

    def __enter__(self) -> GroupCpu:
        self.start()
        return super().__enter__()  # type: ignore[return-value]

    def __exit__(self, *exc: object) -> None:
        super().__exit__()
        self.stop()

    def start(self) -> None:
        self._read(attribute=False)

    def sample(self) -> None:
        self._read(attribute=True)

    def stop(self) -> dict[str, float]:
        """Seconds per group over every phase and their total; `by_phase` rounded alike."""
        self.sample()
        self.used = _rounded({name: sum(of_phase[name] for of_phase in self.by_phase.values()) for name in self._groups})
        self.by_phase = {phase: _rounded(of_phase) for phase, of_phase in self.by_phase.items()}
        return self.used

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


def spark_jvm_pid(spark: object) -> int:
    return int(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[attr-defined]


def single(pid: int) -> Lister:
    """The one process `pid` is now (none once gone, never another that reuses its pid)."""
    start = process_start_ticks(pid)
    return lambda: [] if start is None else [(pid, start)]


def spark_groups(jvm_pid: int, server_pid: int) -> dict[str, Lister]:
    """A local Spark context's process groups and the S3 store beside it."""
    return {"python_workers": lambda: [key for key in descendants(jvm_pid) if is_spark_python(key[0])],
            "jvm": single(jvm_pid), "server": single(server_pid), "driver": single(os.getpid())}


def command_groups(root: int, server_pid: int | None = None) -> dict[str, Lister]:
    """A command's process groups (its own Python, its JVM, Spark's Python processes) and the S3
    store beside it, when there is one to read."""
    def below(spark_python: bool) -> Lister:
        return lambda: [key for key in descendants(root) if is_spark_python(key[0]) == spark_python]

    groups = {"command_python": single(root), "jvm": below(False), "python_workers": below(True)}
    return groups if server_pid is None else {**groups, "server": single(server_pid)}


def spark_phase(spark: object) -> Callable[[], str]:
    """Which stage of the dedup job runs now: the read stage (the shuffle's map side), the dedup stage
    (the result stage, the driver's collect), or neither (the driver's planning and commit)."""
    tracker = spark.statusTracker()  # type: ignore[attr-defined]

    def phase() -> str:
        for info in filter(None, map(tracker.getStageInfo, tracker.getActiveStageIds())):
            return "dedup stage" if info.name.startswith("collect") else "read stage"
        return "outside stages"

    return phase


def resident_bytes(pid: int) -> int:
    """VmRSS of /proc/<pid>/status in bytes; 0 once the process is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmRSS:")), 0)


class TreeMemory(Sampler):
    """The peak of a process tree's summed resident memory, sampled every 50 ms, and its make-up then:
    the command's own Python, its JVM, Spark's Python processes. Pages a forked worker shares with its
    parent count in both, so the sum errs high."""

    interval = 0.05

    def __init__(self, root: int) -> None:
        self.root = root
        self.peak = {"total_bytes": 0, "command_python_bytes": 0, "jvm_bytes": 0, "python_workers_bytes": 0,
                     "python_workers": 0}

    def sample(self) -> None:
        parts = {"command_python_bytes": resident_bytes(self.root), "jvm_bytes": 0, "python_workers_bytes": 0,
                 "python_workers": 0}
        for pid, _ in descendants(self.root):
            if is_spark_python(pid):
                parts["python_workers_bytes"] += resident_bytes(pid)
                parts["python_workers"] += 1
            else:  # the JVM, the only other process a command starts
                parts["jvm_bytes"] += resident_bytes(pid)
        total = parts["command_python_bytes"] + parts["jvm_bytes"] + parts["python_workers_bytes"]
        if total > self.peak["total_bytes"]:
            self.peak = {"total_bytes": total, **parts}
