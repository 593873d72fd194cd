"""The conditional commit under real races, against the real store (SeaweedFS on loopback): many
processes put commit N of one log at the same instant (`put_if_absent`, If-None-Match: *), round
after round. Exactly one wins each round, the others are told the version exists, and the record
stored is the winner's byte for byte: no lost commit, no torn one.

SeaweedFS decides a conditional PUT in its filer under a lock per object (weed/s3api/
s3api_object_handlers_put.go: the precondition re-checked under `s3.object.write:<path>`), so
this is its behaviour under contention, not a client-side interleaving (those are proven in
tests/faults/test_concurrent_promoters.py against any store)."""
from __future__ import annotations

import multiprocessing
from dataclasses import dataclass

from eventdedup.layout import Layout, LayoutSettings
from eventdedup.s3store import S3Store, make_client

from ..support.helpers import make_config

PROCESSES = 6
ROUNDS = 30


@dataclass(frozen=True)
class Attempt:
    round: int
    writer: int
    won: bool


def _racer(endpoint: str, bucket: str, writer: int, barrier: multiprocessing.synchronize.Barrier,
           results: multiprocessing.queues.Queue) -> None:  # type: ignore[name-defined]
    store = S3Store(make_client(make_config(endpoint, bucket).s3), bucket)
    layout = Layout(LayoutSettings())
    for number in range(1, ROUNDS + 1):
        barrier.wait(timeout=120)
        won = store.put_if_absent(layout.commit(number), f'{{"version": {number}, "writer": {writer}}}'.encode())
        results.put(Attempt(number, writer, won is not None))


def test_one_writer_wins_each_version_and_its_record_is_the_one_stored(s3_server, bucket) -> None:
    context = multiprocessing.get_context("spawn")  # fresh interpreters: no client shared across a fork
    barrier, results = context.Barrier(PROCESSES), context.Queue()
    racers = [context.Process(target=_racer, args=(s3_server.endpoint_url, bucket, writer, barrier, results))
              for writer in range(PROCESSES)]
    for racer in racers:
        racer.start()
    attempts = [results.get(timeout=600) for _ in range(PROCESSES * ROUNDS)]
    for racer in racers:
        racer.join(timeout=60)
    assert [racer.exitcode for racer in racers] == [0] * PROCESSES
    store, layout = S3Store(s3_server.client(), bucket), Layout(LayoutSettings())
    for number in range(1, ROUNDS + 1):
        winners = [a.writer for a in attempts if a.round == number and a.won]
        assert len(winners) == 1, (number, winners)
        assert store.get_bytes(layout.commit(number)) == f'{{"version": {number}, "writer": {winners[0]}}}'.encode()
