"""Executor-local disk copies of cache objects: a persistent cluster reads from S3, per batch,
only what changed.

Cache objects are immutable by name (a head's every version has a key of its own), and a batch
reads every guard of its window: at production density that is gigabytes a batch, nearly all of
them the same as the batch before read. So a worker keeps what it read on local disk, keyed by
object key and ETag. Where the commit log records the object's ETag (every chain object a
state knows: CommittedState.object_etags), a copy of that ETag is used without a request: the
log names only objects it committed, and a committed object is never rewritten. Otherwise a copy
is used only after S3 answers a conditional GET (If-None-Match: the copy's ETag) with 304 Not
Modified: a replaced object is never served stale (its new bytes come back in the same request)
and a deleted one is missing as on S3. Each copy carries the CRC32 of
its bytes, checked on every read: a damaged or truncated copy is dropped and read from S3
again, never trusted. The directory is shared by the worker processes of a host (a copy is
written to a temporary name and renamed: a reader sees a whole copy or none) and bounded: past
`max_bytes`, the least recently used copies leave first, but never one used within the last
half hour: every batch reads every guard of its window in turn, and under plain LRU a window
bigger than the bound would evict each copy just before its next use (every read a miss). A new
copy that finds no room is not kept; what fits stays warm.

A copy costs a read of the whole object, which an executor that starts empty need not pay for an
object it probes for a few ids (eventdedup.cache.segment_parts reads those in parts). So copies
are filled from what costs no extra read: objects this executor wrote itself (`keep`, under the
name the promotion copies them to, with their ETag: a copy keeps its source's), objects read
whole anyway, and an object whose parts this directory has read for FILL_AFTER_PART_READS
batches (`count_part_read`): one probed that often is cheaper whole, once, then by 304s.
"""
from __future__ import annotations

import hashlib
import logging
import os
import struct
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from botocore.exceptions import ClientError

from eventdedup.s3store import S3Store, is_not_found, quoted_etag

log = logging.getLogger(__name__)

MAGIC = b"EDLC"
_HEADER = struct.Struct(">4sHHQI")  # magic, key length, ETag length, size, crc32 of the bytes
SUFFIX = ".copy"
RECENT_SECONDS = 1800  # a copy used this recently is not evicted for a new one
# How long a process trusts its last listing of the directory (plus what it wrote since) before it
# lists it again to make room: a full directory at production density holds thousands of copies,
# and listing them for every copy written cost ~20 ms each, most of a batch's time.
RESCAN_SECONDS = 60
FILL_AFTER_PART_READS = 3  # batches that read parts of an object before a whole read fills its copy
PARTS_SUFFIX = ".parts"
PARTS_FORGET_SECONDS = 7 * 86400  # a count of part reads not added to for this long is removed at a listing


@dataclass(frozen=True)
class LocalCopySettings:
    directory: str  # "" for <temporary directory>/eventdedup-object-cache
    max_bytes: int  # 0: no local copies

    @property
    def path(self) -> Path:
        return Path(self.directory or os.path.join(tempfile.gettempdir(), "eventdedup-object-cache"))


@dataclass(frozen=True)
class _Copy:
    etag: str
    data: bytes


