"""The fingerprint hash is the cache's: a store whose identity an earlier release recorded (naming no
hash) holds BLAKE2b-64 fingerprints, and this release's batches on it must fingerprint alike, or a
retransmission of one of its events would look like a synthetic duplicate. A new store gets
XXH3-64. Fingerprints, keys and derived ids are computed here from the documented rules
(tests/support/helpers.py), not by eventdedup."""
from __future__ import annotations

import hashlib
from dataclasses import replace

import orjson
import pytest

from eventdedup.config import Config
from eventdedup.errors import CorruptStateError
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.pipeline import run_batch, verify_rerun
from eventdedup.s3store import S3Store

from ..support.helpers import (
    NOW,
    OLD_STORE_HASH,
    committed_cache_entries,
    committed_rows,
    expected_fingerprint,
    expected_renamed_id,
    make_config,
    put_lines,
)
from ..support.invariants import assert_seen_ids_match_output

# The cache identity as the previous release recorded it (eventdedup.cache.identity: sorted keys,
# two-space indent), for make_config's 4 buckets: no fingerprint_hash.
PREVIOUS_RELEASE_IDENTITY = b"""{
  "buckets": 4,
  "fingerprint_exclude": [],
  "fingerprint_fields": [],
  "key_fields": [
    "event_id"
  ],
  "normalize": [],
  "time_field": "created_at"
}"""


def ev(event_id: str, at: str, **payload: object) -> bytes:
    return orjson.dumps({"event_id": event_id, "created_at": f"2026-11-22T{at}:00Z", **payload})


A, B, C = ev("a", "03:10", n=1), ev("b", "04:20", city="東京"), ev("c", "05:00")
B_OTHER = ev("b", "04:20", city="Kyōto")  # same id, another payload: a synthetic duplicate
D = ev("d", "05:30")


def key_of(event_id: str) -> bytes:
    return hashlib.blake2b(event_id.encode(), digest_size=16).digest()  # not a UUID: its 16-byte BLAKE2b


def run(store: S3Store, config: Config, batch_id: str, lines: list[bytes], spark) -> None:  # type: ignore[no-untyped-def]
    put_lines(store, f"landing/{batch_id}/events.jsonl", lines)
    run_batch(store, config, batch_id, InputSelector(input_prefix=f"landing/{batch_id}/"), NOW, lambda: spark)


def old_store(store: S3Store, config: Config, spark) -> None:  # type: ignore[no-untyped-def]
    """A store whose first batch the previous release ran: its identity names no hash and its cache
    entries hold BLAKE2b-64 fingerprints (checked here against hashlib)."""
    store.put_bytes(Layout(config.layout).cache_identity(), PREVIOUS_RELEASE_IDENTITY, content_type="application/json")
    named = replace(config, dedup=replace(config.dedup, fingerprint_hash=OLD_STORE_HASH))
    run(store, named, "b1", [A, B, C], spark)
    assert committed_cache_entries(store, config) == sorted(
        ("b1", key_of(orjson.loads(line)["event_id"]), expected_fingerprint(line, OLD_STORE_HASH))
        for line in (A, B, C))


def test_a_batch_on_a_store_an_earlier_release_made_fingerprints_with_blake2b_64(s3_server, bucket, spark) -> None:
    config = make_config(s3_server.endpoint_url, bucket)  # [dedup] fingerprint_hash unset, as after an upgrade
    store = S3Store(s3_server.client(), bucket)
    old_store(store, config, spark)
    identity_before = store.head(Layout(config.layout).cache_identity())

    run(store, config, "b2", [A, B_OTHER, D], spark)

    # A came back whole: natural, dropped. B came back with another payload: synthetic, renamed (the
    # default policy) to the id derived from its BLAKE2b fingerprint. Were the batch hashing with
    # XXH3, A would not match its cache entry and would be renamed too.
    renamed = expected_renamed_id("b", B_OTHER, OLD_STORE_HASH)
    data = committed_rows(store, config, "data")
    assert sorted((r["batch_id"], r["event_id"], r["original_event_id"], r["raw"]) for r in data) == sorted([
        ("b1", "a", None, A.decode()), ("b1", "b", None, B.decode()), ("b1", "c", None, C.decode()),
        ("b2", renamed, "b", B_OTHER.decode()), ("b2", "d", None, D.decode()),
    ])
    audit = committed_rows(store, config, "audit")
    assert sorted((r["batch_id"], r["line_number"], r["event_id"], r["reason"], r["action"], r["kept_in_batch"])
                  for r in audit) == [("b2", 1, "a", "cross_batch_natural", "dropped", "b1"),
                                      ("b2", 2, "b", "cross_batch_synthetic", "renamed", "b1")]
    assert committed_cache_entries(store, config) == sorted(
        [("b1", key_of(orjson.loads(line)["event_id"]), expected_fingerprint(line, OLD_STORE_HASH))
         for line in (A, B, C)]
        + [("b2", key_of("b"), expected_fingerprint(B_OTHER, OLD_STORE_HASH)),
           ("b2", key_of("d"), expected_fingerprint(D, OLD_STORE_HASH))])
    assert_seen_ids_match_output(store, config)
    assert verify_rerun(store, config, "b2", spark) == []
    # The identity is the earlier release's still, byte for byte: that release can go on reading it.
    assert store.head(Layout(config.layout).cache_identity()) == identity_before
    assert store.get_bytes(Layout(config.layout).cache_identity()) == PREVIOUS_RELEASE_IDENTITY


def test_a_new_store_fingerprints_with_xxh3_64(s3_server, bucket, spark) -> None:
    config = make_config(s3_server.endpoint_url, bucket)
    store = S3Store(s3_server.client(), bucket)
    run(store, config, "b1", [A, B, C], spark)
    run(store, config, "b2", [A, B_OTHER], spark)
    assert orjson.loads(store.get_bytes(Layout(config.layout).cache_identity()))["fingerprint_hash"] == "xxh3-64"
    assert committed_cache_entries(store, config) == sorted(
        [("b1", key_of(orjson.loads(line)["event_id"]), expected_fingerprint(line, "xxh3-64")) for line in (A, B, C)]
        + [("b2", key_of("b"), expected_fingerprint(B_OTHER, "xxh3-64"))])
    renamed = expected_renamed_id("b", B_OTHER, "xxh3-64")
    assert sorted((r["event_id"], r["reason"], r["action"]) for r in committed_rows(store, config, "audit")) == [
        ("a", "cross_batch_natural", "dropped"), ("b", "cross_batch_synthetic", "renamed")]
    assert renamed in {r["event_id"] for r in committed_rows(store, config, "data")}


def test_a_store_whose_identity_is_gone_but_whose_cache_is_not_is_refused_not_recorded_anew(
        s3_server, bucket, spark) -> None:
    """Which hash its entries hold is unknowable without the identity: recording today's (XXH3-64)
    over an older release's BLAKE2b cache would make every natural copy a synthetic one."""
    config = make_config(s3_server.endpoint_url, bucket)
    store = S3Store(s3_server.client(), bucket)
    run(store, config, "b1", [A, B, C], spark)
    identity = Layout(config.layout).cache_identity()
    store.delete_keys([identity])
    with pytest.raises(CorruptStateError, match="cache identity .* is missing but the commit log names cache objects"):
        run(store, config, "b2", [A, D], spark)
    assert store.get_bytes_or_none(identity) is None
    assert sorted(r["event_id"] for r in committed_rows(store, config, "data")) == ["a", "b", "c"]
