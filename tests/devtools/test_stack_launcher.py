"""`make stack-stop` stops exactly what `make stack` started: the service's process group, then
what it started in process groups of its own (Airflow runs each task in one, with spark-submit
and the driver JVM below it), and never a process it did not start (a pid reused after the
service died). Real processes, no Airflow: a service stand-in spawns a grandchild that leaves its
process group, as Airflow's task supervisor does."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from eventdedup_dev.stack import StackSettings, pid_file, process_start_ticks, running, stat_fields, stop_service

SERVICE = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(600)
"""


def start_stand_in(settings: StackSettings, name: str, tmp_path: Path) -> tuple[int, int]:
    marker = tmp_path / f"{name}.child"
    process = subprocess.Popen([sys.executable, "-c", SERVICE, str(marker)], start_new_session=True)
    threading.Thread(target=process.wait, daemon=True).start()  # reaped at once, as init would
    pid_file(settings, name).parent.mkdir(parents=True, exist_ok=True)
    pid_file(settings, name).write_text(json.dumps({"pid": process.pid, "start": process_start_ticks(process.pid)}))
    for _ in range(6000):  # waits for the grandchild to exist (a bound of a minute), not for a duration
        if marker.exists() and marker.read_text():
            break
        time.sleep(0.01)
    return process.pid, int(marker.read_text())


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    fields = stat_fields(pid)
    return fields is not None and fields[0] != "Z"  # a zombie has exited


def test_stop_ends_the_service_and_what_it_started_in_other_process_groups(tmp_path: Path) -> None:
    settings = StackSettings(home=tmp_path)
    service, grandchild = start_stand_in(settings, "airflow-scheduler", tmp_path)
    assert os.getpgid(grandchild) != os.getpgid(service)  # out of reach of a signal to the group

    assert stop_service(settings, "airflow-scheduler", timeout=30) is True
    for _ in range(6000):  # waits for the grandchild to end (a bound of a minute), not for a duration
        if not alive(grandchild):
            break
        time.sleep(0.01)
    assert not alive(service) and not alive(grandchild)
    assert not pid_file(settings, "airflow-scheduler").exists()


def test_stop_never_signals_a_process_that_only_reuses_the_recorded_pid(tmp_path: Path) -> None:
    settings = StackSettings(home=tmp_path)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    try:
        # The record names the bystander's pid with another start time: a pid the kernel reused.
        pid_file(settings, "s3").parent.mkdir(parents=True, exist_ok=True)
        pid_file(settings, "s3").write_text(json.dumps({"pid": bystander.pid,
                                                        "start": process_start_ticks(bystander.pid) - 1}))
        assert running(settings, "s3") is None
        assert stop_service(settings, "s3", timeout=1) is False
        assert bystander.poll() is None
        assert not pid_file(settings, "s3").exists()
    finally:
        bystander.kill()
        bystander.wait()
