"""Cache objects as releases before 2026-11-26 wrote them, byte for byte: a store written before
must keep working."""
from __future__ import annotations

import struct
import zlib
from dataclasses import replace

import numpy as np

from eventdedup.cache.guard import IdGuard, decode_guard
from eventdedup.cache.segment import CacheRun
from eventdedup.commit.log import read_commit
from eventdedup.keys import CacheKey, day_guard_head_key, is_guard_head_key
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store


def format_1_segment(runs: list[CacheRun]) -> bytes:
    """A cache segment as releases before 2026-11-26 wrote it (format 1: no index)."""
    parts = [struct.pack(">4sBBBBI", b"EDCS", 1, 16, 8, 0, len(runs))]
    for cache_run in runs:
        owner = cache_run.owner.encode("ascii")
        parts.append(struct.pack(">H", len(owner)) + owner + struct.pack(">I", len(cache_run)))
    for cache_run in runs:
        parts += [cache_run.digests.astype("S16").tobytes(), cache_run.fingerprints.astype(">u8").tobytes()]
    body = b"".join(parts)
    return body + struct.pack(">I", zlib.crc32(body))


def format_1_guard(hours: np.ndarray, hashes: np.ndarray, slots: np.ndarray) -> bytes:
    """A day guard (format 1): 32-bit hashes sorted with their slots (2 bytes) into `hours`."""
    body = b"".join([struct.pack(">4sBBxxII", b"EDGD", 1, 2, len(hours), len(hashes)),
                     hours.astype(">i8").tobytes(), hashes.astype(">u4").tobytes(), slots.astype(">u2").tobytes()])
    return body + struct.pack(">I", zlib.crc32(body))


def format_1_of(guard: IdGuard) -> bytes:
    """A format-2 guard's ids as a format-1 guard holds them (the top 32 of their hash bits)."""
    hashes = (guard.hashes >> np.uint64(guard.hash_bits - 32)).astype(np.uint32)
    order = np.lexsort((guard.slots, hashes))
    return format_1_guard(guard.hours, hashes[order], guard.slots[order])


def with_day_guards(store: S3Store, layout: Layout, version: int) -> dict[str, str]:
    """Rewrite commit `version` as a release before 2026-11-26 would have written it: its hour
    guards as format-1 guards of their arrival day, under the day guard's names. Returns the new
    head name -> object key. (A log with a checkpoint after `version` would keep the old names.)"""
    record = read_commit(store, layout, version)
    assert record is not None
    heads, renamed = dict(record.cache_heads), {}
    for name, key in record.cache_heads.items():
        if not is_guard_head_key(name):
            continue
        hour_key = CacheKey.parse(name.split("/", 1)[1])
        day_key = layout.final_day_guard(record.batch_id, hour_key.day, hour_key.bucket)
        store.put_bytes(day_key, format_1_of(decode_guard(store.get_bytes(key), key)))
        store.delete_keys([key])
        del heads[name]
        heads[day_guard_head_key(hour_key.day, hour_key.bucket)] = day_key
        renamed[key] = day_key
    objects = []
    for obj in record.objects:
        if obj.key in renamed:
            info = store.head(renamed[obj.key])
            assert info is not None
            obj = replace(obj, key=renamed[obj.key], size=info.size, etag=info.etag)
        objects.append(obj)
    store.put_bytes(layout.commit(version), replace(record, cache_heads=heads, objects=tuple(objects)).to_bytes())
    return {name: key for name, key in heads.items() if is_guard_head_key(name)}
