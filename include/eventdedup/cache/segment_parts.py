"""Read a format-2 cache segment in parts: only the blocks that can hold the ids a batch probes.

A late copy, a straggler's old hour, a guard's false hit: a batch often probes a few ids of an
hour whose segment holds hundreds of thousands. Format 2 keeps, per run, each block's first
digest and CRC in an index at the end of the object (eventdedup.cache.segment), so such a read
is the object's tail (footer and index), its head (the run table) and, per run, the blocks
whose digest range holds a probed id, each checked by its CRC: kilobytes where the whole
segment is megabytes. Every entry of a probed id is in the blocks read (a digest equal to a
block's first may also end the block before: both are read), so a lookup of the probed ids in
these partial runs is the lookup in the whole segment (`CacheView.lookup` queries no other id
in an hour a guard named). A format-1 segment has no index: it is read whole.
"""
from __future__ import annotations

import zlib
from collections.abc import Callable, Collection

import numpy as np
import numpy.typing as npt

from eventdedup.cache.segment import (
    _CRC,
    _HEADER,
    FINGERPRINT_DTYPE,
    FOOTER,
    FORMAT_VERSION,
    INDEX_MAGIC,
    MAGIC,
    CacheRun,
    block_crc,
    blocks_of,
    decode_segment,
    read_run_table,
)
from eventdedup.errors import CorruptStateError
from eventdedup.keys import DIGEST_DTYPE, FINGERPRINT_BYTES, KEY_DIGEST_BYTES

TAIL_BYTES = 8 << 10  # read first from the end: the footer, and the index of a small segment
ENTRY_BYTES = KEY_DIGEST_BYTES + FINGERPRINT_BYTES
ReadRange = Callable[[int, int], bytes]  # bytes [start, stop) of the object


def runs_holding(tail: bytes, size: int, read: ReadRange, name: str, digests: npt.NDArray[np.bytes_],
                 owners: Collection[str] | None = None) -> list[CacheRun] | None:
    """The runs of a segment of `size` bytes whose last bytes are `tail`, as far as they may hold
    `digests` (sorted): every entry of those ids, and others of the same blocks. Runs of other
    owners than `owners` (None: all) are left out. None for a format-1 segment (read it whole)."""
    footer_at = size - _CRC.size - FOOTER.size
    if footer_at < _HEADER.size or len(tail) < _CRC.size + FOOTER.size:
        return None
    if len(tail) >= size:  # the tail is the whole segment: decode it whole, checked by its CRC
        return [run for run in decode_segment(tail, name) if owners is None or run.owner in owners]
    footer = tail[len(tail) - _CRC.size - FOOTER.size:len(tail) - _CRC.size]
    index_offset, table_length, block_entries, table_crc, index_crc, footer_crc, magic = FOOTER.unpack(footer)
    if magic != INDEX_MAGIC:
        return None
    if zlib.crc32(footer[:FOOTER.size - 8]) != footer_crc:
        # Not a footer after all (a format-1 segment whose last bytes read "EDCX", one in 2^32)
        # or a damaged one: read whole, its trailer's CRC decides.
        return None
    tail_start = size - len(tail)
    head = tail[:table_length] if tail_start == 0 else read(0, table_length)
    if zlib.crc32(head) != table_crc:
        raise CorruptStateError(f"cache segment {name}: its run table fails its checksum")
    table = _run_table(head, table_length, name)
    data_end = table_length + sum(entries for _, entries in table) * ENTRY_BYTES
    index_length = sum(blocks_of(entries) for _, entries in table) * (KEY_DIGEST_BYTES + _CRC.size)
    if block_entries <= 0 or index_offset != data_end or index_offset + index_length != footer_at:
        raise CorruptStateError(f"cache segment {name}: its footer places the index at {index_offset} "
                                f"({index_length} bytes), its run table at {data_end}")
    index = (tail[index_offset - tail_start:footer_at - tail_start] if index_offset >= tail_start
             else read(index_offset, tail_start) + tail[:footer_at - tail_start])
    if zlib.crc32(index) != index_crc:
        raise CorruptStateError(f"cache segment {name}: its block index fails its checksum")
    runs, data_at, index_at = [], table_length, 0
    for owner, entries in table:
        count = blocks_of(entries)
        firsts = np.frombuffer(index, DIGEST_DTYPE, count, index_at)
        crcs = np.frombuffer(index, ">u4", count, index_at + count * KEY_DIGEST_BYTES)
        if owners is None or owner in owners:
            runs.append(_run_part(read, name, owner, entries, data_at, block_entries, firsts, crcs, digests))
        data_at += entries * ENTRY_BYTES
        index_at += count * (KEY_DIGEST_BYTES + _CRC.size)
    return runs


