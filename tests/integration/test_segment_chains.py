"""A key's history as a chain of segments (eventdedup.cache.heads), through Spark and the S3
server on the shipped defaults: a batch that adds a few ids to an old hour writes a tail of its
own beside the hour's segment instead of rewriting it, reads that segment in parts, and every
later batch finds copies in the base and in the tail. Reruns, expiry, fsck and a retraction
keep the chain whole. Expected rows are computed here from the rules: a copy of a kept id is
dropped whatever object of the chain holds it."""
from __future__ import annotations

from datetime import timedelta
from urllib.parse import unquote

import orjson

from eventdedup.cache.expiry import expire_cache
from eventdedup.commit.log import committed_record, load_committed_state
from eventdedup.inputs.selector import InputSelector
from eventdedup.keys import is_guard_head_key
from eventdedup.layout import Layout
from eventdedup.ops.fsck import fsck
from eventdedup.ops.pipeline import run_batch, verify_rerun
from eventdedup.ops.retract import retract_batch
from eventdedup.s3store import S3Store, make_client
from eventdedup_dev.s3_fault_proxy import FaultProxy

from ..support.helpers import NOW, committed_rows, make_config, put_lines

OLD = NOW - timedelta(hours=30)  # the stragglers' hour


def at(hours_ago: float) -> str:
    return (NOW - timedelta(hours=hours_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def event(name: str, created: str) -> dict:
    return {"event_id": name, "created_at": created, "v": 1}


def run(store: S3Store, config, batch: str, events: list[dict], minutes: int, spark) -> None:  # type: ignore[no-untyped-def]
    put_lines(store, f"landing/{batch}/1.jsonl", [orjson.dumps(e) for e in events])
    run_batch(store, config, batch, InputSelector(input_prefix=f"landing/{batch}/"), NOW + timedelta(minutes=minutes),
              lambda: spark)


def segment_chains(store: S3Store, config) -> dict[str, tuple[str, ...]]:  # type: ignore[no-untyped-def]
    state = load_committed_state(store, Layout(config.layout))
    return {name: chain for name, chain in state.cache_chains().items() if not is_guard_head_key(name)}


def test_stragglers_in_an_old_hour_write_a_tail_and_every_later_copy_is_found(s3_server, bucket, spark) -> None:
    with FaultProxy(s3_server.endpoint_url) as proxy:
        config = make_config(proxy.endpoint_url, bucket, dedup={"buckets": 1},
                             spark={"local_cache_bytes": 0})  # no local copies: old hours read in parts
        store = S3Store(make_client(config.s3), bucket)
        originals = [event(f"old-{n}", at(30)) for n in range(6000)]  # 144 KB of entries: more than a merge
        run(store, config, "b1", originals, 0, spark)
        ((hour_key, (base,)),) = segment_chains(store, config).items()
        base_size = store.head(base).size  # type: ignore[union-attr]

        proxy.arm(None)
        stragglers = [event(f"late-{n}", at(29.5)) for n in range(3)]
        run(store, config, "b2", [*stragglers, originals[1234], stragglers[1]], 5, spark)
        read = sum(served for request, served in proxy.bytes_served.items() if base in unquote(request))
        record = committed_record(store, Layout(config.layout), 2)
        tail = record.cache_heads[hour_key]
        assert dict(record.cache_bases) == {hour_key: (base,)}  # b2 built on b1's segment
        assert segment_chains(store, config) == {hour_key: (base, tail)}
        assert store.head(tail).size < 1_000 < 144_000 < base_size  # 3 entries, beside the 6,000
        # 4 ids probed in 24 blocks: the base's last 8 KiB, its run table and at most 4 blocks (8
        # ranges), with the holes of up to 8 KiB between ranges read to save requests
        assert read < 8192 + 4 * 256 * 24 + 6 * 8192 + 1024 < base_size

        # b3: copies of a base id and of a tail id are dropped; a new straggler is kept. b2's
        # tail is small: b3's head merges it, and builds on the base.
        run(store, config, "b3", [originals[5], stragglers[2], event("later", at(29.9))], 10, spark)
        (b3_head,) = [key for name, key in committed_record(store, Layout(config.layout), 3).cache_heads.items()
                      if name == hour_key]
        assert segment_chains(store, config) == {hour_key: (base, b3_head)}

    # The proxy is gone: on, straight to the store (a client kept-alive through the proxy would still
    # work, a new connection, e.g. the Delta table's, would not).
    config = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 1}, spark={"local_cache_bytes": 0})
    store = S3Store(s3_server.client(), bucket)
    kept = {(row["batch_id"], row["event_id"]) for row in committed_rows(store, config, "data")}
    assert kept == ({("b1", e["event_id"]) for e in originals} | {("b2", e["event_id"]) for e in stragglers}
                    | {("b3", "later")})
    dropped = sorted((row["batch_id"], row["event_id"], row["reason"], row["kept_in_batch"])
                     for row in committed_rows(store, config, "audit"))
    assert dropped == [("b2", "late-1", "in_batch_natural", "b2"), ("b2", "old-1234", "cross_batch_natural", "b1"),
                       ("b3", "late-2", "cross_batch_natural", "b2"), ("b3", "old-5", "cross_batch_natural", "b1")]

    # Reruns reproduce each batch against today's chain; expiry deletes b2's merged tail and
    # nothing of the chain; fsck finds every object the log promises.
    assert [verify_rerun(store, config, batch, spark) for batch in ("b1", "b2", "b3")] == [[], [], []]
    report = expire_cache(store, config)
    assert [key for key in report.superseded if not key.endswith(".guard")] == [tail] and report.expired == []
    assert store.head(base) is not None and store.head(b3_head) is not None
    assert verify_rerun(store, config, "b2", spark) == []  # judged by today's chain once its tail is gone
    assert fsck(store, config).consistent

    # Retracting b3 rewrites the key whole without b3's run: a copy of b3's id is new again,
    # copies of b1's and b2's are still dropped.
    retract_batch(store, config, "b3", "test", NOW + timedelta(minutes=12))
    (chain,) = segment_chains(store, config).values()
    assert len(chain) == 1
    run(store, config, "b4", [event("later", at(29.9)), originals[6], stragglers[0]], 15, spark)
    b4 = sorted((row["event_id"], row["reason"], row["kept_in_batch"]) for row in committed_rows(store, config, "audit")
                if row["batch_id"] == "b4")
    assert b4 == [("late-0", "cross_batch_natural", "b2"), ("old-6", "cross_batch_natural", "b1")]
    assert ("b4", "later") in {(row["batch_id"], row["event_id"]) for row in committed_rows(store, config, "data")}
    # b4 built on the retraction's segment: fsck --last 1 checks b4's commit, and that every
    # object its chain still reads exists, however old.
    (chain,) = segment_chains(store, config).values()
    assert len(chain) == 2
    assert fsck(store, config, last=1).consistent
    store.delete_keys([chain[0]])
    assert [item.key for item in fsck(store, config, last=1).missing] == [chain[0]]
