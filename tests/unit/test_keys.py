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


def test_vectorised_buckets_agree_with_the_scalar_rule() -> None:
    rng = random.Random(7)
    digests = [rng.randbytes(16) for _ in range(2000)] + [b"\x00" * 16, b"\xff" * 16, b"\x00" * 15 + b"\x01"]
    array = digest_array(pa.array(digests, pa.binary(16)))
    for buckets in (1, 4, 64, 1000):
        assert bucket_array(array, buckets).tolist() == [bucket_of(d, buckets) for d in digests]


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
