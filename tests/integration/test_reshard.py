"""Resharding with a cut-over (`eventdedup reshard`): history before it stays visible, nothing is
rewritten, and batches committed before it rerun byte for byte.

Expected rows come from the documented rules (first copy of an id wins, in any hour of the
window); expected segment buckets from the bucket rule written out in plain integers
(tests/unit/test_keys.py): an hour's segments use that hour's count.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import orjson
import pytest

from eventdedup.cache.segment import decode_segment
from eventdedup.commit.log import load_committed_state
from eventdedup.errors import ConfigError
from eventdedup.inputs.selector import InputSelector
from eventdedup.keys import CacheKey, hour_index_at, is_guard_head_key
from eventdedup.layout import Layout
from eventdedup.ops.fsck import fsck
from eventdedup.ops.pipeline import run_batch, verify_rerun
from eventdedup.ops.reshard import reshard
from eventdedup.s3store import S3Store

from ..support.helpers import NOW, committed_rows, expected_renamed_id, make_config, put_lines
from ..support.invariants import assert_commits_are_whole, assert_seen_ids_match_output
from ..unit.test_keys import splitmix_bucket

LATER = NOW + timedelta(days=1, hours=4)  # 2026-11-23T10:00Z: after the cut-over below


def ev(event_id: str, at: datetime, **payload: object) -> bytes:
    return orjson.dumps({"event_id": event_id, "created_at": at.strftime("%Y-%m-%dT%H:%M:%SZ"), **payload})


def hour(day: int, hour_of_day: int, minute: int = 10) -> datetime:
    return datetime(2026, 11, day, hour_of_day, minute, tzinfo=timezone.utc)


def run(store: S3Store, config: Any, spark: Any, batch_id: str, lines: list[bytes], now: datetime) -> None:
    put_lines(store, f"landing/{batch_id}/1.jsonl", lines)
    run_batch(store, config, batch_id, InputSelector(input_prefix=f"landing/{batch_id}/"), now, lambda: spark)


def test_a_duplicate_of_history_before_a_reshard_is_dropped_after_it_and_reruns_are_identical(
        s3_server, bucket, spark) -> None:
    # The time is out of the fingerprint, so a copy re-stamped into another hour is a natural duplicate.
    dedup = {"fingerprint_exclude": ["created_at"]}
    before = make_config(s3_server.endpoint_url, bucket, dedup={**dedup, "buckets": 2}, spark={"partitions": 2})
    after = make_config(s3_server.endpoint_url, bucket, dedup={**dedup, "buckets": 8}, spark={"partitions": 2})
    store = S3Store(s3_server.client(), bucket)
    b1 = [ev(f"p{i}", hour(22, 3 + i % 3)) for i in range(40)]
    run(store, before, spark, "b1", b1, NOW)

    outcome = reshard(store, before, 8, NOW)
    # After every hour b1 could have written: its arrival (06:00) plus max_future_hours (24), plus one.
    assert outcome.from_hour == hour_index_at(NOW) + 24 + 1 and outcome.from_text == "2026-11-23T07:00Z"
    cutover = outcome.from_hour
    with pytest.raises(ConfigError, match=r"has 8 buckets since \d{4}-\d\d-\d\dT\d\d:00Z \(reshard\).*set \[dedup\] buckets = 8"):
        run(store, before, spark, "refused", [ev("q", hour(23, 9))], LATER)

    b2_new_after = [ev(f"n{i}", hour(23, 8 + i % 2)) for i in range(30)]  # hours on the new count
    b2_new_before = [ev(f"o{i}", hour(22, 5)) for i in range(5)]  # a late hour, still on the old count
    b2 = (b1[:10]  # same hours as their originals: old-count segments
          + [ev("p11", hour(23, 8))]  # p11 re-stamped into a new-count hour: found through the id guard
          + b2_new_after + b2_new_before + [b2_new_after[0]])  # and an in-batch copy
    run(store, after, spark, "b2", b2, LATER)
    b3 = [b2_new_after[1], ev("n2", hour(23, 9), v=2), ev("p12", hour(22, 4)), ev("fresh", hour(23, 9))]
    run(store, after, spark, "b3", b3, LATER + timedelta(hours=1))

    data = {row["event_id"]: row for row in committed_rows(store, after, "data")}
    renamed = expected_renamed_id("n2", {"event_id": "n2", "v": 2})
    assert sorted(data) == sorted([f"p{i}" for i in range(40)] + [f"n{i}" for i in range(30)]
                                  + [f"o{i}" for i in range(5)] + ["fresh", renamed])
    assert data["p12"]["batch_id"] == "b1" and data["p11"]["batch_id"] == "b1"
    assert data[renamed]["original_event_id"] == "n2" and data["n0"]["batch_id"] == "b2"
    audit = sorted((row["batch_id"], row["event_id"], row["reason"], row["kept_in_batch"])
                   for row in committed_rows(store, after, "audit"))
    assert audit == sorted([("b2", f"p{i}", "cross_batch_natural", "b1") for i in range(10)]
                           + [("b2", "p11", "cross_batch_natural", "b1"), ("b2", "n0", "in_batch_natural", "b2"),
                              ("b3", "n1", "cross_batch_natural", "b2"), ("b3", "n2", "cross_batch_synthetic", "b2"),
                              ("b3", "p12", "cross_batch_natural", "b1")])

    # Every hour's segments use that hour's count, and each id sits in its bucket under it.
    state = load_committed_state(store, Layout(after.layout))
    seen_buckets: dict[bool, set[int]] = {True: set(), False: set()}
    for name, segment in state.cache_heads.items():
        if is_guard_head_key(name):
            continue
        key = CacheKey.parse(name)
        count = 8 if key.hour_index >= cutover else 2
        seen_buckets[key.hour_index >= cutover].add(key.bucket)
        for run_ in decode_segment(store.get_bytes(segment), segment):
            digests = run_.digests.tobytes()
            for i in range(len(run_)):
                assert splitmix_bucket(digests[i * 16:(i + 1) * 16], count) == key.bucket, name
    assert seen_buckets[False] == {0, 1} and len(seen_buckets[True]) > 2 and max(seen_buckets[True]) < 8

    for batch_id in ("b1", "b2", "b3"):
        assert verify_rerun(store, after, batch_id, spark) == [], batch_id
    assert fsck(store, after).consistent
    assert_commits_are_whole(store, after)
    assert_seen_ids_match_output(store, after)


def test_reshard_refuses_what_would_lose_history(s3_server, bucket, spark) -> None:
    config = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 4}, spark={"partitions": 2})
    store = S3Store(s3_server.client(), bucket)
    with pytest.raises(ConfigError, match="no identity yet"):
        reshard(store, config, 8, NOW)
    run(store, config, spark, "b1", [ev("a", hour(22, 5))], NOW)
    for buckets in (4, 2, 6):
        with pytest.raises(ConfigError, match="whole factor"):
            reshard(store, config, buckets, NOW)
    with pytest.raises(ConfigError, match="too early"):
        reshard(store, config, 8, NOW, effective_from=hour(22, 8, 0))
    with pytest.raises(ConfigError, match="whole hour"):
        reshard(store, config, 8, NOW, effective_from=hour(24, 8, 30))
    done = reshard(store, config, 8, NOW, effective_from=hour(25, 0, 0))
    assert done.newly_committed and done.from_text == "2026-11-25T00:00Z"
    again = reshard(store, config, 8, NOW)
    assert (again.version, again.newly_committed) == (done.version, False)


def test_an_ordered_store_orders_versions_across_a_reshard(s3_server, bucket, spark) -> None:
    """Order keys stay with their entries through a cut-over: b1's versions (2 buckets) are the
    current ones for b2's copies in hours on the new count and on the old; older ones are stale,
    newer ones update; every batch reruns byte for byte."""
    dedup = {"survivor": "max:price", "changelog": True}
    before = make_config(s3_server.endpoint_url, bucket, dedup={**dedup, "buckets": 2}, spark={"partitions": 2})
    after = make_config(s3_server.endpoint_url, bucket, dedup={**dedup, "buckets": 8}, spark={"partitions": 2})
    store = S3Store(s3_server.client(), bucket)
    run(store, before, spark, "b1", [ev(f"k{i}", hour(22, 3), price=10) for i in range(6)], NOW)
    reshard(store, before, 8, NOW)
    # k0, k1: older, in a new-count hour and in an old-count one; k2, k3: newer, likewise; k4 a tie.
    b2 = [ev("k0", hour(23, 9), price=9), ev("k1", hour(22, 4), price=1), ev("k2", hour(23, 9), price=11),
          ev("k3", hour(22, 5), price=10.5), ev("k4", hour(23, 8), price=10, note="tie")]
    run(store, after, spark, "b2", b2, LATER)
    run(store, after, spark, "b3", [ev("k2", hour(22, 3), price=10.5)], LATER + timedelta(hours=1))
    data = sorted((r["batch_id"], r["event_id"], r["op"], r["supersedes_batch"]) for r in committed_rows(store, after, "data"))
    assert data == sorted([("b1", f"k{i}", "insert", None) for i in range(6)]
                          + [("b2", "k2", "update", "b1"), ("b2", "k3", "update", "b1"), ("b2", "k4", "update", "b1")])
    audit = sorted((r["batch_id"], r["event_id"], r["reason"], r["kept_in_batch"])
                   for r in committed_rows(store, after, "audit"))
    assert audit == [("b2", "k0", "stale_version", "b1"), ("b2", "k1", "stale_version", "b1"),
                     ("b3", "k2", "stale_version", "b2")]
    assert all(verify_rerun(store, after, batch, spark) == [] for batch in ("b1", "b2", "b3"))
