"""`eventdedup status`: committed batches, their counts and outputs, and whether the store is consistent."""
from __future__ import annotations

from typing import Any

from .commit_log import load_committed_state, read_commit
from .config import Config
from .layout import Layout
from .recovery import examine
from .s3store import S3Store

TABLE_COLUMNS = ("input_lines", "malformed", "in_batch_duplicates", "cross_batch_duplicates", "output_rows")


def store_status(store: S3Store, config: Config, limit: int = 20) -> dict[str, Any]:
    layout = Layout(config.layout)
    report = examine(store, config)
    status: dict[str, Any] = {"consistent": report.consistent, "problems": report.problems,
                              "pending": report.actions, "head_version": None, "batches": []}
    if not report.consistent:
        return status
    state = load_committed_state(store, layout)
    status["head_version"] = state.version
    for version in range(state.version, max(0, state.version - limit), -1):
        record = read_commit(store, layout, version)
        assert record is not None
        status["batches"].append({
            "version": record.version, "batch_id": record.batch_id, "as_of": record.as_of,
            "counts": dict(record.counts),
            "outputs": [store.uri(o.key) for o in record.objects if o.kind == "data"],
        })
    status["batches"].reverse()
    return status


def format_status(status: dict[str, Any]) -> str:
    lines = [f"store: {'consistent' if status['consistent'] else 'INCONSISTENT'}"
             + (f", log at version {status['head_version']}" if status["head_version"] is not None else "")]
    lines += [f"  problem: {p}" for p in status["problems"]] + [f"  pending: {p}" for p in status["pending"]]
    if status["batches"]:
        lines.append(format_batch_table([(b["version"], b["batch_id"], b["counts"]) for b in status["batches"]]))
    return "\n".join(lines)


def format_batch_table(rows: list[tuple[int, str, dict[str, int]]]) -> str:
    headers = ("version", "batch") + TABLE_COLUMNS
    body = [(str(v), b) + tuple(str(counts.get(c, 0)) for c in TABLE_COLUMNS) for v, b, counts in rows]
    widths = [max(len(r[i]) for r in [headers, *body]) for i in range(len(headers))]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    return "\n".join([fmt.format(*headers)] + [fmt.format(*r) for r in body])
