from __future__ import annotations

import os
import subprocess
import sys

import pytest

from eventdedup.errors import EventDedupError
from eventdedup.spark.java import require_java


def test_missing_java_is_named_by_the_python_check(tmp_path) -> None:
    with pytest.raises(EventDedupError, match="Java 17\\+ is required by Spark but no 'java' was found"):
        require_java({"PATH": str(tmp_path)})


def test_old_java_is_refused_with_its_version(tmp_path) -> None:
    fake = tmp_path / "bin" / "java"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho \'openjdk version "11.0.2" 2019-01-15\' >&2\n')
    fake.chmod(0o755)
    with pytest.raises(EventDedupError, match="is version 11"):
        require_java({"JAVA_HOME": str(tmp_path), "PATH": ""})


def test_the_makefile_check_says_what_to_install(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = "/usr/bin/env-none:" + str(tmp_path)  # no java anywhere; the interpreter is named by path
    done = subprocess.run([sys.executable, "-m", "eventdedup.spark.session"], env=env, capture_output=True,
                          text=True)
    assert done.returncode == 1
    assert "Java 17+ is required by Spark but no 'java' was found" in done.stderr


def test_a_background_start_runs_while_the_caller_goes_on() -> None:
    import threading

    from eventdedup.spark.session import started_in_background

    caller_went_on = threading.Event()
    calls = []

    def start() -> str:
        calls.append(1)
        # Returns "overlapped" only if the caller got control back before the start finished.
        return "overlapped" if caller_went_on.wait(timeout=120) else "ran first"

    session = started_in_background(start)
    caller_went_on.set()
    assert session() == "overlapped"
    assert session() == "overlapped"
    assert calls == [1]


def test_a_failed_background_start_is_raised_where_the_session_is_wanted() -> None:
    from eventdedup.spark.session import started_in_background

    def start() -> str:
        raise EventDedupError("Java 17+ is required by Spark")

    session = started_in_background(start)
    with pytest.raises(EventDedupError, match="Java 17"):
        session()
