"""The time a time-ordered id carries: UUIDv7, UUIDv1 and ULID.

Under `[dedup] partition_time = "id"` an event's cache hour is its id's hour, so every copy of an
id lands in the same cache key whatever its time field says (Grid Dynamics derived ids from the
creation time for exactly this). An id that carries no time has no such hour: its event is
quarantined with the reason `id_time_error` gives, never filed under a guessed hour.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from eventdedup.keys import CANONICAL_UUID_PATTERN, canonical_uuid_bytes, fixed_width_text

# 100-nanosecond intervals between the Gregorian epoch of UUIDv1 (1582-10-15) and 1970-01-01.
_GREGORIAN_OFFSET = 0x01B21DD213814000
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_CROCKFORD_VALUE = {char: value for value, char in enumerate(_CROCKFORD)}
_CROCKFORD_VALUE.update({char.lower(): value for char, value in list(_CROCKFORD_VALUE.items())})
_HEX = frozenset("0123456789abcdefABCDEF")
# Crockford's upper-case letters, as producers write ULIDs; the lower-case spelling is read per row.
_ULID_PATTERN = f"^[{_CROCKFORD}]{{26}}$"
_CROCKFORD_ARRAY = np.zeros(256, np.int64)
_CROCKFORD_ARRAY[np.frombuffer(_CROCKFORD.encode(), np.uint8)] = np.arange(32)
_HYPHENS = (8, 13, 18, 23)
NO_TIME = np.iinfo(np.int64).min  # marks ids whose time could not be read


class NoIdTime(ValueError):
    """The id carries no time; the message is the quarantine reason."""


def id_time_us(text: str) -> int:
    """Microseconds since the epoch encoded in a UUIDv7, UUIDv1 or ULID; NoIdTime otherwise."""
    if len(text) == 36:
        return _uuid_time_us(text)
    if len(text) == 26:
        return _ulid_time_us(text)
    raise NoIdTime(_no_time(text, "neither a UUID (36 characters) nor a ULID (26)"))


def _uuid_time_us(text: str) -> int:
    digits = text.replace("-", "")
    if any(text[i] != "-" for i in _HYPHENS) or len(digits) != 32 or not set(digits) <= _HEX:
        raise NoIdTime(_no_time(text, "not a hyphenated UUID"))
    version, variant = digits[12], digits[16].lower()
    if variant not in "89ab":
        raise NoIdTime(_no_time(text, f"a UUID of variant {variant!r}, not RFC 9562"))
    if version == "7":
        return int(digits[:12], 16) * 1000
    if version == "1":
        ticks = (int(digits[13:16], 16) << 48) | (int(digits[8:12], 16) << 32) | int(digits[:8], 16)
        return (ticks - _GREGORIAN_OFFSET) // 10
    raise NoIdTime(_no_time(text, f"a version {version} UUID, which carries no time (only v1 and v7 do)"))


def _ulid_time_us(text: str) -> int:
    millis = 0
    for char in text[:10]:
        value = _CROCKFORD_VALUE.get(char)
        if value is None:
            raise NoIdTime(_no_time(text, "not a ULID (Crockford base32)"))
        millis = millis * 32 + value
    if not all(char in _CROCKFORD_VALUE for char in text[10:]):
        raise NoIdTime(_no_time(text, "not a ULID (Crockford base32)"))
    if millis >= 1 << 48:
        raise NoIdTime(_no_time(text, "a ULID whose time overflows 48 bits"))
    return millis * 1000


def _no_time(text: str, what: str) -> str:
    shown = text if len(text) <= 64 else text[:61] + "..."
    return f'partition_time = "id": id {shown!r} is {what}, so it carries no time to file it under'


def id_times_us(ids: pa.Array | pa.ChunkedArray) -> tuple[npt.NDArray[np.int64], dict[int, str]]:
    """Times of many ids, and the quarantine reason of each row (by index) whose id has none.

    Canonical (lower-case) UUIDv7 and v1 and ULIDs of Crockford's upper-case letters, the
    spellings producers write, are read natively, as id_time_us reads them (per row it cost
    ~3 us an id); every other id, and every id they do not vouch for, is read by id_time_us."""
    strings = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    times = np.full(len(strings), NO_TIME, np.int64)
    read = np.zeros(len(strings), bool)
    _read_uuids(strings, times, read)
    _read_ulids(strings, times, read)
    errors: dict[int, str] = {}
    for row in np.flatnonzero(~read).tolist():
        try:
            times[row] = id_time_us(strings[row].as_py())
        except NoIdTime as exc:
            errors[row] = str(exc)
    return times, errors


def _read_uuids(strings: pa.Array, times: npt.NDArray[np.int64], read: npt.NDArray[np.bool_]) -> None:
    """Canonical UUIDs of version 7 or 1 and RFC 9562's variant (10xx): the time their bytes hold."""
    rows = np.flatnonzero(pc.fill_null(pc.match_substring_regex(strings, CANONICAL_UUID_PATTERN), False)
                          .to_numpy(zero_copy_only=False))
    raw = canonical_uuid_bytes(strings.take(pa.array(rows, pa.int64()))).astype(np.int64)
    rfc = (raw[:, 8] & 0xC0) == 0x80
    version = raw[:, 6] >> 4
    v7, v1 = rfc & (version == 7), rfc & (version == 1)
    millis = np.zeros(len(rows), np.int64)
    for byte in range(6):  # 48-bit big-endian milliseconds
        millis = millis << 8 | raw[:, byte]
    ticks = ((raw[:, 6] & 15) << 56 | raw[:, 7] << 48 | raw[:, 4] << 40 | raw[:, 5] << 32
             | raw[:, 0] << 24 | raw[:, 1] << 16 | raw[:, 2] << 8 | raw[:, 3])  # 60-bit, 100 ns since 1582
    times[rows[v7]] = millis[v7] * 1000
    times[rows[v1]] = (ticks[v1] - _GREGORIAN_OFFSET) // 10
    read[rows[v7 | v1]] = True


def _read_ulids(strings: pa.Array, times: npt.NDArray[np.int64], read: npt.NDArray[np.bool_]) -> None:
    """ULIDs of Crockford's upper-case letters whose time fits 48 bits: their first 10 letters."""
    rows = np.flatnonzero(pc.fill_null(pc.match_substring_regex(strings, _ULID_PATTERN), False)
                          .to_numpy(zero_copy_only=False))
    if not len(rows):
        return
    text = fixed_width_text(strings.take(pa.array(rows, pa.int64())), 26)
    millis = np.zeros(len(rows), np.int64)
    for column in range(10):  # 50 bits at most: no overflow in int64
        millis = millis * 32 + _CROCKFORD_ARRAY[text[:, column]]
    fits = millis < 1 << 48
    times[rows[fits]] = millis[fits] * 1000
    read[rows[fits]] = True
