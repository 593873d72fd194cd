"""The bucket count and the fingerprint hash of a cache: recorded by its first batch, then the
cache's own. A configuration that leaves `[dedup] buckets` unset follows the cache (whatever count
made it, a reshard included); one that sets it must name the current count; a new cache gets
NEW_CACHE_BUCKETS. Likewise `[dedup] fingerprint_hash`: a new cache gets xxh3-64, and a cache whose
identity an earlier release recorded (naming no hash) was built with blake2b-64 and keeps it."""
from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from eventdedup.cache.identity import check_cache_identity
from eventdedup.config import NEW_CACHE_BUCKETS
from eventdedup.errors import ConfigError
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store

from ..support.helpers import make_config

UNSET = {"buckets": 0}
# The identity as eventdedup 63dc235 recorded it, byte for byte: no fingerprint hash.
PREVIOUS_RELEASE_IDENTITY = (Path(__file__).resolve().parents[1] / "fixtures" / "formats" / "v1"
                             / "cache_identity.json").read_bytes()


def recorded_buckets(store: S3Store, layout: Layout) -> int:
    return int(orjson.loads(store.get_bytes(layout.cache_identity()))["buckets"])


def test_an_unset_count_records_the_new_cache_default_and_then_follows_it(s3_server, bucket) -> None:
    config = make_config(s3_server.endpoint_url, bucket, dedup=UNSET)
    store, layout = S3Store(s3_server.client(), bucket), Layout(config.layout)
    assert check_cache_identity(store, layout, config).epochs.coarse == NEW_CACHE_BUCKETS == 16
    assert recorded_buckets(store, layout) == NEW_CACHE_BUCKETS
    assert check_cache_identity(store, layout, config).epochs.coarse == NEW_CACHE_BUCKETS
    explicit_other = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 64})
    with pytest.raises(ConfigError, match=r"has 16 buckets, configured 64.*set \[dedup\] buckets = 16, or leave it unset"):
        check_cache_identity(store, layout, explicit_other)


def test_a_cache_made_with_another_count_is_read_with_its_own_when_the_count_is_unset(s3_server, bucket) -> None:
    made_with_64 = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 64})  # the default before 16
    store, layout = S3Store(s3_server.client(), bucket), Layout(made_with_64.layout)
    check_cache_identity(store, layout, made_with_64)
    unset = make_config(s3_server.endpoint_url, bucket, dedup=UNSET)
    assert check_cache_identity(store, layout, unset).epochs.coarse == 64
    assert recorded_buckets(store, layout) == 64  # never rewritten


def test_an_unset_count_follows_a_reshard_and_a_set_one_must_name_the_new_count(s3_server, bucket) -> None:
    first = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 4})
    store, layout = S3Store(s3_server.client(), bucket), Layout(first.layout)
    check_cache_identity(store, layout, first)
    cutovers = ((500_000, 8),)
    epochs = check_cache_identity(store, layout, make_config(s3_server.endpoint_url, bucket, dedup=UNSET),
                                  cutovers).epochs
    assert (epochs.coarse, epochs.current) == (4, 8)
    with pytest.raises(ConfigError, match=r"has 8 buckets since 2027-01-15T08:00Z \(reshard\), configured 4"):
        check_cache_identity(store, layout, first, cutovers)


def test_an_unset_count_does_not_excuse_other_identity_changes(s3_server, bucket) -> None:
    config = make_config(s3_server.endpoint_url, bucket, dedup=UNSET)
    store, layout = S3Store(s3_server.client(), bucket), Layout(config.layout)
    check_cache_identity(store, layout, config)
    rekeyed = make_config(s3_server.endpoint_url, bucket, dedup={**UNSET, "key_fields": ["user_id"]})
    with pytest.raises(ConfigError, match=r"built with other settings for key_fields"):
        check_cache_identity(store, layout, rekeyed)


def test_a_new_cache_records_xxh3_64_and_a_configuration_naming_another_hash_is_refused(s3_server, bucket) -> None:
    config = make_config(s3_server.endpoint_url, bucket, dedup=UNSET)
    store, layout = S3Store(s3_server.client(), bucket), Layout(config.layout)
    assert check_cache_identity(store, layout, config).fingerprint_hash == "xxh3-64"
    assert orjson.loads(store.get_bytes(layout.cache_identity()))["fingerprint_hash"] == "xxh3-64"
    named = make_config(s3_server.endpoint_url, bucket, dedup={**UNSET, "fingerprint_hash": "xxh3-64"})
    assert check_cache_identity(store, layout, named).fingerprint_hash == "xxh3-64"
    other = make_config(s3_server.endpoint_url, bucket, dedup={**UNSET, "fingerprint_hash": "blake2b-64"})
    with pytest.raises(ConfigError, match=r"other settings for fingerprint_hash: recorded fingerprint_hash='xxh3-64'; "
                                          r"configured fingerprint_hash='blake2b-64'.*leave \[dedup\] fingerprint_hash "
                                          r"unset to follow the cache"):
        check_cache_identity(store, layout, other)


