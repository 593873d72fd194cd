"""CPU seconds of the processes a batch runs on, from /proc.

The bench's two cores are shared by Spark's JVM, its Python workers and the S3 emulator, so a
batch's core-seconds per process group say where a target's budget goes: a 1M batch at 200k
events/s marginal on 2 cores has about 10 core-seconds for everything.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from eventdedup_dev.stack import descendants

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


def stat_cpu_seconds(stat: str, ticks: int = TICKS_PER_SECOND) -> tuple[float, float]:
    """(the process's own, its reaped children's) CPU seconds, user plus system, from the text of
    /proc/<pid>/stat. The command name (field 2) may hold spaces and parentheses, so fields are
    counted after its last ')': utime, stime, cutime and cstime are fields 14-17."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / ticks, (int(fields[13]) + int(fields[14])) / ticks


def process_cpu_seconds(pid: int, *, reaped_children: bool = False) -> float:
    """A process's CPU seconds so far (with those of the children it has waited for, if asked);
    0 once it is gone."""
    try:
        own, children = stat_cpu_seconds(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, IndexError, ValueError):
        return 0.0
    return own + children if reaped_children else own


def is_spark_python(proc: Path) -> bool:
    """Spark's Python daemon or a worker it forked (`python -m eventdedup.job.spark_daemon`). The
    JVM's own command line names the daemon module too, as a --conf: until 2026-11-25 the JVM
    was counted as a worker as well as apart, so earlier "workers" figures hold it twice."""
    try:
        return b"-m\x00eventdedup.job.spark_daemon" in (proc / "cmdline").read_bytes()
    except OSError:
        return False


@dataclass(frozen=True)
class SparkCpu:
    """Cumulative CPU seconds of a local Spark context's processes and the S3 emulator beside it;
    the difference of two readings is what happened between them."""

    python_workers: float  # the daemon and its workers, those it has reaped included
    jvm: float
    server: float
    driver: float  # this Python process

    @classmethod
    def read(cls, jvm_pid: int, server_pid: int) -> SparkCpu:
        workers = [pid for pid, _ in descendants(jvm_pid) if is_spark_python(Path(f"/proc/{pid}"))]
        return cls(python_workers=sum(process_cpu_seconds(pid, reaped_children=True) for pid in workers),
                   jvm=process_cpu_seconds(jvm_pid), server=process_cpu_seconds(server_pid),
                   driver=process_cpu_seconds(os.getpid()))

    def since(self, earlier: SparkCpu) -> dict[str, float]:
        parts = {"python_workers": self.python_workers - earlier.python_workers, "jvm": self.jvm - earlier.jvm,
                 "server": self.server - earlier.server, "driver": self.driver - earlier.driver}
        return {**{name: round(value, 2) for name, value in parts.items()}, "total": round(sum(parts.values()), 2)}
