"""A process loads a state version once (eventdedup.commit.log.load_committed_state): a second
load that finds the same checkpoint reads neither it nor the commits it already folded, only what
was committed since; a store made again under the same bucket name (another checkpoint, the
same key, even with byte-identical checkpoint) is never taken for the one loaded before. Through the counting proxy, against the
local S3 store; commits written with the log's own writers."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from urllib.parse import unquote

from eventdedup.commit.changes import BatchChange
from eventdedup.commit.log import load_committed_state, write_checkpoint_if_due, write_commit
from eventdedup.commit.records import CommitRecord
from eventdedup.counts import BatchCounts
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store, make_client
from eventdedup_dev.s3_fault_proxy import FaultProxy

from ..support.helpers import make_config

T0 = datetime(2026, 11, 22, tzinfo=timezone.utc)


def commit(store: S3Store, layout: Layout, version: int, tag: str) -> None:
    record = CommitRecord(version, f"{tag}{version}", None if version == 1 else f"{tag}{version - 1}", "t",
                          (T0 + timedelta(minutes=5 * version)).isoformat(), BatchCounts(), (),
                          {"2026-11-22/00/0000": f"cache/{tag}{version}.seg"},
                          BatchChange(arrival_hour=490_000 + version))
    write_commit(store, layout, record)


def test_a_second_load_reads_only_what_was_committed_since_and_a_remade_store_is_loaded_afresh(
        s3_server, bucket) -> None:
    with FaultProxy(s3_server.endpoint_url) as proxy:
        config = make_config(proxy.endpoint_url, bucket)
        store, layout = S3Store(make_client(config.s3), bucket), Layout(config.layout)
        for version in range(1, 5):
            commit(store, layout, version, "a")
        state = load_committed_state(store, layout)
        write_checkpoint_if_due(store, layout, state, 3)  # not due at 4: no checkpoint yet
        commit(store, layout, 5, "a")
        commit(store, layout, 6, "a")
        write_checkpoint_if_due(store, layout, load_committed_state(store, layout), 3)  # checkpoint 6
        commit(store, layout, 7, "a")

        def gets() -> list[str]:
            return sorted(unquote(request).split(bucket + "/", 1)[1] for request in proxy.requests
                          if request.startswith("GET ") and "?" not in request)

        first_checkpoint = store.head(layout.checkpoint(6))
        proxy.arm(None)
        first = load_committed_state(store, layout)  # checkpoint 6 read, commit 7 folded
        assert first.version == 7 and any("checkpoint" in key for key in gets())
        proxy.arm(None)
        again = load_committed_state(store, layout)
        assert again == first
        assert gets() == [layout.last_checkpoint]  # the pointer; two HEADs and a LIST besides
        commit(store, layout, 8, "a")
        proxy.arm(None)
        later = load_committed_state(store, layout)
        assert later.version == 8 and gets() == sorted([layout.last_checkpoint, layout.commit(8)])

        # The same bucket made again, with the same six commits: its checkpoint 6 has the same key
        # and the same bytes (checkpoints are deterministic); then another commit 7.
        s3_server.delete_bucket(bucket)
        s3_server.client().create_bucket(Bucket=bucket)
        for version in range(1, 7):
            commit(store, layout, version, "a")
        write_checkpoint_if_due(store, layout, load_committed_state(store, layout, fresh=True), 3)
        assert store.head(layout.checkpoint(6)).etag == first_checkpoint.etag  # type: ignore[union-attr]
        record = CommitRecord(7, "c7", "a6", "t", (T0 + timedelta(minutes=35)).isoformat(), BatchCounts(), (), {},
                              BatchChange(arrival_hour=490_007))
        write_commit(store, layout, record)
        remade = load_committed_state(store, layout)
        assert (remade.version, remade.last_batch_id) == (7, "c7")
        assert set(remade.batches) == {*(f"a{v}" for v in range(1, 7)), "c7"}
