"""The binary "seen ids" cache segment of one (date, hour, bucket).

Each batch that adds ids to a cache key writes one new, immutable segment: its own run merged
with the key's newest objects, building on the older ones (the key's chain:
eventdedup.cache.heads). Entries are grouped in runs by the batch that claimed them (the
owner), so a rerun can leave out its own run and any run committed after it.

Layout (all integers big-endian):
    magic "EDCS" | format u8 | digest_bytes u8 | fingerprint_bytes u8 | reserved u8 | runs u32
    per run:  owner_len u16 | owner (ASCII batch id) | entries u32
    per run:  digests (entries x 16 bytes, sorted) | fingerprints (entries x 8 bytes)
    format 2: per run, its blocks of BLOCK_ENTRIES entries: each block's first digest, then
              each block's crc32 (over its digests and fingerprints) |
              footer: index offset u64 | header and run table length u32 | block entries u32 |
              crc32 of header and run table u32 | crc32 of the index u32 | crc32 of the footer's
              fields before it u32 | "EDCX"
    trailer:  crc32 u32 over everything before it
Per key this is 24 bytes plus a few bytes per run (format 2: and 20 bytes per block of 256), and
a truncated or garbled object fails the length or CRC check instead of being read as "no ids
seen". Format 2 can also be read in parts: a batch that probes a few ids of an hour (a late
copy the id guards sent it to) reads the footer, the run table and the blocks that can hold
them, each block checked by its own CRC (eventdedup.cache.segment_parts).
Format 1 (no index, no footer) is still read, whole (docs/formats.md).
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from functools import cached_property
from types import ModuleType

import numpy as np
import numpy.typing as npt

from eventdedup import native_dedup
from eventdedup.errors import CorruptStateError
from eventdedup.keys import DIGEST_DTYPE, FINGERPRINT_BYTES, KEY_DIGEST_BYTES
from eventdedup.sorting import first_word, lex_order

MAGIC = b"EDCS"
FORMAT_VERSION = 2
BLOCK_ENTRIES = 256
INDEX_MAGIC = b"EDCX"
_HEADER = struct.Struct(">4sBBBBI")
# index offset, run table length, block entries, crc32 of the header and run table, of the
# index, of these five fields; magic
FOOTER = struct.Struct(">QIIIII4s")
_RUN_COUNT = struct.Struct(">I")
_OWNER_LEN = struct.Struct(">H")
_CRC = struct.Struct(">I")
FINGERPRINT_DTYPE = np.dtype(">u8")


@dataclass(frozen=True)
class CacheRun:
    """The ids one batch claimed for one cache key: sorted digests and their fingerprints."""

    owner: str
    digests: npt.NDArray[np.bytes_]  # dtype S16, sorted
    fingerprints: npt.NDArray[np.uint64]  # aligned with digests

    @classmethod
    def build(cls, owner: str, digests: npt.NDArray[np.bytes_], fingerprints: npt.NDArray[np.uint64],
              core: ModuleType | None = None) -> CacheRun:
        order = lex_order(digests, core)
        return cls(owner, digests[order], fingerprints[order].astype(np.uint64))

    def __len__(self) -> int:
        return len(self.digests)

    @cached_property
    def first_words(self) -> npt.NDArray[np.uint64]:
        """The digests' first 8 bytes as integers (sorting.first_word), for every search of this run."""
        return first_word(self.digests)


