"""Fault injection for S3: a client wrapper that 'kills the process' at the k-th call.

Two flavours, as in Delta Lake's failing log store and Iceberg's commit-state-unknown tests:
- `raise_before`: call k never reaches S3 and raises;
- `lose_response`: call k takes effect on S3, but the caller sees an error.
After the fault every later call fails too, as it would in a killed process.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

S3_METHODS = ("get_object", "put_object", "head_object", "copy_object", "delete_object", "delete_objects",
              "list_objects_v2")


class SimulatedCrash(Exception):
    pass


class CrashingClient:
    def __init__(self, inner: Any, crash_at: int | None, flavour: str = "raise_before",
                 crash_on: str | None = None) -> None:
        """crash_at: the call number to fail; crash_on: instead, the first call of this method."""
        assert flavour in ("raise_before", "lose_response")
        self.inner = inner
        self.crash_at = crash_at
        self.crash_on = crash_on
        self.flavour = flavour
        self.calls: list[tuple[str, dict]] = []
        self.crashed = False
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in S3_METHODS:
            return attr

        def call(**kwargs: Any) -> Any:
            with self._lock:
                if self.crashed:
                    raise SimulatedCrash(f"process already dead; {name} not sent")
                self.calls.append((name, kwargs))
                number = len(self.calls)
                fault_here = number == self.crash_at or name == self.crash_on
                if fault_here:
                    self.crashed = True
            if fault_here and self.flavour == "raise_before":
                raise SimulatedCrash(f"crash before call {number} ({name})")
            result = attr(**kwargs)
            if fault_here:
                raise SimulatedCrash(f"crash after call {number} ({name}) took effect; response lost")
            return result

        return call


def clone_bucket(client: Any, source: str, target: str) -> None:
    """Copy every object of `source` into the (new) bucket `target`: a snapshot to fault-test from."""
    client.create_bucket(Bucket=target)
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=source):
        for item in page.get("Contents", []):
            client.copy_object(Bucket=target, Key=item["Key"], CopySource={"Bucket": source, "Key": item["Key"]})


class PausingClient:
    """Stops the calling thread just before its S3 call number `pause_at` until `release()`:
    with a second promoter run in between, each k is one deterministic interleaving."""

    def __init__(self, inner: Any, pause_at: int) -> None:
        self.inner = inner
        self.pause_at = pause_at
        self.calls = 0
        self.paused = threading.Event()
        self._released = threading.Event()

    def release(self) -> None:
        self._released.set()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in S3_METHODS:
            return attr

        def call(**kwargs: Any) -> Any:
            self.calls += 1
            if self.calls == self.pause_at:
                self.paused.set()
                assert self._released.wait(timeout=120), "never released"
            return attr(**kwargs)

        return call


class Background:
    """Work started on a thread of its own, for a test to interleave with (a paused promoter,
    an operator command): after `join`, what it returned (`result`) or raised (`error`)."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(work,))
        self._thread.start()

    def _run(self, work: Callable[[], Any]) -> None:
        try:
            self.result = work()
        except BaseException as exc:  # noqa: BLE001 - the test reads what the work raised
            self.error = exc

    def join(self, timeout: float = 120) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the background work never finished"

    def __repr__(self) -> str:
        return f"Background(result={self.result!r}, error={self.error!r})"
