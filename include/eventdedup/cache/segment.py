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
    format 3, an ordered store's (its identity records an ordering field: eventdedup.cache.identity),
              as format 2 but: each run table entry ends with its order bytes u32; after a
              run's fingerprints, each entry's order key length u8 (0: none), then the order keys;
              each block's crc32 covers its digests, fingerprints, lengths and order keys, and the
              index adds, after the crcs, each block's first order byte (u32, in the run's keys)
Per key this is 24 bytes plus a few bytes per run (format 2: and 20 bytes per block of 256;
format 3: the order key and its length byte, and 24 bytes per block), and
a truncated or garbled object fails the length or CRC check instead of being read as "no ids
seen". Format 2 can also be read in parts: a batch that probes a few ids of an hour (a late
copy the id guards sent it to) reads the footer, the run table and the blocks that can hold
them, each block checked by its own CRC (eventdedup.cache.segment_parts).
Format 1 (no index, no footer) is still read, whole (docs/formats.md). An order key is the
ordering field's value as eventdedup.parse.order_keys encodes it (at most ORDER_KEY_BYTES: longer
strings compare by their first bytes), so that a later batch finds each key's current version's.
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from functools import cached_property
from types import ModuleType

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from eventdedup import native_dedup
from eventdedup.errors import CorruptStateError
from eventdedup.keys import DIGEST_DTYPE, FINGERPRINT_BYTES, KEY_DIGEST_BYTES
from eventdedup.sorting import first_word, lex_order

MAGIC = b"EDCS"
FORMAT_VERSION = 2
ORDERED_FORMAT = 3  # format 2 with each entry's order key (an ordered store's segments)
ORDER_KEY_BYTES = 255  # the longest order key a segment keeps (a length byte; 0: none)
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
    """The ids one batch claimed for one cache key: sorted digests and their fingerprints, and in
    an ordered store each entry's order key (null where the event had no ordering value)."""

    owner: str
    digests: npt.NDArray[np.bytes_]  # dtype S16, sorted
    fingerprints: npt.NDArray[np.uint64]  # aligned with digests
    order_keys: pa.BinaryArray | None = None  # aligned with digests; None: the store keeps none

    @classmethod
    def build(cls, owner: str, digests: npt.NDArray[np.bytes_], fingerprints: npt.NDArray[np.uint64],
              core: ModuleType | None = None, order_keys: pa.BinaryArray | None = None) -> CacheRun:
        order = lex_order(digests, core)
        keys = None if order_keys is None else order_keys.take(pa.array(order, pa.int64()))
        return cls(owner, digests[order], fingerprints[order].astype(np.uint64), keys)

    def __len__(self) -> int:
        return len(self.digests)

    @cached_property
    def first_words(self) -> npt.NDArray[np.uint64]:
        """The digests' first 8 bytes as integers (sorting.first_word), for every search of this run."""
        return first_word(self.digests)


def encode_segment(runs: list[CacheRun], core: ModuleType | None = None) -> bytes:
    """A segment of these runs (the layout above): format 3 where a run carries order keys (an
    ordered store's), else format 2; `core`: format 2 by the compiled dedup core."""
    if any(run.order_keys is not None for run in runs):
        return _encode_ordered(runs)
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


def block_crc(digests: bytes, fingerprints: bytes, lengths: bytes = b"", keys: bytes = b"") -> int:
    """The check of one block: its digests' bytes, then its fingerprints' (format 3: then its
    order keys' lengths and bytes)."""
    return zlib.crc32(keys, zlib.crc32(lengths, zlib.crc32(fingerprints, zlib.crc32(digests))))


