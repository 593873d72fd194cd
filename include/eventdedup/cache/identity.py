"""Bind the cache to the settings that decide what its entries mean.

Buckets, key fields, normalisation, fingerprint fields and the fingerprint hash decide which
24-byte entry an event maps to. Change one of them under an existing cache and every
retransmission looks new: the duplicates leak silently. So the first batch records them
(create-if-absent, so two first batches cannot record different ones) and every later batch must
match them. Buckets may only grow, by a reshard committed to the log (eventdedup.cache.epochs,
eventdedup.ops.reshard). The bucket count and the fingerprint hash may be left unset in the
configuration: the cache's are taken. An identity that names no hash is a BLAKE2b-64 cache's,
which keeps it (an identity is never rewritten: docs/formats.md).

A min:/max: survivor's first batch also records its order (`ordering`: the survivor, how its
values compare, and changelog, which an ordered store keeps): the store is then *ordered*, its
segments keep each entry's order key (format 3: eventdedup.cache.segment), and versions follow
that order across batches (eventdedup.dedup.decide).
A store recorded without one keeps no order keys: a changelog that must order versions across
batches is refused there (populate a new store from its output); without changelog, a min:/max:
survivor still decides within each batch.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import orjson

from eventdedup.cache.epochs import BucketEpochs, Cutover
from eventdedup.config import FINGERPRINT_BLAKE2B, FINGERPRINT_HASHES, Config, parse_survivor
from eventdedup.errors import ConfigError, CorruptStateError
from eventdedup.keys import hour_text
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CacheIdentity:
    """What a batch takes from its cache's recorded identity where the configuration may defer to it."""

    epochs: BucketEpochs
    fingerprint_hash: str  # the hash the cache's fingerprints were made with (FingerprintRules.algorithm)
    # An ordered store's survivor direction ("min" or "max": its entries keep order keys); None: the
    # store keeps none.
    ordering: str | None = None


def check_cache_identity(store: S3Store, layout: Layout, config: Config,
                         cutovers: tuple[Cutover, ...] = (), *, has_cache: bool = False) -> CacheIdentity:
    """Record this configuration's cache identity if none is recorded; refuse a different one.
    The identity holds the first bucket count; reshards (`cutovers`, from the commit log) change
    it from an hour on, and a configured count must be the current one (unset, the cache's count
    is taken). A configured fingerprint hash must be the cache's (unset, the cache's is taken)."""
    wanted = config.cache_identity()
    key = layout.cache_identity()
    data = store.get_bytes_or_none(key)
    if data is None and has_cache:
        # Which hash the entries hold is unknowable (BLAKE2b-64 or XXH3-64: docs/formats.md):
        # guessing wrong turns every natural copy into a synthetic one. Never record it over a cache.
        raise CorruptStateError(
            f"the cache identity {store.uri(key)} is missing but the commit log names cache objects: restore it "
            "(it records the settings the cache was built with, its fingerprint_hash among them) before any batch "
            "runs; recording today's settings could let every retransmission through as new")
    if data is None:
        if store.put_if_absent(key, _encode(wanted), content_type="application/json") is not None:
            log.info("recorded the cache identity at %s: %s", store.uri(key), wanted)
            data = _encode(wanted)
        else:
            data = store.get_bytes(key)  # another first batch recorded it a moment ago
    recorded = {"fingerprint_hash": FINGERPRINT_BLAKE2B, **orjson.loads(data)}  # absent: BLAKE2b (docs/formats.md)
    epochs = BucketEpochs(int(recorded["buckets"]), cutovers)
    followed = {"buckets"} | (set() if config.dedup.fingerprint_hash else {"fingerprint_hash"})
    if recorded.get("ordering") is None and wanted.get("ordering") is not None:
        if config.dedup.changelog:
            raise ConfigError(
                f"the dedup cache keeps no order keys ({store.uri(key)}): its first batch ran with survivor first or "
                f"last, or under a release before ordered stores, and changelog = true with survivor "
                f"{config.dedup.survivor!r} needs each key's current version's value. Populate a new store from this "
                "one's output (new output, cache and state prefixes, then `eventdedup populate --source-prefix "
                "<this output prefix>`), or set changelog = false (the survivor then decides within each batch)")
        followed.add("ordering")  # a min:/max: survivor within each batch, as before ordered stores
    _refuse_changelog_switch(recorded.get("ordering"), wanted.get("ordering"), store.uri(key))
    _refuse_changes(recorded, wanted, followed, store.uri(key))
    if recorded["fingerprint_hash"] not in FINGERPRINT_HASHES:
        raise ConfigError(f"the dedup cache's fingerprint hash {recorded['fingerprint_hash']!r} ({store.uri(key)}) "
                          f"is none this release computes ({', '.join(FINGERPRINT_HASHES)}): run the release "
                          "that made the cache")
    if config.dedup.buckets and config.dedup.buckets != epochs.current:
        since = f" since {hour_text(cutovers[-1][0])} (reshard)" if cutovers else ""
        raise ConfigError(
            f"the dedup cache has {epochs.current} buckets{since}, configured {config.dedup.buckets} "
            f"({store.uri(key)}): set [dedup] buckets = {epochs.current}, or leave it unset to follow the cache. "
            "Changing the count in the configuration alone would let every retransmission through as new; grow it "
            "with `eventdedup reshard`"
        )
    ordering = recorded.get("ordering")
    return CacheIdentity(epochs, str(recorded["fingerprint_hash"]),
                         None if ordering is None else parse_survivor(str(ordering["survivor"]))[0])


