"""The relay of a child's output (the driver JVM's, in eventdedup): complete, in order, never
blocking the child, and holding nothing of ours the child could keep open.

Children here are plain Python processes; the driver JVM's own case runs in
tests/integration/test_spark_workers.py.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from eventdedup.spark.jvm_output import OutputRelay, relayed_launch

# Writes 1 MiB (16 times a pipe's buffer) to stdout and a line to stderr between its halves.
_WRITER = ("import os, sys; half = bytes(range(256)) * 2048; os.write(1, half); "
           "os.write(2, b'between the halves\\n'); os.write(1, half)")
_HALF = bytes(range(256)) * 2048


def _spawn(code: str, stdout: int, stderr: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], stdout=stdout, stderr=stderr)


def test_everything_a_child_writes_reaches_the_target_in_order(tmp_path: Path) -> None:
    with open(tmp_path / "out", "wb+") as out, open(tmp_path / "err", "wb+") as err:
        relays = [OutputRelay(out.fileno()), OutputRelay(err.fileno())]
        for relay in relays:
            relay.start()
        child = _spawn(_WRITER, relays[0].write_fd, relays[1].write_fd)
        for relay in relays:
            relay.close_write_end()
        assert child.wait() == 0
        for relay in relays:  # the child has exited: what it wrote is copied or in the pipe
            relay.drain()
    assert (tmp_path / "out").read_bytes() == _HALF + _HALF
    assert (tmp_path / "err").read_bytes() == b"between the halves\n"


def test_a_closed_target_does_not_block_the_child() -> None:
    """Our stdout's reader went away: the relay keeps draining, so the child is never stuck on
    a full pipe (before the fix it would wait forever; the timeout only bounds that failure)."""
    target_read, target_write = os.pipe()
    os.close(target_read)
    relay = OutputRelay(target_write)
    relay.start()
    child = _spawn(_WRITER, relay.write_fd, subprocess.DEVNULL)
    relay.close_write_end()
    try:
        assert child.wait(timeout=120) == 0
    finally:
        child.kill()
        relay.drain()
        os.close(target_write)


def test_a_failed_launch_says_why_before_the_error_propagates(capfd: pytest.CaptureFixture[str]) -> None:
    def launch(stdout: int, stderr: int) -> None:
        child = _spawn("import sys; print('started'); sys.exit('no Java found')", stdout, stderr)
        child.wait()
        raise RuntimeError("the child exited")

    with pytest.raises(RuntimeError, match="the child exited"):
        relayed_launch(launch)
    out, err = capfd.readouterr()  # read here, before anything else could copy it
    assert (out, err) == ("started\n", "no Java found\n")


def test_the_child_gets_pipes_not_our_output() -> None:
    """What the relay is for: a caller reading our output to its end must not wait for the child."""
    with tempfile.TemporaryFile() as ours:
        relay = OutputRelay(ours.fileno())
        relay.start()
        child = _spawn("import os; print(os.readlink('/proc/self/fd/1'))", relay.write_fd, subprocess.DEVNULL)
        relay.close_write_end()
        assert child.wait() == 0
        relay.drain()
        ours.seek(0)
        child_stdout = ours.read().decode().strip()
        assert child_stdout.startswith("pipe:")
        assert child_stdout != os.readlink(f"/proc/self/fd/{ours.fileno()}")


def test_a_pipe_numbered_past_select_s_limit_is_relayed(tmp_path: Path) -> None:
    """A long-lived process (a test session, an in-process scheduler) holds many descriptors:
    the relay's pipe may be numbered 1024 or more, which select() refuses."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the descriptor limit ({hard}) is below what this test needs")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    fillers = [os.open(os.devnull, os.O_RDONLY) for _ in range(1030)]
    try:
        with open(tmp_path / "out", "wb+") as out:
            relay = OutputRelay(out.fileno())
            assert relay.write_fd >= 1024
            relay.start()
            child = _spawn(_WRITER, relay.write_fd, subprocess.DEVNULL)
            relay.close_write_end()
            assert child.wait() == 0
            relay.drain()
        assert (tmp_path / "out").read_bytes() == _HALF + _HALF
    finally:
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
