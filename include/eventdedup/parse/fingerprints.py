"""Event fingerprints: a digest of the payload that tells natural from synthetic duplicates (Snowplow).

The payload is canonical JSON (keys sorted at every depth, no whitespace), so key order and
formatting do not matter. By default it covers the whole event; `fingerprint_fields` narrows it
to listed top-level fields, and `fingerprint_exclude` leaves out volatile ones such as a
collector timestamp that differs between retransmissions of the same event.

The hash of the canonical payload is the cache's (`algorithm`, recorded in its identity,
eventdedup.cache.identity): 64-bit BLAKE2b where the identity names none (docs/formats.md),
XXH3-64 (seed 0) for new caches. Either is read as an unsigned 64-bit integer, big-endian for
BLAKE2b's digest bytes.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import xxhash

from eventdedup.config import FINGERPRINT_BLAKE2B, FINGERPRINT_HASHES, FINGERPRINT_XXH3
from eventdedup.keys import FINGERPRINT_BYTES


@dataclass(frozen=True)
class FingerprintRules:
    fields: tuple[str, ...] = ()  # empty: every field
    exclude: tuple[str, ...] = ()
    # The cache's fingerprint hash, FINGERPRINT_BLAKE2B or FINGERPRINT_XXH3 (the native parse core
    # reads it too). The default is the hash of an identity that names none; a batch's rules
    # take their cache's (ParseRules.for_batch).
    algorithm: str = FINGERPRINT_BLAKE2B

    def __post_init__(self) -> None:
        if self.algorithm not in FINGERPRINT_HASHES:
            raise ValueError(f"unknown fingerprint hash {self.algorithm!r}; known: {list(FINGERPRINT_HASHES)}")

    def payload(self, event: dict[str, Any]) -> dict[str, Any]:
        if self.fields:
            # A listed field that is absent and one that is null must differ: absent fields
            # are simply left out.
            chosen = {name: event[name] for name in self.fields if name in event}
        else:
            chosen = event
        if self.exclude:
            chosen = {name: value for name, value in chosen.items() if name not in self.exclude}
        return chosen

    def fingerprint(self, event: dict[str, Any]) -> int:
        canonical = orjson.dumps(self.payload(event), option=orjson.OPT_SORT_KEYS)
        return fingerprint_of_canonical(canonical, self.algorithm)


# Either hash is 64 bits: 8 bytes beside the 16-byte key keep cache entries at 24 bytes. BLAKE2b
# hashers are copied from this blank one: ~0.25 us an event less than building each from its
# parameters, and the parameters live here only.
_BLANK_HASHER = hashlib.blake2b(digest_size=FINGERPRINT_BYTES)


def _blake2b_64(canonical_payload: bytes) -> int:
    hasher = _BLANK_HASHER.copy()
    hasher.update(canonical_payload)
    return int.from_bytes(hasher.digest(), "big")


_HASHES: dict[str, Callable[[bytes], int]] = {
    FINGERPRINT_BLAKE2B: _blake2b_64,
    FINGERPRINT_XXH3: xxhash.xxh3_64_intdigest,  # its default seed, 0
}


def fingerprint_of_canonical(canonical_payload: bytes, algorithm: str) -> int:
    """The fingerprint of canonical JSON under the cache's hash (`FingerprintRules.algorithm`)."""
    return _HASHES[algorithm](canonical_payload)


def fingerprint_digests(events: list[dict[str, Any]], rules: FingerprintRules) -> np.ndarray:
    """`rules.fingerprint` of many events as uint64, in one tight loop."""
    payloads = [rules.payload(event) for event in events] if rules.fields or rules.exclude else events
    dumps, sort_keys = orjson.dumps, orjson.OPT_SORT_KEYS
    if rules.algorithm == FINGERPRINT_XXH3:
        xxh3 = xxhash.xxh3_64_intdigest
        return np.fromiter((xxh3(dumps(payload, option=sort_keys)) for payload in payloads), np.uint64,
                           count=len(payloads))
    blank = _BLANK_HASHER
    digests: list[bytes] = []
    append = digests.append
    for payload in payloads:
        hasher = blank.copy()
        hasher.update(dumps(payload, option=sort_keys))
        append(hasher.digest())
    return np.frombuffer(b"".join(digests), f">u{FINGERPRINT_BYTES}").astype(np.uint64)
