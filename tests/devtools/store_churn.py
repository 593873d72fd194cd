"""What a single-host deployment does to its embedded store, compressed in time: writers that put
an object under staging, copy it to its final name and delete the staged one, keeping the last
`keep` finals each (older finals deleted), objects of 1 KiB to 20 MiB (log-uniform, mean ~2 MiB).
A sampler reads the data directory's allocated bytes twice a second beside the live bytes the
writers hold; both are the store's real state, read from the filesystem and the writers' own
acknowledgements, not from the store's account of itself. Also the small filesystems the
full-disk tests mount (tmpfs, root only) and fill."""
from __future__ import annotations

import hashlib
import math
import os
import random
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from eventdedup_dev.local_s3 import LocalS3Process, allocated_bytes

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
POOL = os.urandom(24 * MIB)  # bodies are slices of it, each made distinct by a header


def store_client(server: LocalS3Process) -> Any:
    """A client as eventdedup makes them: standard retries, five attempts."""
    return boto3.client("s3", endpoint_url=server.endpoint_url, region_name="us-east-1",
                        aws_access_key_id=server.credentials["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=server.credentials["AWS_SECRET_ACCESS_KEY"],
                        config=Config(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=16))


@dataclass
class ChurnRun:
    """The figures of one churn run; `kept` maps each live final key to its MD5."""

    bytes_put: int = 0
    bytes_copied: int = 0
    objects: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)
    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (seconds, disk bytes, live bytes)
    kept: dict[str, str] = field(default_factory=dict)
    live_bytes: int = 0

    def worst(self, reserve: int) -> tuple[float, int, int]:
        """The sample closest to the bound disk <= 3 x live + reserve (its margin the smallest)."""
        return min(self.samples, key=lambda sample: 3 * sample[2] + reserve - sample[1])


def churn(server: LocalS3Process, bucket: str, total: int, writers: int = 4, keep: int = 40,
          seed: int = 55) -> ChurnRun:
    run = ChurnRun()
    lock, done = threading.Lock(), threading.Event()
    client = store_client(server)
    started = time.monotonic()

    def sample() -> None:
        while not done.wait(0.5):
            with lock:
                live = run.live_bytes
            run.samples.append((round(time.monotonic() - started, 1), allocated_bytes(server.stored_in), live))

    def write(number: int) -> None:
        rng = random.Random(seed * 100 + number)
        finals: deque[tuple[str, int]] = deque()
        count = 0
        while True:
            with lock:
                if run.bytes_put >= total or len(run.failures) > 5:
                    return
            size = int(math.exp(rng.uniform(math.log(KIB), math.log(20 * MIB))))
            header = f"{number}/{count}/".encode()
            offset = rng.randrange(len(POOL) - size)
            body = header + POOL[offset:offset + size - len(header)]
            staged, final = f"staging/{number}/{count}", f"final/{number}/{count}"
            count += 1
            try:
                client.put_object(Bucket=bucket, Key=staged, Body=body)
                client.copy_object(Bucket=bucket, Key=final, CopySource={"Bucket": bucket, "Key": staged})
                client.delete_object(Bucket=bucket, Key=staged)
                finals.append((final, len(body)))
                with lock:
                    run.bytes_put += len(body)
                    run.bytes_copied += len(body)
                    run.objects += 1
                    run.live_bytes += len(body)
                    run.kept[final] = hashlib.md5(body).hexdigest()
                if len(finals) > keep:
                    oldest, oldest_size = finals.popleft()
                    client.delete_object(Bucket=bucket, Key=oldest)
                    with lock:
                        run.live_bytes -= oldest_size
                        del run.kept[oldest]
            except Exception as exc:  # noqa: BLE001 - every failure is a finding, counted
                with lock:
                    run.failures.append(f"{staged}: {exc}")

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    threads = [threading.Thread(target=write, args=(number,)) for number in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    sampler.join()
    run.seconds = round(time.monotonic() - started, 1)
    return run


def unreadable(server: LocalS3Process, bucket: str, kept: dict[str, str]) -> list[str]:
    """The kept objects that are missing or differ from what was acknowledged."""
    client = server.client()
    return [key for key, digest in kept.items()
            if hashlib.md5(client.get_object(Bucket=bucket, Key=key)["Body"].read()).hexdigest() != digest]


@contextmanager
def small_filesystems(root: Path) -> Iterator[Any]:
    """`mount(name, mib)`: a tmpfs of that size under `root` (root only: skips otherwise), all
    unmounted at the end (after the stores on them have stopped)."""
    import pytest

    mounted: list[Path] = []

    def mount(name: str, mib: int) -> Path:
        target = root / name
        target.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", str(target)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"a small filesystem needs root: mount said {done.stderr.strip()}")
        mounted.append(target)
        return target

    try:
        yield mount
    finally:
        for target in mounted:
            subprocess.run(["umount", "-l", str(target)], check=False)


def free_bytes(directory: Path) -> int:
    stats = os.statvfs(directory)
    return stats.f_bavail * stats.f_frsize


def fill(directory: Path, leave: int) -> Path:
    """A file in `directory` taking its filesystem's free space down to about `leave` bytes
    (0: until writing fails), as another program filling the disk would."""
    filler = directory / "filler"
    with open(filler, "ab", buffering=0) as file:
        size = free_bytes(directory) - leave
        if size > 0:
            try:
                os.posix_fallocate(file.fileno(), file.seek(0, os.SEEK_END), size)
            except OSError:
                pass
        if leave == 0:
            try:
                while file.write(b"\0" * 4096):
                    pass
            except OSError:
                pass
    return filler
