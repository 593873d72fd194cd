"""Fault injection for S3 at the client: a wrapper that 'kills the process' at a request it names.

Two flavours, as in Delta Lake's failing log store and Iceberg's commit-state-unknown tests:
- `raise_before`: the request never reaches S3 and raises;
- `lose_response`: the request takes effect on S3, but the caller sees an error.
After the fault every later call fails too, as it would in a killed process.

The request is a `FaultPoint` (eventdedup_dev.s3_requests): named by what it is and which
occurrence, never by its call number, which the promotion's copy threads reorder from run to run.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from eventdedup_dev.s3_requests import FaultPoint, PointCounter, S3Request, request_of_call

CLONE_THREADS = 10  # botocore's default connection pool: more threads would open connections it then discards
S3_METHODS = ("get_object", "put_object", "head_object", "copy_object", "delete_object", "delete_objects",
              "list_objects_v2")


class SimulatedCrash(Exception):
    pass


class CrashingClient:
    """Records every S3 call (`calls`, as S3Requests) and fails the one `at` names (None: none)."""

    def __init__(self, inner: Any, at: FaultPoint | None, flavour: str = "raise_before") -> None:
        assert flavour in ("raise_before", "lose_response")
        self.inner = inner
        self.flavour = flavour
        self.calls: list[S3Request] = []
        self.crashed = False
        self._armed = PointCounter(at)
        self._lock = threading.Lock()

    @property
    def faulted(self) -> S3Request | None:
        """The call that was failed; None while it has not been made."""
        return self._armed.reached

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in S3_METHODS:
            return attr

        def call(**kwargs: Any) -> Any:
            request = request_of_call(name, kwargs)
            with self._lock:
                if self.crashed:
                    raise SimulatedCrash(f"process already dead; {request.identity} not sent")
                self.calls.append(request)
                fault_here = self._armed.hit(request)
                if fault_here:
                    self.crashed = True
            if fault_here and self.flavour == "raise_before":
                raise SimulatedCrash(f"crash before {request.identity}")
            result = attr(**kwargs)
            if fault_here:
                raise SimulatedCrash(f"crash after {request.identity} took effect; response lost")
            return result

        return call


def clone_bucket(client: Any, source: str, target: str) -> None:
    """Copy every object of `source` into the (new) bucket `target`: a snapshot to fault-test from.
    The copies are independent and made at once (as many as the client's connection pool holds): a
    sweep clones a snapshot per fault point, and a store that answers each write after a pause (the
    embedded one holds new writes up to a second while it judges its disk bound) pauses for them
    together instead of once per object."""
    client.create_bucket(Bucket=target)
    keys = [item["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=source)
            for item in page.get("Contents", [])]
    with ThreadPoolExecutor(CLONE_THREADS) as pool:
        list(pool.map(lambda key: client.copy_object(Bucket=target, Key=key, CopySource={"Bucket": source, "Key": key}),
                      keys))


class PausingClient:
    """Stops the thread that makes the request `at` names, just before it, until `release()`:
    with a second promoter run in between, each fault point is one deterministic interleaving."""

    def __init__(self, inner: Any, at: FaultPoint) -> None:
        self.inner = inner
        self.paused = threading.Event()
        self._armed = PointCounter(at)
        self._released = threading.Event()

    @property
    def paused_at(self) -> S3Request | None:
        return self._armed.reached

    def release(self) -> None:
        self._released.set()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in S3_METHODS:
            return attr

        def call(**kwargs: Any) -> Any:
            if self._armed.hit(request_of_call(name, kwargs)):
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
