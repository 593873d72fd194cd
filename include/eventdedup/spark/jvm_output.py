"""The driver JVM's stdout and stderr, relayed through pipes of our own.

A local SparkContext's JVM is our child. Left to inherit our stdout and stderr, it holds them
open until its shutdown hooks finish (stopping the context, deleting its temporary
directories), ~0.6 s after our own exit on a 2-core host. Whoever reads a command's output to
its end, as the bench and Airflow's subprocess tasks do, waited for that on every batch.

Relayed, the JVM writes into pipes a thread of ours copies to our stdout and stderr while we
run; what is left in them when we exit is copied then. Whatever the JVM writes after we have
exited (its shutdown, during which it cleans up on its own) reaches no one. Being copied by a
thread, a JVM line may land after a line Python wrote later, and the JVM's stdout and stderr
may interleave differently under `2>&1`: read our own output by its content, not its place.
"""
from __future__ import annotations

import atexit
import os
import select
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_CHUNK = 1 << 16


class OutputRelay:
    """Copies everything written into a pipe to `target_fd` until the writers close it."""

    def __init__(self, target_fd: int) -> None:
        self._read_fd, self.write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        self._target_fd = target_fd
        self._target_open = True
        self._finished = False
        self._lock = threading.Lock()  # one reader at a time: the thread, or the final drain
        self._thread = threading.Thread(target=self._run, name=f"eventdedup-jvm-output-{target_fd}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close_write_end(self) -> None:
        """Ours: the child has its own copy. Once every copy is closed, the relay sees the end."""
        os.close(self.write_fd)

    def drain(self) -> None:
        """Copy what is already in the pipe and stop copying (at our exit, when the thread is
        about to die with us; or after a failed launch). Only the thread closes the pipe, and
        only once it is finished: a descriptor closed under its `poll` could be reused by
        another file, which a later read would then take from."""
        with self._lock:
            if not self._finished:
                try:
                    self._copy_available()
                except OSError:
                    pass  # nothing more to copy; exiting matters more
                self._finished = True

    def _run(self) -> None:
        # poll, not select: select refuses descriptors from 1024 up, which a long-lived process
        # (a test session, an in-process scheduler) reaches.
        poller = select.poll()
        poller.register(self._read_fd, select.POLLIN)
        try:
            while True:
                poller.poll()
                with self._lock:
                    if self._finished or self._copy_available():
                        return
        finally:
            with self._lock:
                self._finished = True
                os.close(self._read_fd)

    def _copy_available(self) -> bool:
        """Copy until the pipe is empty; True at its end (every writer closed)."""
        while True:
            try:
                chunk = os.read(self._read_fd, _CHUNK)
            except BlockingIOError:
                return False
            if not chunk:
                return True
            self._write(chunk)

    def _write(self, data: bytes) -> None:
        # Once our output is gone (a reader closed it), keep reading and dropping: a JVM whose
        # pipe filled up would block on its next log line.
        view = memoryview(data)
        while self._target_open and view:
            try:
                view = view[os.write(self._target_fd, view):]
            except OSError:
                self._target_open = False


def relayed_launch(launch: Callable[[int, int], T]) -> T:
    """Call `launch(stdout_fd, stderr_fd)`, which starts a child writing to those descriptors;
    its output reaches our stdout and stderr through relays that run from before it starts
    (a JVM that fails to start says why) until it closes them or we exit."""
    relays = [OutputRelay(1), OutputRelay(2)]
    for relay in relays:
        relay.start()
        atexit.register(relay.drain)
    try:
        launched = launch(relays[0].write_fd, relays[1].write_fd)
    except BaseException:
        for relay in relays:
            relay.close_write_end()
            relay.drain()  # why the child failed, before our error about it
        raise
    for relay in relays:
        relay.close_write_end()
    return launched
