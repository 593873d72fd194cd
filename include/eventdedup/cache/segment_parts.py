"""Read a format-2 or format-3 cache segment in parts: only the blocks that can hold the ids a batch probes.

A late copy, a straggler's old hour, a guard's false hit: a batch often probes a few ids of an
hour whose segment holds hundreds of thousands. Format 2 keeps, per run, each block's first
digest and CRC in an index at the end of the object (eventdedup.cache.segment), so such a read
is the object's tail (footer and index), its head (the run table) and, per run, the blocks
whose digest range holds a probed id, each checked by its CRC: kilobytes where the whole
segment is megabytes. Every entry of a probed id is in the blocks read (a digest equal to a
block's first may also end the block before: both are read), so a lookup of the probed ids in
these partial runs is the lookup in the whole segment (`CacheView.lookup` queries no other id
in an hour a guard named). Format 3 adds the blocks' order keys: their lengths, and their bytes
from where the index says each block's begin. The byte ranges of every run are read together, ranges less than
8 KiB apart in one request. A format-1 segment has no index: it is read whole (docs/formats.md).
"""
from __future__ import annotations

import bisect
import zlib
from collections.abc import Callable, Collection
from dataclasses import dataclass

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
    ORDERED_FORMAT,
    CacheRun,
    block_crc,
    blocks_of,
    decode_segment,
    order_keys_of,
    read_run_table,
)
from eventdedup.errors import CorruptStateError
from eventdedup.keys import DIGEST_DTYPE, FINGERPRINT_BYTES, KEY_DIGEST_BYTES

TAIL_BYTES = 8 << 10  # read first from the end: the footer, and the index of a small segment
HOLE_BYTES = 8 << 10  # ranges closer than this are read in one request
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
    table, ordered = _run_table(head, table_length, name)
    data_end = table_length + sum(_run_bytes(entries, order_bytes, ordered) for _, entries, order_bytes in table)
    block_index_bytes = KEY_DIGEST_BYTES + _CRC.size + (_KEY_AT.itemsize if ordered else 0)
    index_length = sum(blocks_of(entries) for _, entries, _ in table) * block_index_bytes
    if block_entries <= 0 or index_offset != data_end or index_offset + index_length != footer_at:
        raise CorruptStateError(f"cache segment {name}: its footer places the index at {index_offset} "
                                f"({index_length} bytes), its run table at {data_end}")
    index = (tail[index_offset - tail_start:footer_at - tail_start] if index_offset >= tail_start
             else read(index_offset, tail_start) + tail[:footer_at - tail_start])
    if zlib.crc32(index) != index_crc:
        raise CorruptStateError(f"cache segment {name}: its block index fails its checksum")
    plans, data_at, index_at = [], table_length, 0
    for owner, entries, order_bytes in table:
        count = blocks_of(entries)
        firsts = np.frombuffer(index, DIGEST_DTYPE, count, index_at)
        crcs = np.frombuffer(index, ">u4", count, index_at + count * KEY_DIGEST_BYTES)
        keys_at = (np.frombuffer(index, _KEY_AT, count, index_at + count * (KEY_DIGEST_BYTES + _CRC.size))
                   .astype(np.int64) if ordered else None)
        if owners is None or owner in owners:
            plans.append(_RunPlan(owner, entries, data_at, firsts, crcs,
                                  _spans(firsts, digests, block_entries, entries) if entries and len(digests) else [],
                                  keys_at, order_bytes))
        data_at += _run_bytes(entries, order_bytes, ordered)
        index_at += count * block_index_bytes
    fetched = _Fetched(read, [rng for plan in plans for rng in plan.ranges()])
    return [plan.run(fetched, name, block_entries) for plan in plans]


