"""Bind the cache to the settings that decide what its entries mean.

Buckets, key fields, normalisation and fingerprint fields decide which 24-byte entry an event
maps to. Change one of them under an existing cache and every retransmission looks new: the
duplicates leak silently. So the first batch records them (create-if-absent, so two first
batches cannot record different ones) and every later batch must match them. Buckets may only
grow, by a reshard committed to the log (eventdedup.cache.epochs, eventdedup.ops.reshard).
"""
from __future__ import annotations

import logging
from typing import Any

import orjson

from eventdedup.cache.epochs import BucketEpochs, Cutover
from eventdedup.config import Config
from eventdedup.errors import ConfigError
from eventdedup.keys import hour_text
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store

log = logging.getLogger(__name__)


def check_cache_identity(store: S3Store, layout: Layout, config: Config,
                         cutovers: tuple[Cutover, ...] = ()) -> BucketEpochs:
    """Record this configuration's cache identity if none is recorded; refuse a different one.
    The identity holds the first bucket count; reshards (`cutovers`, from the commit log) change
    it from an hour on, and a configured count must be the current one (unset, the cache's count
    is taken). Returns the epochs."""
    wanted = config.cache_identity()
    key = layout.cache_identity()
    data = store.get_bytes_or_none(key)
    if data is None:
        if store.put_if_absent(key, _encode(wanted), content_type="application/json") is not None:
            log.info("recorded the cache identity at %s: %s", store.uri(key), wanted)
            data = _encode(wanted)
        else:
            data = store.get_bytes(key)  # another first batch recorded it a moment ago
    recorded = orjson.loads(data)
    epochs = BucketEpochs(int(recorded["buckets"]), cutovers)
    changed = sorted(name for name in set(recorded) | set(wanted)
                     if name != "buckets" and recorded.get(name) != wanted.get(name))
    if changed:
        raise ConfigError(
            "the dedup cache was built with other settings for " + ", ".join(changed) + ": recorded "
            + ", ".join(f"{name}={recorded.get(name)!r}" for name in changed) + "; configured "
            + ", ".join(f"{name}={wanted.get(name)!r}" for name in changed)
            + f" ({store.uri(key)}). Changing them would let every retransmission through as new; restore "
              "the recorded values or start a new cache (new cache and state prefixes)"
        )
    if config.dedup.buckets and config.dedup.buckets != epochs.current:
        since = f" since {hour_text(cutovers[-1][0])} (reshard)" if cutovers else ""
        raise ConfigError(
            f"the dedup cache has {epochs.current} buckets{since}, configured {config.dedup.buckets} "
            f"({store.uri(key)}): set [dedup] buckets = {epochs.current}, or leave it unset to follow the cache. "
            "Changing the count in the configuration alone would let every retransmission through as new; grow it "
            "with `eventdedup reshard`"
        )
    return epochs


def _encode(identity: dict[str, Any]) -> bytes:
    return orjson.dumps(identity, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)


def recorded_epochs(store: S3Store, layout: Layout, cutovers: tuple[Cutover, ...]) -> BucketEpochs | None:
    """The cache's bucket epochs, whatever the configuration says; None before its first batch."""
    data = store.get_bytes_or_none(layout.cache_identity())
    return None if data is None else BucketEpochs(int(orjson.loads(data)["buckets"]), cutovers)
