"""The bucket count of a cache: recorded by its first batch, then the cache's own. A configuration
that leaves `[dedup] buckets` unset follows the cache (whatever count made it, a reshard
included); one that sets it must name the current count; a new cache gets NEW_CACHE_BUCKETS."""
from __future__ import annotations

import orjson
import pytest

from eventdedup.cache.identity import check_cache_identity
from eventdedup.config import NEW_CACHE_BUCKETS
from eventdedup.errors import ConfigError
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store

from ..support.helpers import make_config

UNSET = {"buckets": 0}


def recorded_buckets(store: S3Store, layout: Layout) -> int:
    return int(orjson.loads(store.get_bytes(layout.cache_identity()))["buckets"])


def test_an_unset_count_records_the_new_cache_default_and_then_follows_it(s3_server, bucket) -> None:
    config = make_config(s3_server.endpoint_url, bucket, dedup=UNSET)
    store, layout = S3Store(s3_server.client(), bucket), Layout(config.layout)
    assert check_cache_identity(store, layout, config).coarse == NEW_CACHE_BUCKETS == 16
    assert recorded_buckets(store, layout) == NEW_CACHE_BUCKETS
    assert check_cache_identity(store, layout, config).coarse == NEW_CACHE_BUCKETS
    explicit_other = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 64})
    with pytest.raises(ConfigError, match=r"has 16 buckets, configured 64.*set \[dedup\] buckets = 16, or leave it unset"):
        check_cache_identity(store, layout, explicit_other)


def test_a_cache_made_with_another_count_is_read_with_its_own_when_the_count_is_unset(s3_server, bucket) -> None:
    made_with_64 = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 64})  # the default before 16
    store, layout = S3Store(s3_server.client(), bucket), Layout(made_with_64.layout)
    check_cache_identity(store, layout, made_with_64)
    unset = make_config(s3_server.endpoint_url, bucket, dedup=UNSET)
    assert check_cache_identity(store, layout, unset).coarse == 64
    assert recorded_buckets(store, layout) == 64  # never rewritten


def test_an_unset_count_follows_a_reshard_and_a_set_one_must_name_the_new_count(s3_server, bucket) -> None:
    first = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 4})
    store, layout = S3Store(s3_server.client(), bucket), Layout(first.layout)
    check_cache_identity(store, layout, first)
    cutovers = ((500_000, 8),)
    epochs = check_cache_identity(store, layout, make_config(s3_server.endpoint_url, bucket, dedup=UNSET), cutovers)
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