def test_a_cache_configured_for_blake2b_64_from_its_first_batch_records_it(s3_server, bucket) -> None:
    config = make_config(s3_server.endpoint_url, bucket, dedup={**UNSET, "fingerprint_hash": "blake2b-64"})
    store, layout = S3Store(s3_server.client(), bucket), Layout(config.layout)
    check_cache_identity(store, layout, config)
    assert orjson.loads(store.get_bytes(layout.cache_identity()))["fingerprint_hash"] == "blake2b-64"
    assert check_cache_identity(store, layout, make_config(s3_server.endpoint_url, bucket, dedup=UNSET)
                                ).fingerprint_hash == "blake2b-64"


def test_a_cache_an_earlier_release_recorded_keeps_blake2b_64_and_its_identity_is_not_rewritten(
        s3_server, bucket) -> None:
    config = make_config(s3_server.endpoint_url, bucket, dedup=UNSET)
    store, layout = S3Store(s3_server.client(), bucket), Layout(config.layout)
    assert b"fingerprint_hash" not in PREVIOUS_RELEASE_IDENTITY
    store.put_bytes(layout.cache_identity(), PREVIOUS_RELEASE_IDENTITY, content_type="application/json")
    before = store.head(layout.cache_identity())
    identity = check_cache_identity(store, layout, config)
    assert (identity.fingerprint_hash, identity.epochs.coarse) == ("blake2b-64", 2)
    named = make_config(s3_server.endpoint_url, bucket, dedup={**UNSET, "fingerprint_hash": "blake2b-64"})
    assert check_cache_identity(store, layout, named).fingerprint_hash == "blake2b-64"
    assert store.head(layout.cache_identity()) == before
    assert store.get_bytes(layout.cache_identity()) == PREVIOUS_RELEASE_IDENTITY
    new_hash = make_config(s3_server.endpoint_url, bucket, dedup={**UNSET, "fingerprint_hash": "xxh3-64"})
    with pytest.raises(ConfigError, match=r"other settings for fingerprint_hash: recorded fingerprint_hash='blake2b-64'; "
                                          r"configured fingerprint_hash='xxh3-64'"):
        check_cache_identity(store, layout, new_hash)


def test_a_fingerprint_hash_this_release_does_not_compute_is_refused(s3_server, bucket) -> None:
    config = make_config(s3_server.endpoint_url, bucket, dedup=UNSET)
    store, layout = S3Store(s3_server.client(), bucket), Layout(config.layout)
    future = {**orjson.loads(PREVIOUS_RELEASE_IDENTITY), "buckets": 16, "fingerprint_hash": "xxh3-128"}
    store.put_bytes(layout.cache_identity(), orjson.dumps(future))
    with pytest.raises(ConfigError, match=r"fingerprint hash 'xxh3-128' .* is none this release computes"):
        check_cache_identity(store, layout, config)


def recorded_ordering(store: S3Store, layout: Layout) -> object:
    return orjson.loads(store.get_bytes(layout.cache_identity())).get("ordering")


def test_a_min_or_max_survivor_records_an_ordered_store_and_a_store_made_without_one_refuses_changelog(
        s3_server, bucket) -> None:
    """An ordered store keeps each entry's order key; one whose first batch ran with survivor
    first keeps none, so a changelog that orders versions across batches cannot run there; a
    min:/max: survivor without changelog still decides within each batch there."""
    ordered = make_config(s3_server.endpoint_url, bucket, dedup={"survivor": "max:price", "changelog": True})
    store, layout = S3Store(s3_server.client(), bucket), Layout(ordered.layout)
    assert check_cache_identity(store, layout, ordered).ordering == "max"
    assert recorded_ordering(store, layout) == {"survivor": "max:price", "values": "value", "changelog": True}
    with pytest.raises(ConfigError, match="ordering"):  # another order over the same keys: refused
        check_cache_identity(store, layout, make_config(s3_server.endpoint_url, bucket,
                                                        dedup={"survivor": "min:price", "changelog": True}))
    # Its changelog setting too: without changelog a later payload is claimed as a copy under the
    # key, which changelog would take for the key's current version (and the other way round).
    with pytest.raises(ConfigError, match=r"an ordered store made with changelog = true .* Keep changelog as "
                                          r"recorded, or populate a new store \(new output, cache and state prefixes\)"):
        check_cache_identity(store, layout, make_config(s3_server.endpoint_url, bucket, dedup={"survivor": "max:price"}))

    plain = make_config(s3_server.endpoint_url, bucket, layout={"cache_prefix": "plain/cache",
                                                                "state_prefix": "plain/state"})
    assert check_cache_identity(store, Layout(plain.layout), plain).ordering is None
    with_changelog = make_config(s3_server.endpoint_url, bucket, dedup={"survivor": "max:price", "changelog": True},
                                 layout={"cache_prefix": "plain/cache", "state_prefix": "plain/state"})
    with pytest.raises(ConfigError, match=r"keeps no order keys.*changelog = true with survivor 'max:price'.*"
                                          r"eventdedup populate.*or set changelog = false"):
        check_cache_identity(store, Layout(with_changelog.layout), with_changelog)
    within_batches = make_config(s3_server.endpoint_url, bucket, dedup={"survivor": "max:price"},
                                 layout={"cache_prefix": "plain/cache", "state_prefix": "plain/state"})
    assert check_cache_identity(store, Layout(within_batches.layout), within_batches).ordering is None
    assert recorded_ordering(store, Layout(plain.layout)) is None  # never rewritten
