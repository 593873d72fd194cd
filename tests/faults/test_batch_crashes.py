"""Kill a whole batch -- staging, the Spark job's reads and staged writes, promotion, commit -- at
each of its S3 requests in turn, in both flavours; recovery plus a rerun must reach exactly the
state of a batch that never crashed.

Requests are cut at an HTTP proxy in front of the S3 server (devtools/eventdedup_dev/s3_fault_proxy.py), so the
Spark executors' requests, made in other processes, are cut too. Executors and the promotion make
requests from several threads, so a request's arrival number varies between runs (and more on a
busy machine): each fault is armed at a request named by what it is and which occurrence of it,
from the clean run's requests, so every run of the sweep fails the same requests. The points are
dealt into SHARDS interleaved shards so that parallel test workers can share the sweep: `make test`
runs one shard of each flavour (at different offsets) with every conditional write added, `make
soak` the others, so that together they fail every request in both flavours.
"""
from __future__ import annotations

import pytest

from eventdedup.ops.pipeline import run_batch
from eventdedup.promotion.recovery import recover
from eventdedup.s3store import S3Store, make_client
from eventdedup_dev.s3_requests import points_of

from ..support.helpers import NOW, bucket_listing
from ..support.invariants import (
    assert_commits_are_whole,
    assert_seen_ids_match_output,
    assert_table_is_the_view_at_its_version,
)
from ..support.sweeps import Unreached, dealt, position_of, with_conditional_writes
from .conftest import B2_SELECTOR, committed_state_of, config_for, fresh_copy, is_injected_crash

SHARDS = 4
# Every point of both flavours is ~170 whole batches (~7 minutes of a 2-core machine): `make test`
# runs this shard of each flavour, every 4th point (with every conditional write, the commit
# protocol's PUTs, added), and `make soak` the other shards.
IN_MAKE_TEST = {"raise_before": 0, "lose_response": 2}


def shards() -> list[object]:
    return [pytest.param(flavour, shard, id=f"{flavour}-{shard}",
                         marks=() if shard == IN_MAKE_TEST[flavour] else pytest.mark.soak)
            for flavour in ("raise_before", "lose_response") for shard in range(SHARDS)]


@pytest.mark.parametrize("flavour, shard", shards())
def test_batch_killed_at_every_s3_request_recovers_to_exactly_the_clean_state(
        s3_server, proxy, before_b2, clean_run, spark, flavour, shard) -> None:
    requests, expected = clean_run
    kinds = {request.verb for request in requests}
    every = points_of(requests)
    points = dealt(every, shard, SHARDS)
    if shard == IN_MAKE_TEST[flavour]:
        points = with_conditional_writes(points, every)
    print(f"one batch makes {len(requests)} S3 requests ({sorted(kinds)}); crashing at {len(points)} of them, "
          f"every {SHARDS}th from {shard + 1}{' and every conditional write' * (shard == IN_MAKE_TEST[flavour])} ({flavour})")
    # POST: batch deletes; HEAD (where a checkpoint exists): a state load confirming what it keeps
    assert len(requests) > 40 and kinds - {"HEAD"} == {"GET", "LIST", "PUT", "COPY", "POST"}
    assert any(r.verb == "PUT" and r.key.startswith("_eventdedup/log/") for r in requests)  # the commit is among them
    unreached = Unreached(f"batch crashes, shard {shard}, {flavour}")
    for point in points:
        bucket = fresh_copy(s3_server, before_b2)
        via_proxy = config_for(proxy.endpoint_url, bucket)
        direct = config_for(s3_server.endpoint_url, bucket)
        store = S3Store(s3_server.client(), bucket)
        proxy.arm(point, flavour)
        crashed: Exception | None = None
        try:
            run_batch(S3Store(make_client(via_proxy.s3), bucket), via_proxy, "b2", B2_SELECTOR, NOW, lambda: spark)
        except Exception as exc:  # noqa: BLE001 - which exception is judged just below
            crashed = exc
        made = proxy.faulted
        unreached.note(point, made)
        where = f"crash at {point} ({'made' if made else 'never made'})"
        if crashed is None:
            # Only delta-rs's reads of the table after its commit may fail without failing the batch
            # (the commit stands), or a request this run never made; the state is judged below.
            failed_at = position_of(made, proxy.requests) if made is not None else len(proxy.requests)
            delta_committed = any(r.verb == "PUT" and "/_delta_log/" in r for r in proxy.requests[:failed_at])
            assert made is None or (made.verb in ("GET", "LIST") and "_delta_log/" in made.key and delta_committed), (
                f"{where} did not fail the batch")
        else:
            assert is_injected_crash(crashed, proxy), (where, crashed)
        proxy.heal()
        # Right after the crash: whatever the log shows is whole, and seen pairs match output; the
        # Delta table holds the committed view as of the log version it reflects (b1's or b2's).
        assert_commits_are_whole(store, direct)
        assert_seen_ids_match_output(store, direct)
        report = recover(store, direct)
        assert report.consistent, (where, report.problems)
        assert_table_is_the_view_at_its_version(store, direct, caught_up=True)  # recover rolled it forward
        run_batch(store, direct, "b2", B2_SELECTOR, NOW, lambda: spark)  # the retried run
        assert committed_state_of(store, direct) == expected, where
        assert_commits_are_whole(store, direct)
        assert_seen_ids_match_output(store, direct)  # (the table: in committed_state_of, caught up)
        leftovers = [k for k in bucket_listing(store) if k.startswith(("_eventdedup/staging/", "_eventdedup/state/journal/"))]
        assert leftovers == [], (where, leftovers)
    unreached.report()


def test_a_409_conflict_on_each_conditional_write_is_retried_and_commits_exactly_the_clean_state(
        s3_server, proxy, before_b2, clean_run, spark) -> None:
    """AWS answers 409 ConditionalRequestConflict when conditional writes race: nothing was written,
    nothing is known, retry. Taken for "already exists" it would skip a manifest, journal or commit."""
    requests, expected = clean_run
    conditional = [point for point in points_of(requests) if point.identity.endswith(" if-none-match")]
    assert len(conditional) >= 3 and any(" _eventdedup/log/" in point.identity for point in conditional)
    assert any("/_delta_log/" in point.identity for point in conditional)  # the Delta table's commit is one
    print(f"{len(conditional)} conditional writes: {[str(point) for point in conditional]}")
    for point in conditional:
        bucket = fresh_copy(s3_server, before_b2)
        via_proxy = config_for(proxy.endpoint_url, bucket)
        direct = config_for(s3_server.endpoint_url, bucket)
        proxy.arm(point, "conflict")
        run_batch(S3Store(make_client(via_proxy.s3), bucket), via_proxy, "b2", B2_SELECTOR, NOW, lambda: spark)
        where = f"409 at {point}"
        assert proxy.faulted is not None and proxy.faulted.identity == point.identity, where
        # The write is retried: the same request once more than in the clean run. A Delta commit's 409:
        # delta-rs reports the table version taken; the projector reads the table again, finds its log
        # version not there, and writes it (at the same table version).
        made = sum(1 for request in proxy.requests if request.identity == point.identity)
        clean = sum(1 for request in requests if request.identity == point.identity)
        assert made == clean + 1, (where, made, clean)
        after = proxy.requests[position_of(proxy.faulted, proxy.requests) + 1:]
        assert any(request.identity == point.identity for request in after), where  # its retry came after it
        store = S3Store(s3_server.client(), bucket)
        assert committed_state_of(store, direct) == expected, where
        assert_commits_are_whole(store, direct)
