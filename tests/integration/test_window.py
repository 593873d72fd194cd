"""The dedup window is measured in arrival time: an entry lives `window_hours` from the arrival of
the batch that wrote it, whatever its event's time (README "Dedup window").

Expected rows come from that rule, computed here: a batch arriving at hour A sees the entries of
batches that arrived at or after A - window_hours.
"""
from __future__ import annotations

from datetime import timedelta

from eventdedup.inputs.selector import InputSelector
from eventdedup.ops.pipeline import run_batch
from eventdedup.s3store import S3Store

from ..support.helpers import NOW, commit_counts, committed_rows, make_config, put_lines

OLD = b'{"event_id":"old","created_at":"2026-11-22T01:30:00Z"}'  # 4.5 h before NOW: older than the window
NEW = b'{"event_id":"new","created_at":"2026-11-22T05:30:00Z"}'


def test_an_event_older_than_the_window_is_still_checked_against_every_batch_of_the_window(
        s3_server, bucket, spark) -> None:
    config = make_config(s3_server.endpoint_url, bucket, dedup={"window_hours": 3})
    store = S3Store(s3_server.client(), bucket)
    put_lines(store, "landing/b1/1.jsonl", [OLD, NEW, OLD])
    put_lines(store, "landing/b2/1.jsonl", [OLD, NEW])
    for batch_id in ("b1", "b2"):
        run_batch(store, config, batch_id, InputSelector(input_prefix=f"landing/{batch_id}/"), NOW, lambda: spark)

    assert sorted((r["event_id"], r["batch_id"]) for r in committed_rows(store, config, "data")) == [
        ("new", "b1"), ("old", "b1")]
    assert sorted((r["event_id"], r["batch_id"], r["reason"]) for r in committed_rows(store, config, "audit")) == [
        ("new", "b2", "cross_batch_natural"), ("old", "b1", "in_batch_natural"), ("old", "b2", "cross_batch_natural")]
    counts = commit_counts(store, config)
    assert (counts["b1"]["cache_keys_written"], counts["b2"]["cache_keys_written"]) == (2, 0)


def test_an_entry_expires_a_window_after_its_batch_arrived_not_after_its_event_time(s3_server, bucket, spark) -> None:
    window = 3
    config = make_config(s3_server.endpoint_url, bucket, dedup={"window_hours": window})
    store = S3Store(s3_server.client(), bucket)
    arrivals = {"b1": NOW, "b2": NOW + timedelta(hours=window), "b3": NOW + timedelta(hours=window + 1)}
    for batch_id, as_of in arrivals.items():
        put_lines(store, f"landing/{batch_id}/1.jsonl", [NEW])
        run_batch(store, config, batch_id, InputSelector(input_prefix=f"landing/{batch_id}/"), as_of, lambda: spark)

    # b2 arrives exactly a window after b1: b1's entry is still seen. b3 arrives a window and an
    # hour after b1, and b2 emitted nothing: the copy is new again for b3.
    assert sorted((r["event_id"], r["batch_id"]) for r in committed_rows(store, config, "data")) == [
        ("new", "b1"), ("new", "b3")]
    assert sorted((r["batch_id"], r["reason"], r["kept_in_batch"])
                  for r in committed_rows(store, config, "audit")) == [("b2", "cross_batch_natural", "b1")]