def order_key_parts(run: CacheRun) -> tuple[npt.NDArray[np.uint8], bytes, npt.NDArray[np.int64]]:
    """A run's order keys as a segment holds them: a length byte each (0: none), the keys'
    bytes, and where each entry's key starts in them (one more: the end)."""
    keys = run.order_keys if run.order_keys is not None else pa.nulls(len(run), pa.binary())
    filled = pc.fill_null(stored_order_keys(keys), b"")
    _, offsets_buffer, data_buffer = filled.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int32, len(filled) + 1, filled.offset * 4).astype(np.int64)
    lengths = np.diff(offsets)
    data = b"" if data_buffer is None else data_buffer.to_pybytes()[int(offsets[0]):int(offsets[-1])]
    return lengths.astype(np.uint8), data, offsets - offsets[0]


def _encode_ordered(runs: list[CacheRun]) -> bytes:
    """Format 3: format 2 with each entry's order key (the layout above)."""
    parts_of = [order_key_parts(run) for run in runs]
    head = [_HEADER.pack(MAGIC, ORDERED_FORMAT, KEY_DIGEST_BYTES, FINGERPRINT_BYTES, 0, len(runs))]
    for run, (_, data, _) in zip(runs, parts_of, strict=True):
        owner = run.owner.encode("ascii")
        head.append(_OWNER_LEN.pack(len(owner)) + owner + _RUN_COUNT.pack(len(run)) + _RUN_COUNT.pack(len(data)))
    table = b"".join(head)
    arrays = [(np.ascontiguousarray(run.digests, dtype=DIGEST_DTYPE).tobytes(),
               np.ascontiguousarray(run.fingerprints, dtype=FINGERPRINT_DTYPE).tobytes()) for run in runs]
    body = [table]
    for (digests, fingerprints), (lengths, data, _) in zip(arrays, parts_of, strict=True):
        body += [digests, fingerprints, lengths.tobytes(), data]
    index_offset = sum(map(len, body))
    index = []
    for run, (digests, fingerprints), (lengths, data, starts) in zip(runs, arrays, parts_of, strict=True):
        blocks = range(0, len(run), BLOCK_ENTRIES)
        index.append(b"".join(digests[start * KEY_DIGEST_BYTES:(start + 1) * KEY_DIGEST_BYTES] for start in blocks))
        index.append(b"".join(_CRC.pack(block_crc(
            digests[start * KEY_DIGEST_BYTES:(start + BLOCK_ENTRIES) * KEY_DIGEST_BYTES],
            fingerprints[start * FINGERPRINT_BYTES:(start + BLOCK_ENTRIES) * FINGERPRINT_BYTES],
            lengths[start:start + BLOCK_ENTRIES].tobytes(),
            data[int(starts[start]):int(starts[min(start + BLOCK_ENTRIES, len(run))])])) for start in blocks))
        index.append(b"".join(_RUN_COUNT.pack(int(starts[start])) for start in blocks))
    index_bytes = b"".join(index)
    fields = struct.pack(">QIIII", index_offset, len(table), BLOCK_ENTRIES, zlib.crc32(table), zlib.crc32(index_bytes))
    footer = FOOTER.pack(index_offset, len(table), BLOCK_ENTRIES, zlib.crc32(table), zlib.crc32(index_bytes),
                         zlib.crc32(fields), INDEX_MAGIC)
    whole = b"".join([*body, index_bytes, footer])
    return whole + _CRC.pack(zlib.crc32(whole))