def encode_segment(runs: list[CacheRun], core: ModuleType | None = None) -> bytes:
    """A segment of these runs (the layout above); `core`: by the compiled dedup core."""
    if core is not None:
        return native_dedup.segment_encode(core, [(run.owner, run.digests, run.fingerprints) for run in runs])
    parts = [_HEADER.pack(MAGIC, FORMAT_VERSION, KEY_DIGEST_BYTES, FINGERPRINT_BYTES, 0, len(runs))]
    for run in runs:
        owner = run.owner.encode("ascii")
        parts.append(_OWNER_LEN.pack(len(owner)) + owner + _RUN_COUNT.pack(len(run)))
    table_length = sum(map(len, parts))
    arrays = [(np.ascontiguousarray(run.digests, dtype=DIGEST_DTYPE).tobytes(),
               np.ascontiguousarray(run.fingerprints, dtype=FINGERPRINT_DTYPE).tobytes()) for run in runs]
    for digests, fingerprints in arrays:
        parts += [digests, fingerprints]
    index_offset = sum(map(len, parts))
    table_crc = zlib.crc32(b"".join(parts[:1 + len(runs)]))
    index_start = len(parts)
    for run, (digests, fingerprints) in zip(runs, arrays, strict=True):
        starts = range(0, len(run), BLOCK_ENTRIES)
        parts.append(b"".join(digests[start * KEY_DIGEST_BYTES:(start + 1) * KEY_DIGEST_BYTES] for start in starts))
        parts.append(b"".join(_CRC.pack(block_crc(
            digests[start * KEY_DIGEST_BYTES:(start + BLOCK_ENTRIES) * KEY_DIGEST_BYTES],
            fingerprints[start * FINGERPRINT_BYTES:(start + BLOCK_ENTRIES) * FINGERPRINT_BYTES])) for start in starts))
    index_crc = zlib.crc32(b"".join(parts[index_start:]))
    fields = struct.pack(">QIIII", index_offset, table_length, BLOCK_ENTRIES, table_crc, index_crc)
    parts.append(FOOTER.pack(index_offset, table_length, BLOCK_ENTRIES, table_crc, index_crc, zlib.crc32(fields),
                             INDEX_MAGIC))
    body = b"".join(parts)
    return body + _CRC.pack(zlib.crc32(body))


def block_crc(digests: bytes, fingerprints: bytes) -> int:
    """The check of one block: its digests' bytes, then its fingerprints'."""
    return zlib.crc32(fingerprints, zlib.crc32(digests))


def blocks_of(entries: int) -> int:
    return -(-entries // BLOCK_ENTRIES)


def read_run_table(data: bytes, run_count: int, name: str) -> tuple[list[tuple[str, int]], int]:
    """The run table after the header: (owner, entries) per run, and where the table ends."""
    offset, table = _HEADER.size, []
    try:
        for _ in range(run_count):
            (owner_len,) = _OWNER_LEN.unpack_from(data, offset)
            owner = data[offset + 2: offset + 2 + owner_len].decode("ascii")
            (entries,) = _RUN_COUNT.unpack_from(data, offset + 2 + owner_len)
            table.append((owner, entries))
            offset += 2 + owner_len + _RUN_COUNT.size
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptStateError(f"cache segment {name} has an unreadable run table: {exc}") from None
    return table, offset


def decode_segment(data: bytes, name: str) -> list[CacheRun]:
    """Parse a segment; any damage raises CorruptStateError naming the object."""
    if len(data) < _HEADER.size + _CRC.size:
        raise CorruptStateError(f"cache segment {name} is truncated ({len(data)} bytes)")
    body, (crc,) = data[:-_CRC.size], _CRC.unpack(data[-_CRC.size:])
    if zlib.crc32(body) != crc:
        raise CorruptStateError(f"cache segment {name} fails its checksum: truncated or overwritten")
    magic, version, digest_bytes, fp_bytes, _, run_count = _HEADER.unpack_from(body)
    if magic != MAGIC or version not in (1, FORMAT_VERSION):
        raise CorruptStateError(f"cache segment {name} has magic {magic!r} version {version}; expected EDCS v1 or v2")
    if (digest_bytes, fp_bytes) != (KEY_DIGEST_BYTES, FINGERPRINT_BYTES):
        raise CorruptStateError(f"cache segment {name} uses {digest_bytes}/{fp_bytes}-byte entries")
    headers, offset = read_run_table(body, run_count, name)
    expected = offset + sum(n for _, n in headers) * (KEY_DIGEST_BYTES + FINGERPRINT_BYTES)
    if version == FORMAT_VERSION:  # the index and footer follow the data
        expected += sum(blocks_of(n) for _, n in headers) * (KEY_DIGEST_BYTES + _CRC.size) + FOOTER.size
        if len(body) >= FOOTER.size and FOOTER.unpack_from(body, len(body) - FOOTER.size)[-1] != INDEX_MAGIC:
            raise CorruptStateError(f"cache segment {name} has no index footer")
    if expected != len(body):
        raise CorruptStateError(f"cache segment {name} holds {len(body)} bytes, its run table says {expected}")
    runs = []
    for owner, entries in headers:
        digests = np.frombuffer(body, DIGEST_DTYPE, entries, offset)
        offset += entries * KEY_DIGEST_BYTES
        fps = np.frombuffer(body, FINGERPRINT_DTYPE, entries, offset).astype(np.uint64)
        offset += entries * FINGERPRINT_BYTES
        runs.append(CacheRun(owner, digests, fps))
    return runs
