"""Expiry and the committed state agree, whatever the clock and the order batches commit in.

The documented rules these tests compute their expectations from:
- a batch arrives at its as_of's hour, never before the log's latest arrival, and sees the
  entries of batches that arrived within one window before it;
- the log's expiry horizon is the newest committed window start minus one window
  (`retain_from_hour` of the commits); maintenance deletes only cache objects that batches
  arriving before it wrote, so the wall clock of a maintenance run cannot expire what the next
  batch needs;
- a manual batch staged long ago arrives when it commits: it sees the last window of history,
  its events of any age are checked and cached, never a CorruptStateError;
- a committed batch can be recomputed exactly while its window starts at or after the horizon.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from eventdedup.cache.expiry import expire_cache
from eventdedup.config import Config
from eventdedup.inputs.manifest import freeze_batch_inputs
from eventdedup.inputs.selector import InputSelector
from eventdedup.ops.pipeline import run_batch, verify_rerun
from eventdedup.s3store import S3Store

from ..support.helpers import NOW, commit_counts, committed_rows, make_config, put_lines

E = '{{"event_id":"{}","created_at":"{}"}}'


def event(event_id: str, at: datetime) -> bytes:
    return E.format(event_id, at.strftime("%Y-%m-%dT%H:%M:%SZ")).encode()


def run(store: S3Store, config: Config, batch_id: str, lines: list[bytes], as_of: datetime, spark) -> None:
    put_lines(store, f"landing/{batch_id}/1.jsonl", lines)
    run_batch(store, config, batch_id, InputSelector(input_prefix=f"landing/{batch_id}/"), as_of, lambda: spark)


def window_config(s3_server, bucket: str) -> Config:
    return make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 1, "window_hours": 3})


def test_maintenance_during_an_outage_expires_nothing_the_next_batch_needs(s3_server, bucket, store, spark) -> None:
    config = window_config(s3_server, bucket)
    first = event("e1", NOW - timedelta(minutes=30))
    run(store, config, "b1", [first], NOW, spark)
    # The pipeline is down for ten days; the daily maintenance keeps running (it used to judge
    # the window by its own clock, and deleted b1's hours ten days later).
    expire_cache(store, config)
    # The backfill resumes where the log stopped: b1's entries are still its history.
    later = event("e2", NOW + timedelta(minutes=30))
    run(store, config, "b2", [first, later], NOW + timedelta(hours=1), spark)

    assert sorted((r["event_id"], r["batch_id"]) for r in committed_rows(store, config, "data")) == [
        ("e1", "b1"), ("e2", "b2")]
    assert [(r["event_id"], r["batch_id"], r["reason"]) for r in committed_rows(store, config, "audit")] == [
        ("e1", "b2", "cross_batch_natural")]


def test_a_manual_batch_staged_long_ago_commits_after_its_hours_expired(s3_server, bucket, store, spark) -> None:
    config = window_config(s3_server, bucket)
    staged_at = NOW - timedelta(hours=10)  # 20:00 the day before
    old = event("x", staged_at - timedelta(minutes=30))
    run(store, config, "b0", [old], staged_at, spark)
    # m is staged (its manifest frozen as of 20:00) but not run; the log moves ten hours on.
    put_lines(store, "landing/m/1.jsonl", [old, old, event("y", staged_at - timedelta(minutes=20))])
    freeze_batch_inputs(store, config, "m", InputSelector(input_prefix="landing/m/"), staged_at)
    run(store, config, "b1", [event("z", NOW - timedelta(minutes=30))], NOW, spark)
    expire_cache(store, config)

    # m arrives at the log's latest arrival (06:00, b1's), not at its as_of (20:00 the day
    # before): it sees what arrived from 03:00 on (b1), not b0, which arrived ten hours earlier.
    # So x is new to it once (the in-batch copy is still a duplicate), and its events of the day
    # before are checked and cached like any others, never a corrupt-state halt.
    run_batch(store, config, "m", InputSelector(input_prefix="landing/m/"), NOW, lambda: spark)
    rows = sorted((r["event_id"], r["batch_id"]) for r in committed_rows(store, config, "data"))
    assert rows == [("x", "b0"), ("x", "m"), ("y", "m"), ("z", "b1")]
    assert [(r["event_id"], r["batch_id"], r["reason"]) for r in committed_rows(store, config, "audit")] == [
        ("x", "m", "in_batch_natural")]
    counts = commit_counts(store, config)["m"]
    assert (counts["cache_keys_written"], counts["output_rows"]) == (2, 2)


def test_a_late_manual_commit_does_not_hide_a_newer_batch_from_expiry(s3_server, bucket, store, spark) -> None:
    """The newest log version need not hold the newest as_of: a manual batch staged long ago and
    committed last must not make maintenance delete hours a newer batch's rerun reads."""
    config = window_config(s3_server, bucket)
    staged_at = NOW - timedelta(hours=10)
    put_lines(store, "landing/m/1.jsonl", [event("old", staged_at - timedelta(minutes=30))])
    freeze_batch_inputs(store, config, "m", InputSelector(input_prefix="landing/m/"), staged_at)
    run(store, config, "b1", [event("a", NOW - timedelta(minutes=30))], NOW, spark)
    run(store, config, "b2", [event("a", NOW - timedelta(minutes=30)), event("b", NOW + timedelta(minutes=90))],
        NOW + timedelta(hours=2), spark)
    run_batch(store, config, "m", InputSelector(input_prefix="landing/m/"), NOW, lambda: spark)

    expire_cache(store, config)
    # b2's window (05:00 on) still holds b1's hour-05 entries: its rerun reproduces it exactly.
    assert verify_rerun(store, config, "b2", spark) == []
    assert verify_rerun(store, config, "b1", spark) == []
