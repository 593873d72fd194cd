"""Watch every process's command line on this machine for secrets while a block runs."""
from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def command_lines_watched(secrets: tuple[str, ...], witness: str = "",
                          every_seconds: float = 0.02) -> Iterator[dict[str, object]]:
    """Yields a dict holding `hits` (command lines containing a secret, filled as they are seen)
    and `witnessed`: how many distinct processes had `witness` on their command line (so far, and
    finally at the end).
    A scan that never saw the process it watches for would prove nothing."""
    hits: list[str] = []
    witnesses: set[str] = set()
    result: dict[str, object] = {"hits": hits, "witnessed": 0}
    needles = [secret.encode() for secret in secrets]
    stop = threading.Event()

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
                if witness and witness.encode() in line:
                    witnesses.add(pid)
                    result["witnessed"] = len(witnesses)
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
        result["witnessed"] = len(witnesses)
