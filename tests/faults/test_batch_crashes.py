"""Kill a whole batch -- staging, the Spark job's reads and staged writes, promotion, commit -- at
each of its S3 requests in turn, in both flavours; recovery plus a rerun must reach exactly the
state of a batch that never crashed.

Requests are cut at an HTTP proxy in front of the S3 server (devtools/eventdedup_dev/s3_fault_proxy.py), so the
Spark executors' requests, made in other processes, are cut too. Executors make requests from
several threads, so which request is number k can vary between runs; every k is still tested.
The k are dealt into SHARDS interleaved shards (k = shard + 1, shard + 1 + SHARDS, ...) so that
parallel test workers can share the sweep; together the shards cover every k.
"""
from __future__ import annotations

import pytest

from eventdedup.commit.recovery import recover
from eventdedup.ops.pipeline import run_batch
from eventdedup.s3store import S3Store, make_client

from ..support.helpers import NOW, bucket_listing
from ..support.invariants import (
    assert_commits_are_whole,
    assert_seen_ids_match_output,
    assert_table_is_the_view_at_its_version,
)
from .conftest import B2_SELECTOR, committed_state_of, config_for, fresh_copy, is_injected_crash

SHARDS = 4


@pytest.mark.parametrize("shard", range(SHARDS))
@pytest.mark.parametrize("flavour", ["raise_before", "lose_response"])
def test_batch_killed_at_every_s3_request_recovers_to_exactly_the_clean_state(
        s3_server, proxy, before_b2, clean_run, spark, flavour, shard) -> None:
    requests, expected = clean_run
    kinds = {request.split(" ")[0] for request in requests}
    print(f"one batch makes {len(requests)} S3 requests ({sorted(kinds)}); crashing at every {SHARDS}th from "
          f"{shard + 1} ({flavour})")
    # POST: batch deletes; HEAD (where a checkpoint exists): a state load confirming what it keeps
    assert len(requests) > 40 and kinds - {"HEAD"} == {"GET", "PUT", "COPY", "POST"}
    assert any("/_eventdedup/log/" in r and r.startswith("PUT") for r in requests)  # the commit is among them
    for crash_at in range(shard + 1, len(requests) + 1, SHARDS):
        bucket = fresh_copy(s3_server, before_b2)
        via_proxy = config_for(proxy.endpoint_url, bucket)
        direct = config_for(s3_server.endpoint_url, bucket)
        store = S3Store(s3_server.client(), bucket)
        proxy.arm(crash_at, flavour)
        crashed: Exception | None = None
        try:
            run_batch(S3Store(make_client(via_proxy.s3), bucket), via_proxy, "b2", B2_SELECTOR, NOW, lambda: spark)
        except Exception as exc:  # noqa: BLE001 - which exception is judged just below
            crashed = exc
        made = proxy.requests[crash_at - 1] if len(proxy.requests) >= crash_at else "never made"
        where = f"crash at request {crash_at} ({made})"
        if crashed is None:
            # Only delta-rs's reads of the table after its commit may fail without failing the batch
            # (the commit stands), or a request number this run never reached (executors' threads,
            # and delta-rs's reads after a commit, vary the count a little); the state is judged below.
            delta_committed = any(r.startswith("PUT") and "/_delta_log/" in r for r in proxy.requests[:crash_at - 1])
            assert made == "never made" or (made.startswith("GET") and "/_delta_log/" in made and delta_committed), (
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


def test_a_409_conflict_on_each_conditional_write_is_retried_and_commits_exactly_the_clean_state(
        s3_server, proxy, before_b2, clean_run, spark) -> None:
    """AWS answers 409 ConditionalRequestConflict when conditional writes race: nothing was written,
    nothing is known, retry. Taken for "already exists" it would skip a manifest, journal or commit."""
    requests, expected = clean_run
    conditional = [number for number, request in enumerate(requests, start=1) if request.endswith(" if-none-match")]
    assert len(conditional) >= 3 and any("/_eventdedup/log/" in requests[n - 1] for n in conditional)
    assert any("/_delta_log/" in requests[n - 1] for n in conditional)  # the Delta table's commit is one
    print(f"{len(conditional)} conditional writes: {[requests[n - 1] for n in conditional]}")
    for at in conditional:
        bucket = fresh_copy(s3_server, before_b2)
        via_proxy = config_for(proxy.endpoint_url, bucket)
        direct = config_for(s3_server.endpoint_url, bucket)
        proxy.arm(at, "conflict")
        run_batch(S3Store(make_client(via_proxy.s3), bucket), via_proxy, "b2", B2_SELECTOR, NOW, lambda: spark)
        where = f"409 at request {at} ({proxy.requests[at - 1]})"
        assert proxy.requests[at - 1].endswith(" if-none-match"), where
        if "/_delta_log/" not in proxy.requests[at - 1]:
            assert proxy.requests[at] == proxy.requests[at - 1], where  # the very next request is its retry
        # A Delta commit's 409: delta-rs reports the table version taken; the projector reads the table
        # again, finds its log version not there, and writes it (at the same table version).
        store = S3Store(s3_server.client(), bucket)
        assert committed_state_of(store, direct) == expected, where
        assert_commits_are_whole(store, direct)