def _spans(firsts: npt.NDArray[np.bytes_], digests: npt.NDArray[np.bytes_], block_entries: int,
           entries: int) -> list[tuple[int, int, int]]:
    """One run's blocks that can hold the probed digests, as spans of consecutive blocks: (first
    block, first entry, end entry). A probe's blocks run from the last one whose first digest is
    below it to the last one whose first digest is at most it; a probe below the run's first
    digest is in none of them."""
    digests = digests[digests >= firsts[0]]
    if not len(digests):
        return []
    low = np.maximum(np.searchsorted(firsts, digests, side="left") - 1, 0)
    high = np.maximum(np.searchsorted(firsts, digests, side="right") - 1, 0)
    wanted = np.zeros(len(firsts), bool)
    for start, stop in zip(low.tolist(), high.tolist(), strict=True):
        wanted[start:stop + 1] = True
    blocks = np.flatnonzero(wanted)
    breaks = np.flatnonzero(np.diff(blocks) != 1) + 1
    return [(int(span[0]), int(span[0]) * block_entries, min((int(span[-1]) + 1) * block_entries, entries))
            for span in np.split(blocks, breaks)]


class _Fetched:
    """The byte ranges a read needs, fetched with as few requests as holes allow: ranges closer
    than HOLE_BYTES are read as one (as Arrow's Parquet reader coalesces column chunks), so the
    many small runs of an old hour's stragglers cost a request or two, not two a run."""

    def __init__(self, read: ReadRange, ranges: list[tuple[int, int]]) -> None:
        self._spans: list[tuple[int, int]] = []
        for start, stop in sorted(ranges):
            if self._spans and start - self._spans[-1][1] <= HOLE_BYTES:
                self._spans[-1] = (self._spans[-1][0], max(self._spans[-1][1], stop))
            else:
                self._spans.append((start, stop))
        self._data = [read(start, stop) for start, stop in self._spans]
        self._starts = [start for start, _ in self._spans]

    def get(self, start: int, stop: int) -> bytes:
        """Bytes [start, stop) of the object (empty past a truncated read's end)."""
        at = bisect.bisect_right(self._starts, start) - 1
        base = self._spans[at][0]
        return self._data[at][start - base:stop - base]


_KEY_AT = np.dtype(">u4")  # format 3's index: where each block's order keys start in its run's


def _run_bytes(entries: int, order_bytes: int, ordered: bool) -> int:
    """A run's data bytes: digests and fingerprints (format 3: and order key lengths and bytes)."""
    return entries * (ENTRY_BYTES + 1) + order_bytes if ordered else entries * ENTRY_BYTES


