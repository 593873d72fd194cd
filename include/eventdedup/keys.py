"""Dedup keys: 16 bytes per normalised key, its bucket, and the (date, hour, bucket) cache key.

A key that is a canonical UUID is stored as its own 16 raw bytes (Tapjoy's compact keys: no
hashing, and the cache holds the real id); any other key as its 16-byte BLAKE2b digest.
blake2b is stable across processes and machines, unlike Python's salted hash(). The bucket is
a mix of all 16 bytes, so UUIDs whose leading bytes are a timestamp (v1, v7) still spread evenly.
"""
from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

import numpy as np
import pyarrow as pa

KEY_DIGEST_BYTES = 16
FINGERPRINT_BYTES = 8
_EPOCH = date(1970, 1, 1)


_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


def key_digest(normalized_id: str) -> bytes:
    """16 bytes per key, fixed width so caches store keys compactly and uniformly.

    Only the canonical lower-case form maps to raw UUID bytes: 'ABC...' and 'abc...' are different
    strings unless `normalize = ["lower"]` says otherwise, so they must not share bytes.
    """
    if len(normalized_id) == 36 and _CANONICAL_UUID.fullmatch(normalized_id):
        return bytes.fromhex(normalized_id.replace("-", ""))
    return hashlib.blake2b(normalized_id.encode("utf-8"), digest_size=KEY_DIGEST_BYTES).digest()


def bucket_of(digest: bytes, buckets: int) -> int:
    return int(bucket_array(np.array([digest], np.dtype(f"S{KEY_DIGEST_BYTES}")), buckets)[0])


def digest_array(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A fixed_size_binary(16) Arrow column as a numpy S16 array, without per-row Python."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if array.null_count:
        raise ValueError("key digests may not be null")
    data = array.buffers()[1]
    start = array.offset * KEY_DIGEST_BYTES
    return np.frombuffer(data, np.dtype(f"S{KEY_DIGEST_BYTES}"), len(array), start)


def bucket_array(digests: np.ndarray, buckets: int) -> np.ndarray:
    """Bucket per key: splitmix64's finaliser over both 8-byte halves, vectorised."""
    halves = np.frombuffer(np.ascontiguousarray(digests).tobytes(), ">u8").reshape(-1, 2).astype(np.uint64)
    mixed = halves[:, 0] ^ ((halves[:, 1] << np.uint64(32)) | (halves[:, 1] >> np.uint64(32)))
    mixed ^= mixed >> np.uint64(30)
    mixed *= _MIX_1
    mixed ^= mixed >> np.uint64(27)
    mixed *= _MIX_2
    mixed ^= mixed >> np.uint64(31)
    return (mixed % np.uint64(buckets)).astype(np.int64)


@dataclass(frozen=True, order=True)
class CacheKey:
    """One cache partition: the UTC date and hour of the event time, and the id's bucket."""

    day: int  # days since 1970-01-01, so keys sort and compare as integers
    hour: int
    bucket: int

    @classmethod
    def for_event(cls, event_time_us: int, bucket: int) -> CacheKey:
        hours = event_time_us // 3_600_000_000
        return cls(hours // 24, hours % 24, bucket)

    @classmethod
    def parse(cls, text: str) -> CacheKey:
        """Inverse of str(): '2026-11-22/05/0017'."""
        day_text, hour_text, bucket_text = text.split("/")
        return cls((date.fromisoformat(day_text) - _EPOCH).days, int(hour_text), int(bucket_text))

    @property
    def date_text(self) -> str:
        return (_EPOCH + timedelta(days=self.day)).isoformat()

    @property
    def hour_text(self) -> str:
        return f"{self.hour:02d}"

    @property
    def hour_start(self) -> datetime:
        return datetime.combine(_EPOCH + timedelta(days=self.day), datetime.min.time(), timezone.utc) + timedelta(
            hours=self.hour
        )

    def as_tuple(self) -> tuple[int, int, int]:
        return (self.day, self.hour, self.bucket)

    def __str__(self) -> str:
        return f"{self.date_text}/{self.hour_text}/{self.bucket:04d}"


def hour_index(moment: datetime) -> int:
    """Hours since the epoch (UTC) of a timezone-aware datetime."""
    return int(moment.timestamp()) // 3600


# Namespace of derived ids: uuid5(NAMESPACE_URL, "https://github.com/eventdedup/synthetic-duplicate").
SYNTHETIC_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/eventdedup/synthetic-duplicate")


def renamed_event_id(original_key: str, payload_fingerprint: int) -> str:
    """The new id of a renamed synthetic duplicate: a UUIDv5 of the original key and the copy's
    fingerprint, so every rerun (and every retransmission of that copy) derives the same id."""
    return str(uuid.uuid5(SYNTHETIC_ID_NAMESPACE, f"{original_key}\n{payload_fingerprint:016x}"))
