"""The fault injectors fail the request a test names, however concurrent requests interleave.

Issue 58: `arm(k)` failed whichever request arrived k-th; under load another thread's request
(delta-rs's LIST of the table log) took number k, and a test injected a fault it never meant to.
A fault point names a request by what it is and which occurrence; these tests race threads over
the proxy and over the client wrapper and check the named request is the one failed, every time.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from eventdedup.s3store import make_client
from eventdedup_dev.s3_fault_proxy import FaultProxy
from eventdedup_dev.s3_requests import FaultPoint, first_request, points_of

from ..support.helpers import make_config
from ..support.s3_faults import CrashingClient, SimulatedCrash


def race(workers: dict[str, Callable[[int], Any]], rounds: int) -> dict[str, list[tuple[int, BaseException]]]:
    """Run each worker's `rounds` calls on a thread of its own, all released at once; the calls that raised."""
    start = threading.Barrier(len(workers))
    failures: dict[str, list[tuple[int, BaseException]]] = {name: [] for name in workers}

    def run(name: str) -> None:
        start.wait()
        for number in range(rounds):
            try:
                workers[name](number)
            except (ClientError, SimulatedCrash) as exc:
                failures[name].append((number, exc))

    threads = [threading.Thread(target=run, args=(name,)) for name in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
        assert not thread.is_alive()
    return failures


def putter(client: Any, bucket: str, prefix: str, same_key: bool = False) -> Callable[[int], Any]:
    """A worker's call number n: PUT `prefix/n` (or the one key "same") and read it back."""
    def one(call: int) -> Any:
        key = "same" if same_key else f"{prefix}/{call}"
        client.put_object(Bucket=bucket, Key=key, Body=f"{prefix}{call}".encode())
        return client.get_object(Bucket=bucket, Key=key)["Body"].read()
    return one


def test_two_threads_racing_the_same_kinds_of_requests_fail_exactly_the_armed_one(s3_server, bucket) -> None:
    with FaultProxy(s3_server.endpoint_url) as proxy:
        config = make_config(proxy.endpoint_url, bucket)
        clients = {"a": make_client(config.s3), "b": make_client(config.s3)}
        # The client retries nothing here: a retry of the failed request would be another occurrence.
        # A thread's middle, first and last call, and two occurrences of one key both threads PUT.
        for armed_key, occurrence in [("a/7", 1), ("b/3", 1), ("a/0", 1), ("b/9", 1), ("same", 4), ("same", 11)]:
            proxy.arm(FaultPoint(identity=f"PUT {armed_key}", occurrence=occurrence), sticky=False)
            same = armed_key == "same"
            failures = race({name: putter(clients[name], bucket, name, same) for name in clients}, 10)
            failed = [(name, number) for name, calls in failures.items() for number, _ in calls]
            assert len(failed) == 1, (armed_key, failed)
            assert proxy.faulted is not None and proxy.faulted.identity == f"PUT {armed_key}", proxy.faulted
            if armed_key != "same":
                assert failed == [(armed_key.split("/")[0], int(armed_key.split("/")[1]))]
            made = [request for request in proxy.requests if request.identity == f"PUT {armed_key}"]
            # Which of them failed: this very request (texts of "same" are all equal), its occurrence.
            assert [number for number, request in enumerate(made, start=1) if request is proxy.faulted] == [occurrence]


def test_the_client_wrapper_fails_the_armed_call_of_two_racing_threads(s3_server, bucket) -> None:
    inner = s3_server.client()
    for armed_key in ("a/5", "b/12"):
        crashing = CrashingClient(inner, first_request(lambda r, key=armed_key: r.verb == "PUT" and r.key == key,
                                                       f"the PUT of {armed_key}"))
        failures = race({name: putter(crashing, bucket, name) for name in ("a", "b")}, 20)
        assert crashing.faulted is not None and crashing.faulted.key == armed_key
        name, number = armed_key.split("/")
        # The armed call failed; after it the process is dead, so later calls of both threads fail too.
        assert failures[name][0][0] == int(number) and "crash before PUT " + armed_key in str(failures[name][0][1])


def test_a_request_is_named_alike_by_the_proxy_and_by_the_client_wrapper(s3_server, bucket) -> None:
    """One home for a request's identity: a sweep may take its points from either injector."""
    with FaultProxy(s3_server.endpoint_url) as proxy:
        recording = CrashingClient(make_client(make_config(proxy.endpoint_url, bucket).s3), None)
        proxy.arm(None)
        recording.put_object(Bucket=bucket, Key="dir/a b+c.json", Body=b"0123456789")
        recording.put_object(Bucket=bucket, Key="dir/new", Body=b"n", IfNoneMatch="*")
        recording.get_object(Bucket=bucket, Key="dir/a b+c.json", Range="bytes=2-5")
        recording.head_object(Bucket=bucket, Key="dir/new")
        recording.copy_object(Bucket=bucket, Key="dir/copy", CopySource={"Bucket": bucket, "Key": "dir/a b+c.json"})
        recording.list_objects_v2(Bucket=bucket, Prefix="dir/", StartAfter="dir/a")
        recording.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "dir/new"}, {"Key": "dir/copy"}]})
        recording.delete_object(Bucket=bucket, Key="dir/a b+c.json")
        expected = ["PUT dir/a b+c.json", "PUT dir/new if-none-match", "GET dir/a b+c.json bytes=2-5", "HEAD dir/new",
                    "COPY dir/copy from dir/a b+c.json", "LIST dir/ start-after=dir/a",
                    "POST delete 2 from dir/copy", "DELETE dir/a b+c.json"]
        assert [request.identity for request in recording.calls] == expected
        assert [request.identity for request in proxy.requests] == expected


def test_a_fault_point_names_its_request_one_way_and_counts_from_one() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        FaultPoint(identity="PUT a", where=lambda r: True)
    with pytest.raises(ValueError, match="counts from 1"):
        FaultPoint(identity="PUT a", occurrence=0)


def test_the_points_of_a_run_number_each_identitys_occurrences_in_order(s3_server, bucket) -> None:
    recording = CrashingClient(s3_server.client(), None)
    for key in ("x", "y", "x", "x"):
        recording.put_object(Bucket=bucket, Key=key, Body=b"")
    assert [(point.identity, point.occurrence) for point in points_of(recording.calls)] == [
        ("PUT x", 1), ("PUT y", 1), ("PUT x", 2), ("PUT x", 3)]
