"""Events older than the dedup window: still processed, never dropped for age; their cache has expired."""
from __future__ import annotations

from eventdedup.commit.log import load_committed_state
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.pipeline import run_batch
from eventdedup.s3store import S3Store

from ..support.helpers import NOW, commit_counts, committed_rows, make_config, put_lines

OLD = b'{"event_id":"old","created_at":"2026-11-22T01:30:00Z"}'  # 4.5 h before NOW
NEW = b'{"event_id":"new","created_at":"2026-11-22T05:30:00Z"}'


def test_old_events_are_kept_counted_and_checked_only_within_their_batch(s3_server, bucket, spark) -> None:
    config = make_config(s3_server.endpoint_url, bucket, dedup={"window_hours": 3})
    store = S3Store(s3_server.client(), bucket)
    put_lines(store, "landing/b1/1.jsonl", [OLD, NEW, OLD])
    put_lines(store, "landing/b2/1.jsonl", [OLD, NEW])
    for batch_id in ("b1", "b2"):
        run_batch(store, config, batch_id, InputSelector(input_prefix=f"landing/{batch_id}/"), NOW, lambda: spark)

    assert sorted((r["event_id"], r["batch_id"]) for r in committed_rows(store, config, "data")) == [
        ("new", "b1"), ("old", "b1"), ("old", "b2")]
    assert sorted((r["event_id"], r["batch_id"], r["reason"]) for r in committed_rows(store, config, "audit")) == [
        ("new", "b2", "cross_batch_natural"), ("old", "b1", "in_batch_natural")]
    counts = commit_counts(store, config)
    assert (counts["b1"]["older_than_window"], counts["b1"]["cache_keys_written"]) == (2, 1)
    assert (counts["b2"]["older_than_window"], counts["b2"]["cache_keys_written"]) == (1, 0)
    heads = load_committed_state(store, Layout(config.layout)).cache_heads
    assert all("/05/" in key for key in heads)  # no cache is written for hours outside the window