class LocalCopies:
    """Cache objects through a local directory of verified copies (the rules above)."""

    def __init__(self, settings: LocalCopySettings, clock: Callable[[], float] = time.time) -> None:
        self.settings, self.clock = settings, clock
        self.directory = settings.path
        self.enabled = settings.max_bytes > 0
        if self.enabled:
            self.directory.mkdir(parents=True, exist_ok=True)
        # Bytes found by the last listing plus what this process wrote since, and when it listed.
        self._estimate: int | None = None
        self._listed_at = 0.0
        self._full = False  # the last listing found no room to evict
        self._room = threading.Lock()  # a task's I/O threads write copies at once: one of them lists

    @classmethod
    def of_process(cls, settings: LocalCopySettings) -> LocalCopies:
        """This process's copies under these settings: one per worker process, shared by its tasks
        and threads, so that its estimate of the directory's bytes spares them a listing each."""
        key = (os.getpid(), settings)
        with _PROCESS_LOCK:
            if key not in _PROCESS_COPIES:
                _PROCESS_COPIES[key] = cls(settings)
            return _PROCESS_COPIES[key]

    def get_or_none(self, store: S3Store, key: str, etag: str | None = None) -> bytes | None:
        """The object's bytes as S3 holds them now; None when S3 has no such object. `etag`: the
        ETag the commit log records for it (an immutable object): a copy with that ETag is its
        bytes, read without a request."""
        if not self.enabled:
            return store.get_bytes_or_none(key)
        path = self.path_of(store, key)
        copy = self._read(path, key)
        if copy is not None and etag is not None and quoted_etag(copy.etag) == quoted_etag(etag):
            self._touch(path)
            return copy.data
        try:
            answer = store.get_versioned(key, unless_etag=None if copy is None else copy.etag)
        except ClientError as exc:
            if is_not_found(exc):
                path.unlink(missing_ok=True)
                return None
            raise
        if answer is None:
            assert copy is not None
            self._touch(path)
            return copy.data
        data, etag = answer
        self._write(path, key, etag, data)
        return data

    def held(self, store: S3Store, key: str, etag: str | None = None) -> bytes | None:
        """The object's bytes if this directory holds a copy S3 confirms (a conditional GET: no
        bytes cross the network while it is unchanged), or a copy of the ETag the log records
        (`etag`: no request at all); None, with no request, where it holds none, or where S3 has
        no such object any more (the caller's own read then says it is missing)."""
        if not self.enabled:
            return None
        path = self.path_of(store, key)
        copy = self._read(path, key)
        if copy is None:
            return None
        if etag is not None and quoted_etag(copy.etag) == quoted_etag(etag):
            self._touch(path)
            return copy.data
        try:
            answer = store.get_versioned(key, unless_etag=copy.etag)
        except ClientError as exc:
            if is_not_found(exc):
                path.unlink(missing_ok=True)
                return None
            raise
        if answer is None:
            self._touch(path)
            return copy.data
        data, etag = answer  # replaced under the same name: never for cache objects, but never served stale
        self._write(path, key, etag, data)
        return data

    def keep(self, store: S3Store, key: str, etag: str, data: bytes) -> None:
        """Keep a copy of bytes this process has (it wrote them, under `key` or a key that will be
        copied to `key` with the same ETag); used only once S3 confirms it holds them."""
        if self.enabled:
            self._write(self.path_of(store, key), key, etag, data)

    def count_part_read(self, store: S3Store, key: str) -> int:
        """Record that a batch read parts of an object; how many have, this one included (0
        without copies). Best effort: a count lost to a full disk or a race costs a later fill."""
        if not self.enabled:
            return 0
        path = self.path_of(store, key).with_suffix(PARTS_SUFFIX)
        try:
            count = int(path.read_text() or 0) + 1
        except (OSError, ValueError):
            count = 1
        try:
            path.write_text(str(count))
        except OSError:
            pass
        return count

    def path_of(self, store: S3Store, key: str) -> Path:
        """Where the copy of an object of the store's bucket lives. The endpoint is part of its name:
        two stores reached from one host (another environment, a bench's two densities) whose
        buckets share a name would otherwise take turns replacing each other's copies (the ETag
        check keeps that correct, never cheap)."""
        name = f"{store.endpoint}|{store.bucket}/{key}"
        return self.directory / (hashlib.sha256(name.encode()).hexdigest() + SUFFIX)

    @staticmethod
    def _forget_if_stale(entry: os.DirEntry[str], now: float) -> None:
        """Counts of part reads are a few bytes each, one per object probed in parts: those no batch
        added to for PARTS_FORGET_SECONDS go (their objects have mostly left the window)."""
        try:
            if entry.stat().st_mtime < now - PARTS_FORGET_SECONDS:
                os.unlink(entry.path)
        except OSError:
            pass

    def _touch(self, path: Path) -> None:
        """Mark a copy recently used."""
        now = self.clock()
        try:
            os.utime(path, (now, now))
        except OSError:
            pass  # evicted meanwhile by another worker: the bytes are confirmed all the same

    def _read(self, path: Path, key: str) -> _Copy | None:
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        try:
            magic, key_length, etag_length, size, crc = _HEADER.unpack_from(raw)
            stored_key = raw[_HEADER.size:_HEADER.size + key_length].decode()
            start = _HEADER.size + key_length
            etag = raw[start:start + etag_length].decode()
            data = raw[start + etag_length:]
        except (struct.error, UnicodeDecodeError):
            magic, stored_key, etag, data, size, crc = b"", "", "", b"", -1, -1
        if magic != MAGIC or stored_key != key or len(data) != size or zlib.crc32(data) != crc:
            log.warning("local copy %s of %s is damaged or not its own; reading the object from S3", path, key)
            path.unlink(missing_ok=True)
            return None
        return _Copy(etag, data)

    def _write(self, path: Path, key: str, etag: str, data: bytes) -> None:
        if not self._make_room(len(data) + _HEADER.size + len(key) + len(etag), path):
            return
        path.with_suffix(PARTS_SUFFIX).unlink(missing_ok=True)  # a copy needs no count of part reads
        encoded_key, encoded_etag = key.encode(), etag.encode()
        header = _HEADER.pack(MAGIC, len(encoded_key), len(encoded_etag), len(data), zlib.crc32(data))
        writing = path.with_name(f".writing-{os.getpid()}-{path.name}")
        try:
            with open(writing, "wb") as out:
                out.write(header + encoded_key + encoded_etag)
                out.write(data)
            now = self.clock()
            os.utime(writing, (now, now))
            os.replace(writing, path)
        except OSError as exc:  # a full or read-only disk costs S3 reads, never a batch
            log.warning("cannot keep a local copy of %s in %s: %s", key, self.directory, exc)
            writing.unlink(missing_ok=True)

    def _make_room(self, size: int, replacing: Path) -> bool:
        """Evict least recently used copies, none used within RECENT_SECONDS, until `size` more
        bytes fit within max_bytes; False (keep nothing) if they cannot. The directory is listed
        when this process's estimate says the copy may not fit, or the listing is RESCAN_SECONDS
        old: other processes' copies since then may take the directory past the bound until then."""
        with self._room:
            now = self.clock()
            if self._estimate is not None and now - self._listed_at < RESCAN_SECONDS:
                if self._estimate + size <= self.settings.max_bytes:
                    self._estimate += size
                    return True
                if self._full:  # the last listing found no room: none until it is old
                    return False
            return self._list_and_evict(size, replacing, now)

    def _list_and_evict(self, size: int, replacing: Path, now: float) -> bool:
        entries = []
        for entry in os.scandir(self.directory):
            if entry.name.endswith(PARTS_SUFFIX):
                self._forget_if_stale(entry, now)
            elif entry.name.endswith(SUFFIX) and entry.path != str(replacing):
                try:
                    stat = entry.stat()
                except OSError:
                    continue
                entries.append((stat.st_mtime, stat.st_size, entry.path))
        total = sum(entry_size for _, entry_size, _ in entries) + size
        recent = now - RECENT_SECONDS
        evictable = sorted(entry for entry in entries if entry[0] < recent)
        self._listed_at = now
        self._full = total - sum(entry_size for _, entry_size, _ in evictable) > self.settings.max_bytes
        if self._full:
            self._estimate = total - size
            return False
        for _, entry_size, name in evictable:
            if total <= self.settings.max_bytes:
                break
            Path(name).unlink(missing_ok=True)
            total -= entry_size
        self._estimate = total
        return True


_PROCESS_COPIES: dict[tuple[int, LocalCopySettings], LocalCopies] = {}
_PROCESS_LOCK = threading.Lock()
