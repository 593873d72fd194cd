"""Dedup keys: a 128-bit digest of the normalised id, its bucket, and the (date, hour, bucket) cache key.

blake2b is stable across processes and machines, unlike Python's salted hash(); the bucket is
taken from the digest so one hash serves both.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

import numpy as np
import pyarrow as pa

KEY_DIGEST_BYTES = 16
FINGERPRINT_BYTES = 8
_EPOCH = date(1970, 1, 1)


def key_digest(normalized_id: str) -> bytes:
    """16-byte digest of an event id: fixed width, so caches store ids compactly and uniformly."""
    return hashlib.blake2b(normalized_id.encode("utf-8"), digest_size=KEY_DIGEST_BYTES).digest()


def fingerprint(canonical_payload: bytes) -> int:
    """64-bit digest of an event's canonical payload, to tell natural from synthetic duplicates."""
    return int.from_bytes(hashlib.blake2b(canonical_payload, digest_size=FINGERPRINT_BYTES).digest(), "big")


def bucket_of(digest: bytes, buckets: int) -> int:
    return int.from_bytes(digest[:8], "big") % buckets


def digest_array(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A fixed_size_binary(16) Arrow column as a numpy S16 array, without per-row Python."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if array.null_count:
        raise ValueError("key digests may not be null")
    data = array.buffers()[1]
    start = array.offset * KEY_DIGEST_BYTES
    return np.frombuffer(data, np.dtype(f"S{KEY_DIGEST_BYTES}"), len(array), start)


def bucket_array(digests: np.ndarray, buckets: int) -> np.ndarray:
    """Vectorised bucket_of over an S16 digest array."""
    high = np.frombuffer(digests.tobytes(), np.uint8).reshape(-1, KEY_DIGEST_BYTES)[:, :8]
    values = np.ascontiguousarray(high).view(">u8").reshape(-1).astype(np.uint64)
    return (values % np.uint64(buckets)).astype(np.int64)


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
