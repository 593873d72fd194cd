"""The id guard: which hours of a bucket may hold an id, over every hour of the window.

Hour segments find copies of an id within one hour. Copies whose times fall in different hours
(a retry re-stamped by a server, a synthetic duplicate, an old event re-sent) are found through
the guard: per (arrival hour, bucket), one object over every id the batches arriving in that
hour committed to the bucket, each as a hash and the hour whose segment holds it (Amplitude
keeps per-day filters keyed by arrival for the same reason; an hour, not a day, so that a batch
copies forward at most an hour's guard, never a growing day's, and a finished hour's guard is
immutable). A batch loads the guards of its window once per bucket and probes every id it
decides; a hit names hours to load, and the decision is then made exactly against those hours'
segments, so a hash collision costs one segment load and never a drop.

Format 2 ("EDG2"), big-endian, about 3.6 bytes an id at 750k ids:
    magic | format u8 | hash bits u8 (46) | high bits u8 (k) | slot bits u8 | hours u32 |
    entries u32 | main slot u32 | other entries u32 | hours (i64 each, sorted) |
    high parts: unary, entries + 2^k bits (the Elias-Fano upper half) |
    low parts: (hash bits - k) bits each | other flags: one bit each (1: not the main hour) |
    other slots: slot bits each, in entry order | crc32
Entries are sorted by (hash, slot). 46-bit hashes: a probe falsely hits a guard of n ids with
probability n / 2^46 (~1e-8 at 750k), so at 1M events per 5 minutes and a 168-hour window a
bucket's probes hit ~0.1 hours they need not load per batch (32-bit hashes: ~5,000 a batch).
Format 1 ("EDGD", one guard per arrival day, 32-bit hashes) is still read, until such guards
leave the window (docs/formats.md).
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from types import ModuleType

import numpy as np
import numpy.typing as npt

from eventdedup import native_dedup
from eventdedup.errors import CorruptStateError
from eventdedup.keys import DIGEST_DTYPE, splitmix64_finalised

MAGIC_V1, MAGIC = b"EDGD", b"EDG2"
FORMAT_VERSION = 2
HASH_BITS = 46
_HEADER_V1 = struct.Struct(">4sBBxxII")
_HEADER = struct.Struct(">4sBBBBIIII")
_CRC = struct.Struct(">I")
_SEED = np.uint64(0x9E3779B97F4A7C15)
_STEPS_BEFORE_SEARCH = 4
_PACK_ROWS = 1 << 20  # bit packing works in slices of this many values (a multiple of 8: whole bytes)

Hours = npt.NDArray[np.int64]


def guard_hashes(digests: npt.NDArray[np.bytes_]) -> npt.NDArray[np.uint64]:
    """64 bits per key, independent of the bucket: splitmix64 over both halves with another seed.
    A guard keeps the top `hash_bits` of them (format 1: 32)."""
    halves = np.frombuffer(np.ascontiguousarray(digests, DIGEST_DTYPE).tobytes(), ">u8").reshape(-1, 2)
    return splitmix64_finalised((halves[:, 0].astype(np.uint64) ^ _SEED) ^ (
        (halves[:, 1].astype(np.uint64) << np.uint64(29)) | (halves[:, 1].astype(np.uint64) >> np.uint64(35))))


def _top_bits(hashes: npt.NDArray[np.uint64], bits: int) -> npt.NDArray[np.uint64]:
    return hashes >> np.uint64(64 - bits)


@dataclass(frozen=True)
class GuardProbe:
    """Queried ids as a guard probes them: their 64-bit hashes, sorted (sorted probes walk a guard
    once, cache-friendly; a prefix of sorted hashes is sorted, so one sort serves guards of any
    hash width), and each sorted hash's query index."""

    order: npt.NDArray[np.intp]
    sorted_hashes: npt.NDArray[np.uint64]

    @classmethod
    def of(cls, digests: npt.NDArray[np.bytes_]) -> GuardProbe:
        wanted = guard_hashes(digests)
        order = np.argsort(wanted)  # equal hashes in any order: a hit is reported per query
        return cls(order, wanted[order])


