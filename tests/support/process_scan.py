"""Watch every process's command line on this machine for secrets while a block runs."""
from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def command_lines_watched(secrets: tuple[str, ...], every_seconds: float = 0.02) -> Iterator[dict[str, object]]:
    """Yields a dict that ends up holding `hits` (command lines containing a secret) and `seen`
    (how many distinct processes were read): a scan that saw nothing would prove nothing."""
    hits: list[str] = []  # filled while the block runs
    result: dict[str, object] = {"hits": hits, "seen": 0}
    needles = [secret.encode() for secret in secrets]
    stop = threading.Event()
    pids: set[str] = set()

    def scan() -> None:
        while not stop.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as handle:
                        line = handle.read()
                except OSError:
                    continue  # the process ended between listing and reading
                pids.add(pid)
                if any(needle in line for needle in needles):
                    hits.append(line.replace(b"\0", b" ").decode(errors="replace"))
            stop.wait(every_seconds)

    watcher = threading.Thread(target=scan, daemon=True)
    watcher.start()
    try:
        yield result
    finally:
        stop.set()
        watcher.join()
        result["seen"] = len(pids)
