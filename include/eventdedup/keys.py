"""Dedup keys: 16 bytes per normalised key, its bucket, and the (date, hour, bucket) cache key.

A key that is a canonical UUID is stored as its own 16 raw bytes (Tapjoy's compact keys: no
hashing, and the cache holds the real id); any other key as its 16-byte BLAKE2b digest.
blake2b is stable across processes and machines, unlike Python's salted hash(). The bucket is
a mix of all 16 bytes, so UUIDs whose leading bytes are a timestamp (v1, v7) still spread evenly.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

import numpy as np
import numpy.typing as npt
import pyarrow as pa

KEY_DIGEST_BYTES = 16
FINGERPRINT_BYTES = 8
DIGEST_DTYPE = np.dtype(f"S{KEY_DIGEST_BYTES}")
_EPOCH = date(1970, 1, 1)
MICROS_PER_HOUR = 3_600_000_000

# The one spelling of an id that is stored as its own 16 bytes: lower-case, hyphenated. The
# vectorised parser matches the same pattern over Arrow strings.
CANONICAL_UUID_PATTERN = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
_CANONICAL_UUID = re.compile(CANONICAL_UUID_PATTERN)
# The hash of a key that is not a canonical UUID (16-byte BLAKE2b); hashers are copied from this
# blank one, cheaper than building each from its parameters.
_BLANK_KEY_HASHER = hashlib.blake2b(digest_size=KEY_DIGEST_BYTES)
_HEX_VALUE = np.full(256, 255, np.uint8)
_HEX_VALUE[np.frombuffer(b"0123456789abcdef", np.uint8)] = np.arange(16, dtype=np.uint8)
_UUID_HEX_COLUMNS = np.array([i for i in range(36) if i not in (8, 13, 18, 23)])
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


def key_digest(normalized_id: str) -> bytes:
    """16 bytes per key, fixed width so caches store keys compactly and uniformly.

    Only the canonical lower-case form maps to raw UUID bytes: 'ABC...' and 'abc...' are different
    strings unless `normalize = ["lower"]` says otherwise, so they must not share bytes.
    """
    if len(normalized_id) == 36 and _CANONICAL_UUID.fullmatch(normalized_id):
        return bytes.fromhex(normalized_id.replace("-", ""))
    hasher = _BLANK_KEY_HASHER.copy()
    hasher.update(normalized_id.encode("utf-8"))
    return hasher.digest()


def hashed_key_digests(utf8_keys: Iterable[bytes]) -> np.ndarray:
    """key_digest of many keys that are not canonical UUIDs, given as UTF-8, as an S16 array: the
    same hash in one tight loop (the batch parser's path)."""
    blank = _BLANK_KEY_HASHER
    digests: list[bytes] = []
    append = digests.append
    for utf8 in utf8_keys:
        hasher = blank.copy()
        hasher.update(utf8)
        append(hasher.digest())
    return np.frombuffer(b"".join(digests), DIGEST_DTYPE, len(digests))


def canonical_uuid_bytes(strings: pa.Array) -> npt.NDArray[np.uint8]:
    """The 16 raw bytes of each canonical UUID string (36 ASCII bytes matching
    CANONICAL_UUID_PATTERN, which the caller has checked), as an (n, 16) matrix, without per-row
    Python."""
    nibbles = _HEX_VALUE[fixed_width_text(strings, 36)[:, _UUID_HEX_COLUMNS]]
    return np.ascontiguousarray((nibbles[:, 0::2] << 4) | nibbles[:, 1::2])


def fixed_width_text(strings: pa.Array, width: int) -> npt.NDArray[np.uint8]:
    """The bytes of strings that are each `width` bytes long (the caller has checked), as an
    (n, width) matrix read from the Arrow buffers, without per-row Python."""
    count = len(strings)
    if count == 0:
        return np.zeros((0, width), np.uint8)
    offsets = np.frombuffer(strings.buffers()[1], np.int32, count + 1, strings.offset * 4)
    return np.frombuffer(strings.buffers()[2], np.uint8, offsets[-1] - offsets[0], offsets[0]).reshape(count, width)


def bucket_of(digest: bytes, buckets: int) -> int:
    return int(bucket_array(np.array([digest], DIGEST_DTYPE), buckets)[0])


def digest_array(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A fixed_size_binary(16) Arrow column as a numpy S16 array, without per-row Python."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if array.null_count:
        raise ValueError("key digests may not be null")
    data = array.buffers()[1]
    start = array.offset * KEY_DIGEST_BYTES
    return np.frombuffer(data, DIGEST_DTYPE, len(array), start)


def bucket_array(digests: np.ndarray, buckets: int) -> np.ndarray:
    """Bucket per key: splitmix64's finaliser over both 8-byte halves, vectorised."""
    return (bucket_hash(digests) % np.uint64(buckets)).astype(np.int64)


def bucket_hash(digests: np.ndarray) -> npt.NDArray[np.uint64]:
    """The 64-bit mix a key's bucket is taken from (modulo the bucket count): a key's bucket under
    a count is its bucket under any divisor of that count, modulo the divisor (resharding)."""
    halves = np.frombuffer(np.ascontiguousarray(digests).tobytes(), ">u8").reshape(-1, 2).astype(np.uint64)
    return splitmix64_finalised(halves[:, 0] ^ ((halves[:, 1] << np.uint64(32)) | (halves[:, 1] >> np.uint64(32))))


def splitmix64_finalised(mixed: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """splitmix64's finaliser (Steele, Lea and Flood), in place: every 64-bit hash of keys here
    (buckets, id guards) ends with it, each seeding and folding the key's two halves its own way."""
    mixed ^= mixed >> np.uint64(30)
    mixed *= _MIX_1
    mixed ^= mixed >> np.uint64(27)
    mixed *= _MIX_2
    mixed ^= mixed >> np.uint64(31)
    return mixed


@dataclass(frozen=True, order=True)
class CacheKey:
    """One cache partition: the UTC date and hour of the event time, and the id's bucket.

    All hour arithmetic of the cache lives here: an hour index counts hours since the epoch, and
    a key's shuffle code (hour index x buckets + bucket) orders keys by hour, then bucket."""

    day: int  # days since 1970-01-01, so keys sort and compare as integers
    hour: int
    bucket: int

    @classmethod
    def of_hour(cls, hour_index: int, bucket: int) -> CacheKey:
        return cls(hour_index // 24, hour_index % 24, bucket)

    @classmethod
    def for_event(cls, event_time_us: int, bucket: int) -> CacheKey:
        return cls.of_hour(event_time_us // MICROS_PER_HOUR, bucket)

    @classmethod
    def of_code(cls, code: int, buckets: int) -> CacheKey:
        """Inverse of `code`."""
        hour, bucket = divmod(code, buckets)
        return cls.of_hour(hour, bucket)

    @classmethod
    def parse(cls, text: str) -> CacheKey:
        """Inverse of str(): '2026-11-22/05/0017'."""
        day_text, hour_text, bucket_text = text.split("/")
        return cls((date.fromisoformat(day_text) - _EPOCH).days, int(hour_text), int(bucket_text))

    @property
    def hour_index(self) -> int:
        return self.day * 24 + self.hour

    def code(self, buckets: int) -> int:
        return self.hour_index * buckets + self.bucket

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

    def __str__(self) -> str:
        return f"{self.date_text}/{self.hour_text}/{self.bucket:04d}"


# The state names an id guard (eventdedup.cache.guard) beside the hour segments' "YYYY-MM-DD/HH/BBBB".
GUARD_HEAD_PREFIX = "guard/"


def guard_head_key(hour: int, bucket: int) -> str:
    """The state's name of the id guard of one arrival hour (hours since the epoch) and bucket:
    'guard/2026-11-22/05/0017'."""
    return f"{GUARD_HEAD_PREFIX}{CacheKey.of_hour(hour, bucket)}"


def day_guard_head_key(day: int, bucket: int) -> str:
    """The state's name of a format-1 id guard, one per arrival day (days since the epoch) and
    bucket: 'guard/2026-11-22/0017'. Still read (docs/formats.md)."""
    return f"{GUARD_HEAD_PREFIX}{CacheKey(day, 0, bucket).date_text}/{bucket:04d}"


def is_guard_head_key(key: str) -> bool:
    return key.startswith(GUARD_HEAD_PREFIX)


def is_day_guard_head_key(key: str) -> bool:
    """A format-1 guard's name (day_guard_head_key), not an hour guard's."""
    return is_guard_head_key(key) and key.count("/") == 2


def hour_index_at(moment: datetime) -> int:
    """Hours since the epoch (UTC) of a timezone-aware datetime."""
    return int(moment.timestamp()) // 3600


def hour_text(hour_index: int | None) -> str:
    """An hour index as people read it in a message: '2026-11-26T07:00Z' ('(none)' for None)."""
    if hour_index is None:
        return "(none)"
    return CacheKey.of_hour(hour_index, 0).hour_start.strftime("%Y-%m-%dT%H:00Z")


def hour_codes(event_time_us: npt.NDArray[np.int64], buckets_of_rows: npt.NDArray[np.int64],
               buckets: int) -> npt.NDArray[np.int64]:
    """`CacheKey.code` of many events at once."""
    return (event_time_us // MICROS_PER_HOUR) * buckets + buckets_of_rows
