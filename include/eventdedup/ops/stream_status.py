"""`eventdedup streams`: every stream of a folder at once (eventdedup.streams): whether its store is
consistent, its log's head and latest batch, its ingestion lag, and the files that cannot run.

Each stream is `eventdedup status` of its own configuration (eventdedup.ops.status.store_status),
read side by side: a store that cannot be read is that stream's line, never the command's end.
"""
from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from eventdedup.config import Config
from eventdedup.errors import EventDedupError
from eventdedup.ops.status import store_status
from eventdedup.s3store import S3Store
from eventdedup.streams import Stream, StreamFolder

# Each stream's status waits on S3 round trips, not on the CPU: a few at once.
STATUS_THREADS = 8


def folder_status(folder: StreamFolder, store_of: Callable[[Config], S3Store], now: datetime) -> dict[str, Any]:
    """Every stream's status (in the folder's order) and every refused file's reason."""
    with ThreadPoolExecutor(max_workers=STATUS_THREADS) as pool:
        streams = list(pool.map(lambda stream: stream_status(stream, store_of, now), folder.streams))
    return {"folder": str(folder.folder), "streams": streams,
            "refused": [{"files": [str(path) for path in error.files], "message": error.message}
                        for error in folder.errors]}


def stream_status(stream: Stream, store_of: Callable[[Config], S3Store], now: datetime) -> dict[str, Any]:
    """One stream's line: consistency, head version, latest batch and ingestion lag, or why its
    store could not be read."""
    line: dict[str, Any] = {"stream": stream.name, "config": str(stream.path),
                            "store": f"s3://{stream.config.s3.bucket}/{stream.config.layout.output_prefix}"}
    try:
        status = store_status(store_of(stream.config), stream.config, now, limit=1)
    except (EventDedupError, BotoCoreError, ClientError, OSError) as exc:
        return {**line, "error": f"{type(exc).__name__}: {exc}"}
    latest = status["batches"][-1] if status["batches"] else None
    return {**line, "consistent": status["consistent"], "head_version": status["head_version"],
            "latest_batch": None if latest is None else latest["batch_id"],
            "latest_as_of": None if latest is None else latest["as_of"],
            "ingestion": status.get("ledger"), "problems": status["problems"], "pending": status["pending"]}


def folder_exit_code(status: dict[str, Any]) -> int:
    """3 when a stream's store is inconsistent, 1 when a file cannot run or a store cannot be read, else 0."""
    if any(line.get("consistent") is False for line in status["streams"]):
        return 3
    return 1 if status["refused"] or any("error" in line for line in status["streams"]) else 0


def format_folder_status(status: dict[str, Any]) -> str:
    """A table of the streams, then each refused file's reason."""
    headers = ("stream", "state", "log version", "latest batch", "waiting", "oldest waiting")
    rows = [headers] + [_row(line) for line in status["streams"]]
    widths = [max(len(row[i]) for row in rows) for i in range(len(headers))]
    lines = [f"{len(status['streams'])} stream(s) in {status['folder']}"]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    for line in status["streams"]:
        if "error" in line:
            lines.append(f"{line['stream']}: cannot read its store: {line['error']}")
        lines += [f"{line['stream']}: problem: {problem}" for problem in line.get("problems", [])]
    lines += [f"refused: {refused['message']}" for refused in status["refused"]]
    return "\n".join(lines)


def _row(line: dict[str, Any]) -> tuple[str, ...]:
    if "error" in line:
        return line["stream"], "UNREADABLE", "", "", "", ""
    lag = line["ingestion"] or {}
    return (line["stream"], "consistent" if line["consistent"] else "INCONSISTENT",
            "" if line["head_version"] is None else str(line["head_version"]), line["latest_batch"] or "",
            str(lag.get("unconsumed", "")), lag.get("oldest_unconsumed_last_modified") or "")
