"""Kill `retract` at each of its S3 requests in turn, in both flavours (the request never sent; sent
but its response lost): recovery plus the retried command must reach exactly the state of a
retraction that never crashed. Retract runs on the driver only, so the client wrapper sees every
request, in one deterministic order. `make soak` crashes it at every request; `make test` at a share
of them (tests/support/sweeps.py)."""
from __future__ import annotations

import os
from typing import Any

import pytest

from eventdedup.commit.log import load_committed_state
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.pipeline import run_batch
from eventdedup.ops.retract import retract_batch
from eventdedup.promotion.recovery import recover
from eventdedup.s3store import S3Store
from eventdedup_dev.s3_requests import points_of

from ..support.helpers import NOW, bucket_listing, committed_cache_entries, put_lines
from ..support.invariants import assert_commits_are_whole, assert_seen_ids_match_output
from ..support.s3_faults import CrashingClient, SimulatedCrash
from ..support.sweeps import Unreached, share
from .conftest import B1, B2, committed_state_of, config_for, fresh_copy

E = b'{"event_id":"%s","created_at":"2026-11-22T05:%02d:00Z"}'
B3 = [E % (b"c%d" % i, i) for i in range(6)]  # later, independent of b2


@pytest.fixture(scope="module")
def before_retract(s3_server, spark):  # type: ignore[no-untyped-def]
    """b1, b2 (decided against b1) and b3 committed; checkpoints every 2 commits."""
    bucket = f"retract-src-{os.getpid()}"
    s3_server.client().create_bucket(Bucket=bucket)
    store = S3Store(s3_server.client(), bucket)
    config = config_for(s3_server.endpoint_url, bucket)
    for batch_id, lines in (("b1", B1), ("b2", B2), ("b3", B3)):
        put_lines(store, f"landing/{batch_id}/1.jsonl", lines)
        run_batch(store, config, batch_id, InputSelector(input_prefix=f"landing/{batch_id}/"), NOW, lambda: spark)
    return bucket


def outcome_of(store: S3Store, config: Any) -> dict[str, Any]:
    state = load_committed_state(store, Layout(config.layout))
    return {**committed_state_of(store, config), "retracted": dict(state.retracted),
            "cache": committed_cache_entries(store, config),
            "manifests": {key: store.get_bytes(key) for key in bucket_listing(store) if key.startswith("manifests/")}}


# Every point of both flavours is ~110 retractions (~3 minutes on 2 cores): `make test` crashes at
# every STRIDEth point of each flavour (the flavours at points apart) and at every conditional write,
# `make soak` at every point.
STRIDE = 4
OFFSET = {"raise_before": 0, "lose_response": 2}


@pytest.mark.parametrize("sweep", ["sampled", pytest.param("every", marks=pytest.mark.soak)])
@pytest.mark.parametrize("flavour", ["raise_before", "lose_response"])
def test_retract_killed_at_every_s3_request_recovers_to_exactly_the_clean_state(
        s3_server, before_retract, flavour, sweep) -> None:
    clean_bucket = fresh_copy(s3_server, before_retract)
    clean_config = config_for(s3_server.endpoint_url, clean_bucket)
    counting = CrashingClient(s3_server.client(), None)
    retract_batch(S3Store(counting, clean_bucket), clean_config, "b2", "bad input", NOW)
    clean_store = S3Store(s3_server.client(), clean_bucket)
    expected = outcome_of(clean_store, clean_config)
    assert expected["retracted"] and "b2" not in expected["batches"]
    verbs = {request.verb for request in counting.calls}
    print(f"retract makes {len(counting.calls)} S3 requests: {sorted(verbs)}")
    assert {"PUT", "COPY", "GET", "LIST"} <= verbs
    unreached = Unreached(f"retract crashes, {flavour}")
    for point in share(points_of(counting.calls), sweep, STRIDE, OFFSET[flavour]):
        bucket = fresh_copy(s3_server, before_retract)
        config = config_for(s3_server.endpoint_url, bucket)
        store = S3Store(s3_server.client(), bucket)
        crashing = CrashingClient(s3_server.client(), point, flavour=flavour)
        where = f"crash at {point} ({flavour})"
        with pytest.raises(SimulatedCrash):
            retract_batch(S3Store(crashing, bucket), config, "b2", "bad input", NOW)
        unreached.note(point, crashing.faulted)
        # Right after the crash: whatever the log shows is whole, and seen pairs match output.
        assert_commits_are_whole(store, config)
        assert_seen_ids_match_output(store, config)
        report = recover(store, config)
        assert report.consistent, (where, report.problems)
        retract_batch(store, config, "b2", "bad input", NOW)
        assert outcome_of(store, config) == expected, where
        leftovers = [k for k in bucket_listing(store)
                     if k.startswith(("_eventdedup/staging/", "_eventdedup/state/journal/"))]
        assert leftovers == [], (where, leftovers)
    unreached.report(at_most=0)