def _run_table(head: bytes, table_length: int, name: str) -> list[tuple[str, int]]:
    if len(head) != table_length or table_length < _HEADER.size:
        raise CorruptStateError(f"cache segment {name}: its run table is {len(head)} bytes, its footer says "
                                f"{table_length}")
    magic, version, digest_bytes, fp_bytes, _, run_count = _HEADER.unpack_from(head)
    if (magic, version, digest_bytes, fp_bytes) != (MAGIC, FORMAT_VERSION, KEY_DIGEST_BYTES, FINGERPRINT_BYTES):
        raise CorruptStateError(f"cache segment {name} has magic {magic!r} version {version}; expected EDCS v2")
    table, offset = read_run_table(head, run_count, name)
    if offset != table_length:
        raise CorruptStateError(f"cache segment {name}: its run table ends at {offset}, its footer says {table_length}")
    return table


def _run_part(read: ReadRange, name: str, owner: str, entries: int, data_at: int, block_entries: int,
              firsts: npt.NDArray[np.bytes_], crcs: npt.NDArray[np.uint32],
              digests: npt.NDArray[np.bytes_]) -> CacheRun:
    """One run's blocks that can hold the probed digests: each block from the last one whose first
    digest is below a probe to the last one whose first digest is at most it."""
    if not entries or not len(digests):
        return CacheRun(owner, np.zeros(0, DIGEST_DTYPE), np.zeros(0, np.uint64))
    low = np.maximum(np.searchsorted(firsts, digests, side="left") - 1, 0)
    high = np.maximum(np.searchsorted(firsts, digests, side="right") - 1, 0)
    wanted = np.zeros(len(firsts), bool)
    for start, stop in zip(low.tolist(), high.tolist(), strict=True):
        wanted[start:stop + 1] = True
    blocks = np.flatnonzero(wanted)
    breaks = np.flatnonzero(np.diff(blocks) != 1) + 1
    parts_digests, parts_fps = [], []
    fps_at = data_at + entries * KEY_DIGEST_BYTES
    for span in np.split(blocks, breaks):
        first, last = int(span[0]) * block_entries, min((int(span[-1]) + 1) * block_entries, entries)
        digest_bytes = read(data_at + first * KEY_DIGEST_BYTES, data_at + last * KEY_DIGEST_BYTES)
        fp_bytes = read(fps_at + first * FINGERPRINT_BYTES, fps_at + last * FINGERPRINT_BYTES)
        span_entries = last - first
        if (len(digest_bytes), len(fp_bytes)) != (span_entries * KEY_DIGEST_BYTES, span_entries * FINGERPRINT_BYTES):
            raise CorruptStateError(f"cache segment {name} is truncated in run {owner}")
        for block in span.tolist():
            start, stop = block * block_entries - first, min((block + 1) * block_entries, entries) - first
            if block_crc(digest_bytes[start * KEY_DIGEST_BYTES:stop * KEY_DIGEST_BYTES],
                         fp_bytes[start * FINGERPRINT_BYTES:stop * FINGERPRINT_BYTES]) != int(crcs[block]):
                raise CorruptStateError(f"cache segment {name}: block {block} of run {owner} fails its checksum")
        if digest_bytes[:KEY_DIGEST_BYTES] != firsts[span[0]].ljust(KEY_DIGEST_BYTES, b"\0"):
            raise CorruptStateError(f"cache segment {name}: block {int(span[0])} of run {owner} does not begin where "
                                    "its index says")
        parts_digests.append(np.frombuffer(digest_bytes, DIGEST_DTYPE))
        parts_fps.append(np.frombuffer(fp_bytes, FINGERPRINT_DTYPE).astype(np.uint64))
    return CacheRun(owner, np.concatenate(parts_digests), np.concatenate(parts_fps))