@dataclass(frozen=True)
class IdGuard:
    hours: Hours  # sorted, distinct
    hashes: npt.NDArray[np.uint64]  # the top hash_bits of each id's hash; sorted with slots
    slots: npt.NDArray[np.uint32]  # per hash, its hour's index in `hours`
    hash_bits: int = HASH_BITS

    @classmethod
    def empty(cls) -> IdGuard:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.uint64), np.zeros(0, np.uint32))

    def __len__(self) -> int:
        return len(self.hashes)

    def entries(self) -> set[tuple[int, int]]:
        """Every (hash, hour) it holds."""
        return set(zip(self.hashes.tolist(), self.hours[self.slots.astype(np.int64)].tolist(), strict=True))

    def with_ids(self, digests: npt.NDArray[np.bytes_], hours: Hours, core: ModuleType | None = None) -> IdGuard:
        """This guard plus the ids a batch claimed, each in its hour (copy-forward, like a head);
        `core`: by the compiled dedup core."""
        if core is not None:
            merged = native_dedup.guard_with_ids(core, self.hours, self.hashes, self.slots, self.hash_bits, digests,
                                                 hours.astype(np.int64))
            return IdGuard(*merged, self.hash_bits)
        distinct_hours = np.union1d(self.hours, hours.astype(np.int64))
        old_slots = np.searchsorted(distinct_hours, self.hours)[self.slots.astype(np.int64)]
        new_slots = np.searchsorted(distinct_hours, hours.astype(np.int64))
        all_hashes = np.concatenate([self.hashes, _top_bits(guard_hashes(digests), self.hash_bits)])
        all_slots = np.concatenate([old_slots, new_slots]).astype(np.uint32)
        order = np.lexsort((all_slots, all_hashes))
        all_hashes, all_slots = all_hashes[order], all_slots[order]
        keep = np.r_[True, (np.diff(all_hashes) != 0) | (np.diff(all_slots) != 0)] if len(order) else np.zeros(0, bool)
        return IdGuard(distinct_hours.astype(np.int64), all_hashes[keep], all_slots[keep], self.hash_bits)

    def candidate_hours(self, digests: npt.NDArray[np.bytes_] | GuardProbe,
                        core: ModuleType | None = None) -> tuple[npt.NDArray[np.intp], Hours]:
        """(query index, hour) for every hour that may hold a queried id; usually none or one each.
        Ids probed against several guards are hashed and sorted once: pass their GuardProbe.
        `core`: merged by the compiled dedup core."""
        probe = digests if isinstance(digests, GuardProbe) else GuardProbe.of(digests)
        wanted = _top_bits(probe.sorted_hashes, self.hash_bits)
        if core is not None:
            queries, positions = native_dedup.guard_probe(core, self.hashes, wanted, probe.order)
            return queries, self.hours[self.slots[positions].astype(np.int64)]
        low = np.searchsorted(self.hashes, wanted, side="left")
        widths = self._equal_run_lengths(low, wanted)
        query = np.repeat(probe.order, widths)
        starts = np.repeat(np.cumsum(widths) - widths, widths)
        position = np.repeat(low, widths) + (np.arange(len(query)) - starts)
        return query, self.hours[self.slots[position].astype(np.int64)]

    def _equal_run_lengths(self, low: npt.NDArray[np.intp], wanted: npt.NDArray[np.uint64]) -> npt.NDArray[np.intp]:
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


def _pack_bits(values: npt.NDArray[np.uint64], width: int) -> bytes:
    """The low `width` bits of each value, concatenated, big-endian, padded to a byte."""
    if width == 0 or not len(values):
        return b""
    parts = []
    for start in range(0, len(values), _PACK_ROWS):
        rows = np.ascontiguousarray(values[start:start + _PACK_ROWS], ">u8").view(np.uint8).reshape(-1, 8)
        parts.append(np.unpackbits(rows, axis=1)[:, 64 - width:].reshape(-1))
    return np.packbits(np.concatenate(parts)).tobytes()


