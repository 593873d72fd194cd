"""The committed state is bounded by the window, not by the age of the store.

500 batches commit against the S3 server the way a promotion ends (conditional commit, fold,
checkpoint with the markers of batches that left the state), one batch per hour, with a 3-hour
window; the whole promotion path of the same rules runs in tests/integration/test_maintenance.py. Expected from the documented rules, computed here:
- a batch as of the start of hour h+1 arrives at hour h+1 and sees entries that arrived from
  h+1-3 (its window start); its commit lets whatever arrived before window start - 3 leave the
  state;
- the state keeps the heads some batch arriving at or after that horizon wrote, and the batches
  that arrived at or after it;
- every batch that left the state is still found committed, at its version.
"""
from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

from eventdedup.commit.changes import BatchChange
from eventdedup.commit.log import committed_version, load_committed_state, write_checkpoint_if_due, write_commit
from eventdedup.commit.records import CommitRecord, PromotedObject
from eventdedup.counts import BatchCounts
from eventdedup.keys import CacheKey, hour_index_at
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store

from ..support.helpers import NOW, make_config

WINDOW = 3
BUCKETS = 4
COMMITS = 500
CHECKPOINT_INTERVAL = 10
FIRST_HOUR = hour_index_at(NOW)


class ReadCountingClient:
    """Counts the bytes of every GET body, passing everything through to the real client."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.bytes_read = 0
        self.gets = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def get_object(self, **kwargs: Any) -> Any:
        response = self.inner.get_object(**kwargs)
        body = response["Body"].read()
        self.bytes_read += len(body)
        self.gets += 1
        response["Body"] = io.BytesIO(body)
        return response


def batch_id(i: int) -> str:
    return f"hourly-{i:05d}"


def hourly_commit(layout: Layout, i: int, previous: str | None) -> CommitRecord:
    """Commit i + 1: batch i as of the end of hour i, one cache head per bucket of hour i."""
    hour, batch = FIRST_HOUR + i, batch_id(i)
    heads = {str(CacheKey.of_hour(hour, b)): layout.final_cache_segment(batch, CacheKey.of_hour(hour, b))
             for b in range(BUCKETS)}
    as_of = CacheKey.of_hour(hour + 1, 0).hour_start
    window_start = hour_index_at(as_of - timedelta(hours=WINDOW))
    data = PromotedObject("data", f"deduped/{batch}.parquet", 100, '"etag"', 1)
    return CommitRecord(i + 1, batch, previous, f"token-{i}", as_of.isoformat(), BatchCounts(output_rows=1), (data,),
                        heads, BatchChange(window_start, window_start - WINDOW))


def test_five_hundred_hourly_commits_keep_the_state_and_its_load_flat(s3_server, bucket) -> None:
    config = make_config(s3_server.endpoint_url, bucket,
                         dedup={"buckets": BUCKETS, "window_hours": WINDOW, "checkpoint_interval": CHECKPOINT_INTERVAL})
    layout = Layout(config.layout)
    store = S3Store(s3_server.client(), bucket)
    checkpoint_sizes: dict[int, int] = {}
    load_bytes: dict[int, int] = {}
    state = load_committed_state(store, layout)
    for i in range(COMMITS):
        record = hourly_commit(layout, i, state.last_batch_id)
        write_commit(store, layout, record)
        state = state.apply(record, f"commit {record.version}")
        state = write_checkpoint_if_due(store, layout, state, CHECKPOINT_INTERVAL)
        version = i + 1
        if version % CHECKPOINT_INTERVAL == 0:
            checkpoint_sizes[version] = len(store.get_bytes(layout.checkpoint(version)))
        if version % 50 == 5:  # halfway between checkpoints: a checkpoint plus five commits to fold
            counting = ReadCountingClient(s3_server.client())
            load_committed_state(S3Store(counting, bucket), layout)
            load_bytes[version] = counting.bytes_read

    assert load_committed_state(store, layout) == state
    last_hour = FIRST_HOUR + COMMITS - 1
    horizon = (last_hour + 1 - WINDOW) - WINDOW  # the newest window start minus one window
    assert state.retain_from_hour == horizon
    # Batch i arrives at hour i + 1 and writes the heads of hour i: kept while it arrived at or
    # after the horizon.
    kept = [i for i in range(COMMITS) if FIRST_HOUR + i + 1 >= horizon]
    assert sorted(state.cache_heads) == sorted(str(CacheKey.of_hour(FIRST_HOUR + i, b)) for i in kept
                                               for b in range(BUCKETS))
    assert dict(state.batches) == {batch_id(i): i + 1 for i in kept}
    # Every batch is still known committed, at its own version, whether it is in the state or not.
    assert [committed_version(store, layout, state, batch_id(i)) for i in range(COMMITS)] == list(
        range(1, COMMITS + 1))
    assert committed_version(store, layout, state, "hourly-never") is None

    # Flat after the window fills: every checkpoint from version 50 on within a few bytes of the
    # others (ids and hours are fixed-width), and so is what a state load reads.
    steady = [size for version, size in checkpoint_sizes.items() if version >= 50]
    assert max(steady) - min(steady) <= 32, checkpoint_sizes
    steady_loads = [size for version, size in load_bytes.items() if version >= 50]
    assert max(steady_loads) - min(steady_loads) <= 64, load_bytes
    print(f"\ncheckpoint bytes at versions 10/50/250/500: {checkpoint_sizes[10]}/{checkpoint_sizes[50]}/"
          f"{checkpoint_sizes[250]}/{checkpoint_sizes[500]}; state-load bytes at 55/255/455: "
          f"{load_bytes[55]}/{load_bytes[255]}/{load_bytes[455]}")
