"""The bench's CPU figures read what the kernel counts, keep what exited processes used, and its
budgets are the targets' arithmetic."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from bench.processes import GroupCpu, cpu_seconds, is_spark_python, process_cpu_seconds, spark_groups
from bench.summary import print_cpu, summarise
from eventdedup_dev.stack import process_start_ticks, stat_fields_of

# A child that says "waiting", then for each line it reads burns CPU until its own count reaches
# the seconds the line gives and says "ready"; it ends when its stdin closes. It is idle whenever
# the test reads it (but for the instant between a word and its wait: readings allow a tick).
BURNER = ("import os, sys\n"
          "print('waiting', flush=True)\n"
          "for line in sys.stdin:\n"
          "    while sum(os.times()[:2]) < float(line):\n"
          "        pass\n"
          "    print('ready', flush=True)\n")


def _burner(*extra_args: str) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, "-c", BURNER, *extra_args],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "waiting\n"
    return child


def _burn(child: subprocess.Popen[str], until: float) -> float:
    """Let the child burn until it has used `until` seconds, wait until it is idle again, and
    read its CPU."""
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(f"{until}\n")
    child.stdin.flush()
    assert child.stdout.readline() == "ready\n"
    seconds = process_cpu_seconds(child.pid)
    assert seconds is not None
    return seconds


def _end(child: subprocess.Popen[str]) -> None:
    assert child.stdin is not None
    child.stdin.close()
    child.wait()


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for child in started:
        child.kill()
        child.wait()


def test_fields_are_counted_after_the_last_parenthesis_of_the_command_name() -> None:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
    stat = "4242 (spark (worker) 1) S 1 4242 4242 0 -1 4194304 10 0 0 0 250 50 700 300 20 0 1 0 99"
    fields = stat_fields_of(stat)
    assert fields[0] == "S" and cpu_seconds(fields, ticks=100) == 3.0


def test_a_process_reading_equals_the_kernels_own_accounting() -> None:
    before = os.times()
    own = process_cpu_seconds(os.getpid())
    after = os.times()
    assert own is not None
    assert before.user + before.system - 0.02 <= own <= after.user + after.system + 0.02


def test_a_gone_process_reads_as_none() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert process_cpu_seconds(child.pid) is None


def test_a_process_that_exits_keeps_what_it_used_by_its_last_sample(children: list) -> None:
    # PySpark's daemon ignores SIGCHLD: its workers' CPU reaches nobody's count of reaped
    # children, so the count of one that exits is what it was last seen to use.
    child = _burner()
    children.append(child)
    key = (child.pid, process_start_ticks(child.pid))
    cpu = GroupCpu({"workers": lambda: [key]})
    cpu.start()
    idle_before = process_cpu_seconds(child.pid)
    assert idle_before is not None
    idle_after = _burn(child, 0.3)
    cpu.sample()
    _end(child)
    assert process_cpu_seconds(child.pid) is None
    used = cpu.stop()
    assert used["workers"] == pytest.approx(idle_after - idle_before, abs=0.02)
    assert used["total"] == used["workers"] >= 0.2


def test_a_process_that_appears_counts_from_zero_in_its_own_group(children: list) -> None:
    keys: list[tuple[int, int]] = []
    cpu = GroupCpu({"workers": lambda: list(keys), "driver": lambda: []})
    cpu.start()
    child = _burner()
    children.append(child)
    keys.append((child.pid, process_start_ticks(child.pid)))
    used_by_child = _burn(child, 0.2)
    used = cpu.stop()
    assert used["workers"] == pytest.approx(used_by_child, abs=0.02) and used_by_child >= 0.2
    assert (used["driver"], used["total"]) == (0.0, used["workers"])


def test_what_a_process_uses_goes_to_the_phase_named_at_each_sample(children: list) -> None:
    child = _burner()
    children.append(child)
    key = (child.pid, process_start_ticks(child.pid))
    phase = ["read"]
    cpu = GroupCpu({"workers": lambda: [key]}, phase=lambda: phase[0])
    cpu.start()
    at_start = process_cpu_seconds(child.pid)
    assert at_start is not None
    after_read = _burn(child, 0.2)
    cpu.sample()
    phase[0] = "dedup"
    after_dedup = _burn(child, after_read + 0.2)
    used = cpu.stop()
    by_phase = cpu.by_phase
    assert set(by_phase) == {"read", "dedup"}
    assert by_phase["read"]["workers"] == pytest.approx(after_read - at_start, abs=0.02)
    assert by_phase["dedup"]["workers"] == pytest.approx(after_dedup - after_read, abs=0.02)
    assert used["workers"] == pytest.approx(by_phase["read"]["workers"] + by_phase["dedup"]["workers"], abs=0.011)


def test_spark_python_processes_are_told_by_the_daemon_module_they_run(children: list) -> None:
    worker = _burner("-m", "eventdedup.spark.daemon")
    jvm_like = _burner("--conf", "spark.python.daemon.module=eventdedup.spark.daemon")
    children.extend([worker, jvm_like])
    assert is_spark_python(worker.pid)
    assert not is_spark_python(jvm_like.pid)
    # This process stands for the JVM: its Spark Python descendants are workers, the others not
    # (under the whole suite it has more: the shared Spark session's own daemon and workers).
    groups = spark_groups(jvm_pid=os.getpid(), server_pid=jvm_like.pid)
    workers = groups["python_workers"]()
    assert (worker.pid, process_start_ticks(worker.pid)) in workers
    assert all(pid != jvm_like.pid for pid, _ in workers)
    # Only processes below the JVM count: a JVM without children has no workers.
    assert spark_groups(jvm_pid=jvm_like.pid, server_pid=jvm_like.pid)["python_workers"]() == []
    assert groups["server"]() == [(jvm_like.pid, process_start_ticks(jvm_like.pid))]
    assert groups["jvm"]() == groups["driver"]() == [(os.getpid(), process_start_ticks(os.getpid()))]


def _round(seconds: float, workers: float, jvm: float, server: float) -> dict:
    cpu = {"python_workers": workers, "jvm": jvm, "server": server, "driver": 0.0, "total": workers + jvm + server}
    return {"eventdedup": {"seconds": seconds, "output_rows": 1, "counts": {},
                           "cpu_seconds": cpu, "cpu_seconds_by_phase": {"read stage": cpu}}}


def test_the_cpu_summary_is_the_round_of_median_total_whose_parts_add_up() -> None:
    # Part by part, the medians would be workers 11, JVM 1, server 2: no round's, summing to 14.
    rounds = [_round(7.0, 12.0, 0.5, 2.5), _round(6.0, 11.0, 1.0, 1.0), _round(8.0, 10.0, 2.0, 2.0)]
    result = {"rounds": rounds, "workload": {"events": 10}, "one_event": {"seconds": [0.5]}, "history_scaling": []}
    summarise(result)
    cpu = result["summary"]["eventdedup"]["cpu_seconds"]
    assert cpu == rounds[2]["eventdedup"]["cpu_seconds"]  # totals 15, 13, 14: the median is 14
    assert result["summary"]["eventdedup"]["cpu_seconds_by_phase"] == {"read stage": cpu}
    assert cpu["total"] == cpu["python_workers"] + cpu["jvm"] + cpu["server"] + cpu["driver"]


def test_the_budgets_are_the_targets_in_wall_and_core_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    ours = {"median_seconds": 6.5, "one_event_seconds": 0.25,
            "cpu_seconds": {"python_workers": 11.0, "jvm": 0.75, "server": 1.75, "driver": 0.125, "total": 13.625},
            "cpu_seconds_by_phase": {"read stage": {"python_workers": 5.0, "jvm": 0.25, "server": 0.5, "driver": 0.0,
                                                    "total": 5.75}}}
    print_cpu(ours, {"median_seconds": 10.25}, events=1_000_000, cores=2)
    out = capsys.readouterr().out
    # 250k events/s marginal: the one-event batch plus 1M / 250k = 4 s; 3x the (tuned) peer: 10.25 / 3.
    marginal_wall, peer_wall = 0.25 + 1_000_000 / 250_000, 10.25 / 3
    assert f"<= {marginal_wall:.2f}s wall, <= {marginal_wall * 2:.1f} core-seconds" in out
    assert f"<= {peer_wall:.2f}s wall, <= {peer_wall * 2:.1f} core-seconds" in out
    assert "13.6 core-seconds in 6.50s wall on 2 cores" in out
    assert "read stage: workers 5.0s, JVM 0.2s, S3 store 0.5s, driver 0.0s: 5.8 core-seconds" in out