def _refuse_changelog_switch(recorded: Any, wanted: Any, where: str) -> None:
    """An ordered store keeps its changelog setting: without changelog, a later payload of a key is
    claimed under the key as a renamed or kept copy, so under changelog it would be taken for the
    key's current version (and a newer one dropped against it, or superseding a row no reader sees
    as the key's)."""
    if not isinstance(recorded, dict) or not isinstance(wanted, dict):
        return
    if {**recorded, "changelog": None} != {**wanted, "changelog": None}:
        return  # another order altogether: refused with the other settings
    made_with = bool(recorded.get("changelog"))
    if made_with != bool(wanted.get("changelog")):
        entries = "versions" if made_with else "its first version and that version's copies"
        raise ConfigError(
            f"the dedup cache is an ordered store made with changelog = {str(made_with).lower()} ({where}): "
            f"its entries of a key are {entries}, which the other setting would misread. Keep changelog as "
            "recorded, or populate a new store (new output, cache and state prefixes) from this one's output with "
            "the setting you want: `eventdedup populate --source-prefix <this output prefix>`")


def _refuse_changes(recorded: dict[str, Any], wanted: dict[str, Any], followed: set[str], where: str) -> None:
    """Refuse settings that differ from the recorded ones, but for those the configuration leaves
    to the cache (`followed`)."""
    changed = sorted(name for name in set(recorded) | set(wanted)
                     if name not in followed and recorded.get(name) != wanted.get(name))
    if not changed:
        return
    follow = " (or leave [dedup] fingerprint_hash unset to follow the cache)" if "fingerprint_hash" in changed else ""
    raise ConfigError(
        "the dedup cache was built with other settings for " + ", ".join(changed) + ": recorded "
        + ", ".join(f"{name}={recorded.get(name)!r}" for name in changed) + "; configured "
        + ", ".join(f"{name}={wanted.get(name)!r}" for name in changed)
        + f" ({where}). Changing them would let every retransmission through as new; restore the recorded "
          f"values{follow} or start a new cache (new cache and state prefixes)"
    )


def _encode(identity: dict[str, Any]) -> bytes:
    return orjson.dumps(identity, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)


def recorded_epochs(store: S3Store, layout: Layout, cutovers: tuple[Cutover, ...]) -> BucketEpochs | None:
    """The cache's bucket epochs, whatever the configuration says; None before its first batch."""
    data = store.get_bytes_or_none(layout.cache_identity())
    return None if data is None else BucketEpochs(int(orjson.loads(data)["buckets"]), cutovers)
