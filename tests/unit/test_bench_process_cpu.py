"""The bench's CPU figures read what the kernel counts, and its budgets are the targets' arithmetic."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from process_cpu import SparkCpu, process_cpu_seconds, stat_cpu_seconds  # noqa: E402
from report import print_cpu_budget  # noqa: E402


def test_fields_are_counted_after_the_last_parenthesis_of_the_command_name() -> None:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
    stat = "4242 (spark (worker) 1) S 1 4242 4242 0 -1 4194304 10 0 0 0 250 50 700 300 20 0 1 0 99"
    assert stat_cpu_seconds(stat, ticks=100) == (3.0, 10.0)


def test_a_process_reading_equals_the_kernels_own_accounting() -> None:
    # A child that burns CPU and is waited for lands in this process's reaped children.
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)
    before = os.times()
    own = process_cpu_seconds(os.getpid())
    both = process_cpu_seconds(os.getpid(), reaped_children=True)
    after = os.times()
    children = after.children_user + after.children_system
    assert children > 0
    assert before.user + before.system - 0.02 <= own <= after.user + after.system + 0.02
    assert both - own == pytest.approx(children, abs=0.02)


def test_a_gone_process_reads_as_zero() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert process_cpu_seconds(child.pid) == 0.0


def test_since_is_the_difference_per_part_and_their_sum() -> None:
    earlier = SparkCpu(python_workers=10.0, jvm=2.0, server=1.0, driver=0.5)
    later = SparkCpu(python_workers=21.5, jvm=2.75, server=3.0, driver=0.75)
    assert later.since(earlier) == {"python_workers": 11.5, "jvm": 0.75, "server": 2.0, "driver": 0.25,
                                    "total": 14.5}


def test_the_budgets_are_the_targets_in_wall_and_core_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    ours = {"median_seconds": 6.5, "one_event_seconds": 0.25,
            "cpu_seconds": {"python_workers": 11.0, "jvm": 0.75, "server": 1.75, "driver": 0.125, "total": 13.625}}
    print_cpu_budget(ours, {"median_seconds": 10.25}, events=1_000_000, cores=2)
    out = capsys.readouterr().out
    # 200k events/s marginal: the one-event batch plus 1M / 200k = 5 s; 5x the peer: 10.25 / 5.
    marginal_wall, peer_wall = 0.25 + 1_000_000 / 200_000, 10.25 / 5
    assert f"<= {marginal_wall:.2f}s wall, <= {marginal_wall * 2:.1f} core-seconds" in out
    assert f"<= {peer_wall:.2f}s wall, <= {peer_wall * 2:.1f} core-seconds" in out
    assert "13.6 core-seconds in 6.50s wall on 2 cores" in out