@dataclass(frozen=True)
class _RunPlan:
    owner: str
    entries: int
    data_at: int  # where its digests start; its fingerprints follow them (format 3: then order keys)
    firsts: npt.NDArray[np.bytes_]
    crcs: npt.NDArray[np.uint32]
    spans: list[tuple[int, int, int]]  # (first block, first entry, end entry)
    keys_at: npt.NDArray[np.int64] | None = None  # format 3: where each block's order keys start
    order_bytes: int = 0  # format 3: the run's order keys' bytes

    @property
    def fps_at(self) -> int:
        return self.data_at + self.entries * KEY_DIGEST_BYTES

    @property
    def lengths_at(self) -> int:
        return self.fps_at + self.entries * FINGERPRINT_BYTES

    @property
    def order_at(self) -> int:
        return self.lengths_at + self.entries

    def _keys_span(self, first_block: int, last: int) -> tuple[int, int]:
        """Where, in the object, the order keys of the blocks from `first_block` to entry `last` lie."""
        assert self.keys_at is not None
        end_block = blocks_of(last)
        stop = int(self.keys_at[end_block]) if end_block < len(self.keys_at) else self.order_bytes
        return self.order_at + int(self.keys_at[first_block]), self.order_at + stop

    def ranges(self) -> list[tuple[int, int]]:
        ranges = []
        for first_block, first, last in self.spans:
            ranges += [(self.data_at + first * KEY_DIGEST_BYTES, self.data_at + last * KEY_DIGEST_BYTES),
                       (self.fps_at + first * FINGERPRINT_BYTES, self.fps_at + last * FINGERPRINT_BYTES)]
            if self.keys_at is not None:
                ranges += [(self.lengths_at + first, self.lengths_at + last), self._keys_span(first_block, last)]
        return ranges

    def run(self, fetched: _Fetched, name: str, block_entries: int) -> CacheRun:
        """The run's blocks that were planned, each checked by its CRC and its index entry."""
        ordered = self.keys_at is not None
        if not self.spans:
            return CacheRun(self.owner, np.zeros(0, DIGEST_DTYPE), np.zeros(0, np.uint64),
                            order_keys_of(np.zeros(0, np.uint8), b"", name) if ordered else None)
        parts_digests, parts_fps, parts_lengths, parts_keys = [], [], [], []
        for first_block, first, last in self.spans:
            digest_bytes = fetched.get(self.data_at + first * KEY_DIGEST_BYTES, self.data_at + last * KEY_DIGEST_BYTES)
            fp_bytes = fetched.get(self.fps_at + first * FINGERPRINT_BYTES, self.fps_at + last * FINGERPRINT_BYTES)
            span_entries = last - first
            length_bytes, key_bytes, key_starts = b"", b"", np.zeros(0, np.int64)
            if ordered:
                assert self.keys_at is not None
                length_bytes = fetched.get(self.lengths_at + first, self.lengths_at + last)
                key_bytes = fetched.get(*self._keys_span(first_block, last))
                sizes = np.frombuffer(length_bytes, np.uint8).astype(np.int64)
                key_starts = np.concatenate([[0], np.cumsum(sizes)])
                if len(sizes) != span_entries or int(key_starts[-1]) != len(key_bytes):
                    raise CorruptStateError(f"cache segment {name} is truncated in run {self.owner}")
            if (len(digest_bytes), len(fp_bytes)) != (span_entries * KEY_DIGEST_BYTES,
                                                      span_entries * FINGERPRINT_BYTES):
                raise CorruptStateError(f"cache segment {name} is truncated in run {self.owner}")
            for block in range(first_block, first_block + blocks_of(span_entries)):
                start, stop = block * block_entries - first, min((block + 1) * block_entries, self.entries) - first
                extra: tuple[bytes, ...] = ()
                if ordered:
                    extra = (length_bytes[start:stop], key_bytes[int(key_starts[start]):int(key_starts[stop])])
                crc = block_crc(digest_bytes[start * KEY_DIGEST_BYTES:stop * KEY_DIGEST_BYTES],
                                fp_bytes[start * FINGERPRINT_BYTES:stop * FINGERPRINT_BYTES], *extra)
                if crc != int(self.crcs[block]):
                    raise CorruptStateError(f"cache segment {name}: block {block} of run {self.owner} fails its "
                                            "checksum")
            if digest_bytes[:KEY_DIGEST_BYTES] != self.firsts[first_block].ljust(KEY_DIGEST_BYTES, b"\0"):
                raise CorruptStateError(f"cache segment {name}: block {first_block} of run {self.owner} does not "
                                        "begin where its index says")
            parts_digests.append(np.frombuffer(digest_bytes, DIGEST_DTYPE))
            parts_fps.append(np.frombuffer(fp_bytes, FINGERPRINT_DTYPE).astype(np.uint64))
            parts_lengths.append(np.frombuffer(length_bytes, np.uint8))
            parts_keys.append(key_bytes)
        keys = (order_keys_of(np.concatenate(parts_lengths), b"".join(parts_keys), name) if ordered else None)
        return CacheRun(self.owner, np.concatenate(parts_digests), np.concatenate(parts_fps), keys)


def _run_table(head: bytes, table_length: int,
               name: str) -> tuple[list[tuple[str, int, int]], bool]:
    """The run table of a format-2 or format-3 segment, and whether it is format 3 (ordered)."""
    if len(head) != table_length or table_length < _HEADER.size:
        raise CorruptStateError(f"cache segment {name}: its run table is {len(head)} bytes, its footer says "
                                f"{table_length}")
    magic, version, digest_bytes, fp_bytes, _, run_count = _HEADER.unpack_from(head)
    if ((magic, digest_bytes, fp_bytes) != (MAGIC, KEY_DIGEST_BYTES, FINGERPRINT_BYTES)
            or version not in (FORMAT_VERSION, ORDERED_FORMAT)):
        raise CorruptStateError(f"cache segment {name} has magic {magic!r} version {version}; expected EDCS v2 or v3")
    ordered = version == ORDERED_FORMAT
    table, offset = read_run_table(head, run_count, name, ordered)
    if offset != table_length:
        raise CorruptStateError(f"cache segment {name}: its run table ends at {offset}, its footer says {table_length}")
    return table, ordered