def blocks_of(entries: int) -> int:
    return -(-entries // BLOCK_ENTRIES)


def read_run_table(data: bytes, run_count: int, name: str,
                   ordered: bool = False) -> tuple[list[tuple[str, int, int]], int]:
    """The run table after the header: (owner, entries, order bytes) per run, and where the table
    ends; the order bytes are 0 but in format 3 (`ordered`), whose run table holds them."""
    offset, table = _HEADER.size, []
    try:
        for _ in range(run_count):
            (owner_len,) = _OWNER_LEN.unpack_from(data, offset)
            owner = data[offset + 2: offset + 2 + owner_len].decode("ascii")
            (entries,) = _RUN_COUNT.unpack_from(data, offset + 2 + owner_len)
            offset += 2 + owner_len + _RUN_COUNT.size
            order_bytes = 0
            if ordered:
                (order_bytes,) = _RUN_COUNT.unpack_from(data, offset)
                offset += _RUN_COUNT.size
            table.append((owner, entries, order_bytes))
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
    if magic != MAGIC or version not in (1, FORMAT_VERSION, ORDERED_FORMAT):
        raise CorruptStateError(f"cache segment {name} has magic {magic!r} version {version}; "
                                "expected EDCS v1, v2 or v3")
    if (digest_bytes, fp_bytes) != (KEY_DIGEST_BYTES, FINGERPRINT_BYTES):
        raise CorruptStateError(f"cache segment {name} uses {digest_bytes}/{fp_bytes}-byte entries")
    ordered = version == ORDERED_FORMAT
    headers, offset = read_run_table(body, run_count, name, ordered)
    entry_bytes = KEY_DIGEST_BYTES + FINGERPRINT_BYTES + (1 if ordered else 0)
    expected = offset + sum(entries * entry_bytes + order_bytes for _, entries, order_bytes in headers)
    if version != 1:  # the index and footer follow the data
        block_bytes = KEY_DIGEST_BYTES + _CRC.size + (_RUN_COUNT.size if ordered else 0)
        expected += sum(blocks_of(entries) for _, entries, _ in headers) * block_bytes + FOOTER.size
        if len(body) >= FOOTER.size and FOOTER.unpack_from(body, len(body) - FOOTER.size)[-1] != INDEX_MAGIC:
            raise CorruptStateError(f"cache segment {name} has no index footer")
    if expected != len(body):
        raise CorruptStateError(f"cache segment {name} holds {len(body)} bytes, its run table says {expected}")
    runs = []
    for owner, entries, order_bytes in headers:
        digests = np.frombuffer(body, DIGEST_DTYPE, entries, offset)
        offset += entries * KEY_DIGEST_BYTES
        fps = np.frombuffer(body, FINGERPRINT_DTYPE, entries, offset).astype(np.uint64)
        offset += entries * FINGERPRINT_BYTES
        keys = None
        if ordered:
            lengths = np.frombuffer(body, np.uint8, entries, offset)
            offset += entries
            keys = order_keys_of(lengths, body[offset:offset + order_bytes], name)
            offset += order_bytes
        runs.append(CacheRun(owner, digests, fps, keys))
    return runs


def order_keys_of(lengths: npt.NDArray[np.uint8], data: bytes, name: str) -> pa.BinaryArray:
    """Order keys from their length bytes (0: none) and their bytes, as a segment holds them."""
    sizes = lengths.astype(np.int32)
    offsets = np.zeros(len(sizes) + 1, np.int32)
    np.cumsum(sizes, out=offsets[1:])
    if int(offsets[-1]) != len(data):
        raise CorruptStateError(f"cache segment {name}: its order keys hold {len(data)} bytes, their lengths "
                                f"say {int(offsets[-1])}")
    validity = pa.py_buffer(np.packbits(sizes > 0, bitorder="little").tobytes())
    nulls = int(np.count_nonzero(sizes == 0))
    return pa.Array.from_buffers(pa.binary(), len(sizes), [validity, pa.py_buffer(offsets.tobytes()),
                                                            pa.py_buffer(data)], null_count=nulls)


def stored_order_keys(keys: pa.Array | pa.ChunkedArray) -> pa.BinaryArray:
    """Order keys as a segment keeps them: at most ORDER_KEY_BYTES each (a longer string's first
    bytes: UTF-8 keeps code point order in its bytes, so a prefix compares as the value does, up to
    a tie), an empty one as none."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    keys = keys.cast(pa.binary())
    longest = pc.max(pc.binary_length(keys)).as_py() if len(keys) else None
    if (longest or 0) > ORDER_KEY_BYTES:
        keys = pc.binary_slice(keys, 0, ORDER_KEY_BYTES)
    empty = pc.fill_null(pc.equal(pc.binary_length(keys), 0), False)
    if pc.any(empty).as_py():
        keys = pc.if_else(empty, pa.scalar(None, pa.binary()), keys)
    return keys