def _unpack_bits(data: bytes, count: int, width: int) -> npt.NDArray[np.uint64]:
    """Inverse of _pack_bits."""
    if width == 0 or count == 0:
        return np.zeros(count, np.uint64)
    out = np.empty(count, np.uint64)
    stream = np.frombuffer(data, np.uint8)
    for start in range(0, count, _PACK_ROWS):
        rows = min(_PACK_ROWS, count - start)
        first_byte = start * width // 8  # a whole byte: start is a multiple of 8
        bits = np.unpackbits(stream[first_byte:first_byte + (rows * width + 7) // 8], count=rows * width)
        padded = np.zeros((rows, 64), np.uint8)
        padded[:, 64 - width:] = bits.reshape(rows, width)
        out[start:start + rows] = np.packbits(padded, axis=1).view(">u8").reshape(-1)
    return out


def _bit_bytes(bits: int) -> int:
    return (bits + 7) // 8


def encode_guard(guard: IdGuard, core: ModuleType | None = None) -> bytes:
    """Format 2 (the layout above). Only a guard of full-width hashes is written. `core`: by the
    compiled dedup core."""
    if guard.hash_bits != HASH_BITS:
        raise ValueError(f"a guard is written with {HASH_BITS}-bit hashes, not {guard.hash_bits}")
    if core is not None:
        body = native_dedup.guard_encode(core, guard.hours, guard.hashes, guard.slots)
        return body + _CRC.pack(zlib.crc32(body))
    count = len(guard.hashes)
    high_bits = min(HASH_BITS, max(0, count.bit_length() - 1))
    low_bits = HASH_BITS - high_bits
    highs = (guard.hashes >> np.uint64(low_bits)).astype(np.int64)
    unary = np.zeros(count + (1 << high_bits), np.uint8)
    unary[highs + np.arange(count)] = 1
    main = int(np.bincount(guard.slots.astype(np.int64)).argmax()) if count else 0
    other = guard.slots != main
    slot_bits = max(1, (len(guard.hours) - 1).bit_length())
    body = b"".join([
        _HEADER.pack(MAGIC, FORMAT_VERSION, HASH_BITS, high_bits, slot_bits, len(guard.hours), count, main,
                     int(np.count_nonzero(other))),
        guard.hours.astype(">i8").tobytes(),
        np.packbits(unary).tobytes(),
        _pack_bits(guard.hashes & np.uint64((1 << low_bits) - 1), low_bits),
        np.packbits(other).tobytes(),
        _pack_bits(guard.slots[other].astype(np.uint64), slot_bits),
    ])
    return body + _CRC.pack(zlib.crc32(body))


def decode_guard(data: bytes, name: str, core: ModuleType | None = None) -> IdGuard:
    """Parse a guard of either format; damage raises CorruptStateError (read as empty, it would
    hide duplicates). `core`: the bits unpacked by the compiled dedup core (the checks are these)."""
    if len(data) < _HEADER_V1.size + _CRC.size:
        raise CorruptStateError(f"id guard {name} is truncated ({len(data)} bytes)")
    body, (crc,) = data[:-_CRC.size], _CRC.unpack(data[-_CRC.size:])
    if zlib.crc32(body) != crc:
        raise CorruptStateError(f"id guard {name} fails its checksum: truncated or overwritten")
    if body[:4] == MAGIC_V1:
        return _decode_v1(body, name)
    if body[:4] != MAGIC or len(body) < _HEADER.size:
        raise CorruptStateError(f"id guard {name} has magic {body[:4]!r}; expected EDG2 (or EDGD v1)")
    magic, version, hash_bits, high_bits, slot_bits, hour_count, count, main, others = _HEADER.unpack_from(body)
    if version != FORMAT_VERSION or hash_bits != HASH_BITS or high_bits > hash_bits or not 1 <= slot_bits <= 32:
        raise CorruptStateError(f"id guard {name} has format {version}, {hash_bits}-bit hashes, {high_bits} high "
                                f"bits, {slot_bits}-bit slots; expected format {FORMAT_VERSION}, {HASH_BITS} bits")
    low_bits = hash_bits - high_bits
    sizes = [hour_count * 8, _bit_bytes(count + (1 << high_bits)), _bit_bytes(count * low_bits), _bit_bytes(count),
             _bit_bytes(others * slot_bits)]
    if len(body) != _HEADER.size + sum(sizes) or others > count or (count and main >= hour_count):
        raise CorruptStateError(f"id guard {name} holds {len(body)} bytes, its header says otherwise")
    offset = _HEADER.size
    parts = []
    for size in sizes:
        parts.append(body[offset:offset + size])
        offset += size
    hours = np.frombuffer(parts[0], ">i8").astype(np.int64)
    if core is not None:
        hashes, slots, ones_found, flagged = native_dedup.guard_unpack(core, parts[1:], count, high_bits, low_bits,
                                                                       slot_bits, main)
        if ones_found != count:
            raise CorruptStateError(f"id guard {name}: its high parts hold {ones_found} entries, its header {count}")
        if flagged != others:
            raise CorruptStateError(f"id guard {name}: {flagged} entries flagged, header {others}")
    else:
        ones = np.flatnonzero(np.unpackbits(np.frombuffer(parts[1], np.uint8), count=count + (1 << high_bits)))
        if len(ones) != count:
            raise CorruptStateError(f"id guard {name}: its high parts hold {len(ones)} entries, its header {count}")
        highs = (ones - np.arange(count)).astype(np.uint64)
        hashes = (highs << np.uint64(low_bits)) | _unpack_bits(parts[2], count, low_bits)
        flags = np.unpackbits(np.frombuffer(parts[3], np.uint8), count=count).astype(bool)
        if int(np.count_nonzero(flags)) != others:
            raise CorruptStateError(f"id guard {name}: {int(np.count_nonzero(flags))} entries flagged, header {others}")
        slots = np.full(count, main, np.uint32)
        slots[flags] = _unpack_bits(parts[4], others, slot_bits).astype(np.uint32)
    if count and int(slots.max()) >= hour_count:
        raise CorruptStateError(f"id guard {name} names an hour it does not hold")
    if count > 1 and bool((np.diff(hashes.view(np.int64)) < 0).any()):  # 46-bit values: int64 order is uint64 order
        raise CorruptStateError(f"id guard {name}: its hashes are out of order")
    return IdGuard(hours, hashes, slots, hash_bits)


def _decode_v1(body: bytes, name: str) -> IdGuard:
    """Format 1: one guard per arrival day, 32-bit hashes, slots of 2 or 4 bytes."""
    magic, version, slot_bytes, hour_count, entries = _HEADER_V1.unpack_from(body)
    if version != 1 or slot_bytes not in (2, 4):
        raise CorruptStateError(f"id guard {name} has magic {magic!r} version {version} slots {slot_bytes}; "
                                "expected EDGD v1")
    if len(body) != _HEADER_V1.size + hour_count * 8 + entries * (4 + slot_bytes):
        raise CorruptStateError(f"id guard {name} holds {len(body)} bytes, its header says otherwise")
    offset = _HEADER_V1.size
    hours = np.frombuffer(body, ">i8", hour_count, offset).astype(np.int64)
    offset += hour_count * 8
    hashes = np.frombuffer(body, ">u4", entries, offset).astype(np.uint64)
    slots = np.frombuffer(body, f">u{slot_bytes}", entries, offset + entries * 4).astype(np.uint32)
    if entries and int(slots.max()) >= hour_count:
        raise CorruptStateError(f"id guard {name} names an hour it does not hold")
    return IdGuard(hours, hashes, slots, 32)

