"""Bind the cache to the settings that decide what its entries mean.

Buckets, key fields, normalisation and fingerprint fields decide which 24-byte entry an event
maps to. Change one of them under an existing cache and every retransmission looks new: the
duplicates leak silently. So the first batch records them (create-if-absent, so two first
batches cannot record different ones) and every later batch must match them.
"""
from __future__ import annotations

import logging
from typing import Any

import orjson

from eventdedup.config import Config
from eventdedup.errors import ConfigError
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store

log = logging.getLogger(__name__)


def check_cache_identity(store: S3Store, layout: Layout, config: Config) -> None:
    """Record this configuration's cache identity if none is recorded; refuse a different one."""
    wanted = config.cache_identity()
    key = layout.cache_identity()
    data = store.get_bytes_or_none(key)
    if data is None:
        if store.put_if_absent(key, _encode(wanted), content_type="application/json") is not None:
            log.info("recorded the cache identity at %s: %s", store.uri(key), wanted)
            return
        data = store.get_bytes(key)  # another first batch recorded it a moment ago
    recorded = orjson.loads(data)
    if recorded != wanted:
        changed = sorted(name for name in set(recorded) | set(wanted) if recorded.get(name) != wanted.get(name))
        raise ConfigError(
            "the dedup cache was built with other settings for " + ", ".join(changed) + ": recorded "
            + ", ".join(f"{name}={recorded.get(name)!r}" for name in changed) + "; configured "
            + ", ".join(f"{name}={wanted.get(name)!r}" for name in changed)
            + f" ({store.uri(key)}). Changing them would let every retransmission through as new; restore "
              "the recorded values or start a new cache (new cache and state prefixes)"
        )


def _encode(identity: dict[str, Any]) -> bytes:
    return orjson.dumps(identity, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
