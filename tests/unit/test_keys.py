from __future__ import annotations

import hashlib
import random
from datetime import datetime, timezone

import numpy as np
import pyarrow as pa

from eventdedup.keys import CacheKey, bucket_array, bucket_of, digest_array, key_digest


def test_key_digest_is_blake2b_128_of_utf8_id_and_stable_across_processes() -> None:
    # Literal computed once from the spec (BLAKE2b, 16-byte digest): the same in every process,
    # unlike hash(), so bucket numbers and cache contents never change between runs.
    assert key_digest("abc").hex() == "cf4ab791c62b8d2b2109c90275287816"
    assert key_digest("Zürich") == hashlib.blake2b("Zürich".encode(), digest_size=16).digest()


def splitmix_bucket(key: bytes, buckets: int) -> int:
    """The bucket rule written out in plain integers (splitmix64's finaliser), independent of numpy."""
    mask = (1 << 64) - 1
    high, low = int.from_bytes(key[:8], "big"), int.from_bytes(key[8:], "big")
    x = high ^ (((low << 32) | (low >> 32)) & mask)
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & mask
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & mask
    x ^= x >> 31
    return x % buckets


def test_vectorised_buckets_follow_the_written_out_rule() -> None:
    rng = random.Random(7)
    digests = [rng.randbytes(16) for _ in range(2000)] + [b"\x00" * 16, b"\xff" * 16, b"\x00" * 15 + b"\x01"]
    array = digest_array(pa.array(digests, pa.binary(16)))
    for buckets in (1, 4, 64, 1000):
        assert bucket_array(array, buckets).tolist() == [splitmix_bucket(d, buckets) for d in digests]
        assert bucket_of(digests[0], buckets) == splitmix_bucket(digests[0], buckets)


def test_time_ordered_uuids_spread_evenly_over_buckets() -> None:
    # UUIDv1/v7 start with a timestamp: a bucket taken from the leading bytes would pile up.
    import uuid

    keys = [key_digest(str(uuid.UUID(int=(1_700_000_000_000 + i) << 80 | 0x7000 << 64 | i))) for i in range(6400)]
    counts = [0] * 64
    for key in keys:
        counts[bucket_of(key, 64)] += 1
    assert min(counts) > 60 and max(counts) < 140


def test_digest_array_keeps_trailing_zero_bytes_and_respects_slices() -> None:
    digests = [b"\x01" * 16, b"a" + b"\x00" * 15, b"\x02" * 16]
    array = digest_array(pa.array(digests, pa.binary(16)).slice(1))
    assert array.tobytes() == digests[1] + digests[2]
    assert len(np.unique(array)) == 2


def test_cache_key_text_round_trip_and_event_placement() -> None:
    time_us = int(datetime(2026, 11, 22, 5, 59, 59, tzinfo=timezone.utc).timestamp()) * 1_000_000
    key = CacheKey.for_event(time_us, 17)
    assert str(key) == "2026-11-22/05/0017"
    assert CacheKey.parse(str(key)) == key
    assert key.hour_start.isoformat() == "2026-11-22T05:00:00+00:00"
