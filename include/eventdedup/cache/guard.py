"""The window-wide id guard: which hours of a bucket may hold an id, over every hour of the window.

Hour segments find copies of an id within one hour. Copies whose times fall in different hours
(a retry re-stamped by a server, a synthetic duplicate, an old event re-sent) are found through
the guard: per (arrival day, bucket), one object over every id the batches arriving that day
committed to the bucket, each as a 32-bit hash and the hour whose segment holds it (Amplitude
keeps per-day filters keyed by arrival for the same reason). A batch loads the guards of its
window once per bucket and probes every id it decides; a hit names hours to load, and the
decision is then made exactly against those hours' segments, so a hash collision costs one
segment load and never a drop.

Layout (big-endian): magic "EDGD" | format u8 | slot bytes u8 (2, or 4 past 65,535 hours) |
2 reserved | hours u32 | entries u32 | hours (i64 each, sorted) | hashes (u32 each, sorted) |
hour slots (into hours) | crc32. Six bytes an id: the hour slot is what lets a hit load one
segment instead of the whole day's.
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from eventdedup.errors import CorruptStateError
from eventdedup.keys import DIGEST_DTYPE
from eventdedup.sorting import distinct_sorted

MAGIC = b"EDGD"
FORMAT_VERSION = 1
_HEADER = struct.Struct(">4sBBxxII")
_CRC = struct.Struct(">I")
_SEED = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
# In memory, an entry is one int64: hash << 31 | hour slot (a slot is below 2^31: accepted event
# times span far fewer hours), so sorting and merging entries is numpy over a flat array.
_SLOT_BITS = 31
_SLOT_MASK = (1 << _SLOT_BITS) - 1
_STEPS_BEFORE_SEARCH = 4

Hours = npt.NDArray[np.int64]


def guard_hashes(digests: npt.NDArray[np.bytes_]) -> npt.NDArray[np.uint32]:
    """32 bits per key, independent of the bucket: splitmix64 over both halves with another seed."""
    halves = np.frombuffer(np.ascontiguousarray(digests, DIGEST_DTYPE).tobytes(), ">u8").reshape(-1, 2)
    mixed = (halves[:, 0].astype(np.uint64) ^ _SEED) ^ (
        (halves[:, 1].astype(np.uint64) << np.uint64(29)) | (halves[:, 1].astype(np.uint64) >> np.uint64(35)))
    mixed ^= mixed >> np.uint64(30)
    mixed *= _MIX_1
    mixed ^= mixed >> np.uint64(27)
    mixed *= _MIX_2
    mixed ^= mixed >> np.uint64(31)
    return (mixed >> np.uint64(32)).astype(np.uint32)


@dataclass(frozen=True)
class GuardProbe:
    """Queried ids as a guard probes them: their hashes, sorted (sorted probes walk a guard once,
    cache-friendly), and each sorted hash's query index."""

    order: npt.NDArray[np.intp]
    sorted_hashes: npt.NDArray[np.uint32]

    @classmethod
    def of(cls, digests: npt.NDArray[np.bytes_]) -> GuardProbe:
        wanted = guard_hashes(digests)
        order = np.argsort(wanted)  # equal hashes in any order: a hit is reported per query
        return cls(order, wanted[order])


@dataclass(frozen=True)
class IdGuard:
    hours: Hours  # sorted, distinct
    hashes: npt.NDArray[np.uint32]  # sorted
    slots: npt.NDArray[np.uint32]  # per hash, its hour's index in `hours`

    @classmethod
    def empty(cls) -> IdGuard:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.uint32), np.zeros(0, np.uint32))

    def __len__(self) -> int:
        return len(self.hashes)

    def with_ids(self, digests: npt.NDArray[np.bytes_], hours: Hours) -> IdGuard:
        """This guard plus the ids a batch claimed, each in its hour (copy-forward, like a head).

        A merge, not a re-sort: the guard's entries are already sorted, so adding a batch costs
        a pass over the day's guard plus a sort of the batch's own ids."""
        distinct_hours = np.union1d(self.hours, hours.astype(np.int64))
        # Renumbering the slots keeps the order: hours are sorted, so slots map monotonically.
        old_slots = np.searchsorted(distinct_hours, self.hours)[self.slots.astype(np.int64)]
        old = (self.hashes.astype(np.int64) << _SLOT_BITS) | old_slots
        added = distinct_sorted((guard_hashes(digests).astype(np.int64) << _SLOT_BITS)
                                | np.searchsorted(distinct_hours, hours.astype(np.int64)))
        position = np.searchsorted(old, added)
        present = position < len(old)
        present[present] = old[position[present]] == added[present]
        packed = np.insert(old, position[~present], added[~present])
        return IdGuard(distinct_hours.astype(np.int64), (packed >> _SLOT_BITS).astype(np.uint32),
                       (packed & _SLOT_MASK).astype(np.uint32))

    def candidate_hours(self, digests: npt.NDArray[np.bytes_] | GuardProbe) -> tuple[npt.NDArray[np.intp], Hours]:
        """(query index, hour) for every hour that may hold a queried id; usually none or one each.
        Ids probed against several guards are hashed and sorted once: pass their GuardProbe."""
        probe = digests if isinstance(digests, GuardProbe) else GuardProbe.of(digests)
        low = np.searchsorted(self.hashes, probe.sorted_hashes, side="left")
        widths = self._equal_run_lengths(low, probe.sorted_hashes)
        query = np.repeat(probe.order, widths)
        starts = np.repeat(np.cumsum(widths) - widths, widths)
        position = np.repeat(low, widths) + (np.arange(len(query)) - starts)
        return query, self.hours[self.slots[position].astype(np.int64)]


    def _equal_run_lengths(self, low: npt.NDArray[np.intp], wanted: npt.NDArray[np.uint32]) -> npt.NDArray[np.intp]:
        """How many entries from each `low` on hold the wanted hash: a second binary search
        (side="right") costs as much as the first, and a probe almost always matches 0 or 1. A
        hash still matching after a few steps (one id in many hours) takes the binary search."""
        widths = np.zeros(len(low), np.intp)
        open_rows = np.arange(len(low))
        for _ in range(_STEPS_BEFORE_SEARCH):
            if not len(open_rows):
                break
            at = low[open_rows] + widths[open_rows]
            inside = at < len(self.hashes)
            open_rows, at = open_rows[inside], at[inside]
            open_rows = open_rows[self.hashes[at] == wanted[open_rows]]
            widths[open_rows] += 1
        if len(open_rows):
            high = np.searchsorted(self.hashes, wanted[open_rows], side="right")
            widths[open_rows] = high - low[open_rows]
        return widths


def encode_guard(guard: IdGuard) -> bytes:
    # Two bytes a slot while the day's ids fall in at most 65,535 distinct hours (always, but for
    # a backfill of years arriving in one day), four beyond.
    slot_bytes = 2 if len(guard.hours) <= 1 << 16 else 4
    body = b"".join([
        _HEADER.pack(MAGIC, FORMAT_VERSION, slot_bytes, len(guard.hours), len(guard.hashes)),
        guard.hours.astype(">i8").tobytes(), guard.hashes.astype(">u4").tobytes(),
        guard.slots.astype(f">u{slot_bytes}").tobytes(),
    ])
    return body + _CRC.pack(zlib.crc32(body))


def decode_guard(data: bytes, name: str) -> IdGuard:
    """Parse a guard; damage raises CorruptStateError (read as empty, it would hide duplicates)."""
    if len(data) < _HEADER.size + _CRC.size:
        raise CorruptStateError(f"id guard {name} is truncated ({len(data)} bytes)")
    body, (crc,) = data[:-_CRC.size], _CRC.unpack(data[-_CRC.size:])
    if zlib.crc32(body) != crc:
        raise CorruptStateError(f"id guard {name} fails its checksum: truncated or overwritten")
    magic, version, slot_bytes, hour_count, entries = _HEADER.unpack_from(body)
    if magic != MAGIC or version != FORMAT_VERSION or slot_bytes not in (2, 4):
        raise CorruptStateError(f"id guard {name} has magic {magic!r} version {version} slots {slot_bytes}; "
                                "expected EDGD v1")
    if len(body) != _HEADER.size + hour_count * 8 + entries * (4 + slot_bytes):
        raise CorruptStateError(f"id guard {name} holds {len(body)} bytes, its header says otherwise")
    offset = _HEADER.size
    hours = np.frombuffer(body, ">i8", hour_count, offset).astype(np.int64)
    offset += hour_count * 8
    hashes = np.frombuffer(body, ">u4", entries, offset).astype(np.uint32)
    slots = np.frombuffer(body, f">u{slot_bytes}", entries, offset + entries * 4).astype(np.uint32)
    if entries and int(slots.max()) >= hour_count:
        raise CorruptStateError(f"id guard {name} names an hour it does not hold")
    return IdGuard(hours, hashes, slots)
