"""`eventdedup status`: committed batches, their counts and outputs, and whether the store is consistent."""
from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from typing import Any

from deltalake.exceptions import DeltaError

from eventdedup.commit.changes import BatchChange, Reshard, Retraction
from eventdedup.commit.ledger_reader import LedgerReader, consumed_predicate
from eventdedup.commit.log import batch_record, committed_record, load_committed_state
from eventdedup.commit.state import CommittedState
from eventdedup.config import Config
from eventdedup.counts import BatchCounts
from eventdedup.delta.projection import table_status
from eventdedup.errors import EventDedupError
from eventdedup.inputs.landing import unconsumed_in_range
from eventdedup.keys import hour_text
from eventdedup.layout import Layout
from eventdedup.promotion.recovery import examine
from eventdedup.s3store import S3Store

log = logging.getLogger(__name__)

TABLE_COLUMNS = BatchCounts.SUMMARY


def store_status(store: S3Store, config: Config, now: datetime, limit: int = 20) -> dict[str, Any]:
    layout = Layout(config.layout)
    report = examine(store, config)
    # Pending: what `recover` would do, the leftovers of committed batches (a lagging Delta table) too.
    status: dict[str, Any] = {"consistent": report.consistent, "problems": report.problems,
                              "pending": report.actions + report.cleanups, "head_version": None, "batches": []}
    if not report.consistent:
        return status
    state = load_committed_state(store, layout)
    status["head_version"] = state.version
    try:
        status["table"] = table_status(store, config, state).to_json()
    except (DeltaError, OSError, ValueError, RuntimeError, EventDedupError) as exc:
        status["table"] = {"location": config.layout.output_prefix, "error": str(exc), "exists": True,
                           "mode": config.table.delta, "lag": None}
    status["ledger"] = ledger_lag(store, config, state, now)
    if state.columns:  # the output's declared columns, as the log's latest commit recorded them
        status["columns"] = [{"name": c.name, "type": c.data_type, "path": c.path_text} for c in state.columns]
    for version in range(state.version, max(0, state.version - limit), -1):
        record = committed_record(store, layout, version)
        entry: dict[str, Any] = {
            "version": record.version, "batch_id": record.batch_id, "as_of": record.as_of,
            # An operation's own figures where a batch has its counts (its counts are all zero).
            "counts": dict(record.counts) if isinstance(record.change, BatchChange) else record.change.figures,
            "outputs": [store.uri(o.key) for o in record.objects if o.kind == "data"],
        }
        if isinstance(record.change, BatchChange) and record.change.column_figures is not None:
            entry["columns"] = {name: {"mismatched": f.mismatched, "nulls": f.nulls}
                                for name, f in record.change.column_figures.items()}
        if record.batch_id in state.retracted:
            entry["retracted_at_version"] = state.retracted[record.batch_id]
        if isinstance(record.change, Retraction):
            entry.update(retracts=list(record.change.retracts), reason=record.change.reason)
        if isinstance(record.change, Reshard):
            entry["reshard"] = {"from_hour": record.change.from_hour, "from": hour_text(record.change.from_hour),
                                "buckets": record.change.buckets}
        status["batches"].append(entry)
    status["batches"].reverse()
    return status


def ledger_lag(store: S3Store, config: Config, state: CommittedState, now: datetime) -> dict[str, Any]:
    """How far ingestion lags: landing objects of the lookback before `now` that no batch consumed
    (older ones are the sweep's), the oldest of them, and the ledger's size."""
    start = now - timedelta(hours=config.inputs.lookback_hours)
    ledger = LedgerReader(store, state.ledger, Layout(config.layout))
    waiting, _ = unconsumed_in_range(store, config, start, now, consumed_predicate(ledger, state.version, None))
    oldest = min(waiting, key=lambda info: info.last_modified or now, default=None)
    return {"unconsumed": len(waiting), "oldest_unconsumed": None if oldest is None else oldest.key,
            "oldest_unconsumed_last_modified": None if oldest is None or oldest.last_modified is None
            else oldest.last_modified.isoformat(),
            "ledger_entries": state.ledger.entry_count, "lookback_hours": config.inputs.lookback_hours}


def format_status(status: dict[str, Any]) -> str:
    lines = [f"store: {'consistent' if status['consistent'] else 'INCONSISTENT'}"
             + (f", log at version {status['head_version']}" if status["head_version"] is not None else "")]
    lag = status.get("ledger")
    if lag is not None:
        lines.append(f"  ingestion: {lag['unconsumed']} landing object(s) of the last {lag['lookback_hours']} h wait"
                     + (f" (oldest {lag['oldest_unconsumed']}, {lag['oldest_unconsumed_last_modified']})"
                        if lag["oldest_unconsumed"] else "") + f"; {lag['ledger_entries']} ledger entries")
    table = status.get("table")
    if table is not None and "error" in table:
        lines.append(f"  Delta table {table['location']}: cannot be read: {table['error']}")
    elif table is not None:
        lines.append(f"  Delta table {table['location']}: " + (
            f"version {table['table_version']}, reflects log version {table['projected_log_version']}"
            + (f" (lags by {table['lag']})" if table["lag"] else "") if table["exists"] else f"none ([table] delta = "
            f"\"{table['mode']}\")"))
    lines += [f"  problem: {p}" for p in status["problems"]] + [f"  pending: {p}" for p in status["pending"]]
    lines += column_lines(status.get("columns", []), status["batches"])
    if status["batches"]:
        lines.append(format_batch_table([(b["version"], b["batch_id"] + (" (retracted)" if "retracted_at_version" in b
                                                                         else ""), b["counts"])
                                         for b in status["batches"]]))
    return "\n".join(lines)


def column_lines(columns: list[dict[str, str]], batches: list[dict[str, Any]]) -> list[str]:
    """The declared columns, each with its mismatch and null rates over the output rows of the
    batches listed that recorded it (a column added later is not measured against the batches
    before it; docs/delta-table.md, "Typed columns")."""
    if not columns:
        return []
    counted = [b for b in batches if "columns" in b]
    lines = [f"  declared columns (rates over the output rows of the {len(counted)} batch(es) listed that "
             "recorded each):"]
    for column in columns:
        recorded = [b for b in counted if column["name"] in b["columns"]]
        rows = sum(b["counts"].get("output_rows", 0) for b in recorded)
        mismatched = sum(b["columns"][column["name"]].get("mismatched", 0) for b in recorded)
        nulls = sum(b["columns"][column["name"]].get("nulls", 0) for b in recorded)
        lines.append(f"    {column['name']} {column['type']} (from {column['path']}): mismatched {mismatched}"
                     f" ({_rate(mismatched, rows)}), null {nulls} ({_rate(nulls, rows)}) of {rows} row(s) in "
                     f"{len(recorded)} batch(es)")
    return lines


def _rate(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def format_batch_table(rows: list[tuple[int, str, dict[str, int]]]) -> str:
    headers = ("version", "batch") + TABLE_COLUMNS
    body = [(str(v), b) + tuple(str(counts.get(c, 0)) for c in TABLE_COLUMNS) for v, b, counts in rows]
    widths = [max(len(r[i]) for r in [headers, *body]) for i in range(len(headers))]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    return "\n".join([fmt.format(*headers)] + [fmt.format(*r) for r in body])


def committed_summary(store: S3Store, config: Config, batch_id: str) -> dict[str, Any]:
    """The commit record's summary of a committed batch: version, counts, output objects."""
    layout = Layout(config.layout)
    record = batch_record(store, layout, load_committed_state(store, layout), batch_id)
    return {"batch_id": batch_id, "version": record.version, "counts": dict(record.counts),
            "data_objects": sum(1 for obj in record.objects if obj.kind == "data")}


METRIC_PREFIX = "eventdedup."


def batch_metrics(store: S3Store, config: Config, batch_id: str,
                  stream: str | None = None) -> dict[str, dict[str, float]]:
    """A committed batch's metrics for dashboards (docs/operations.md, "Metrics"): every count as a
    counter `eventdedup.<count>`, and gauges of how far behind it ran and how late its copies came;
    a stream's named `eventdedup.<stream>.<metric>`, so that streams are told apart on any backend.

    Copy lags here are by arrival hour, from the folded state already in memory (an earlier batch's
    exact time is one more GET each, up to a window's worth of batches: the daily report pays that,
    not every batch): a copy whose kept copy's batch arrived `h` hours earlier lagged h - 1 to h + 1 hours.
    """
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    record = batch_record(store, layout, state, batch_id)
    prefix = METRIC_PREFIX if stream is None else f"{METRIC_PREFIX}{stream}."
    counters = {f"{prefix}{name}": float(value) for name, value in record.counts.results().items()}
    figures = record.change.column_figures if isinstance(record.change, BatchChange) else None
    for column, counted in (figures or {}).items():  # per declared column: its output rows that mismatched, null
        counters[f"{prefix}columns.{column}.mismatched"] = float(counted.mismatched)
        counters[f"{prefix}columns.{column}.nulls"] = float(counted.nulls)
    gauges: dict[str, float] = {}
    committed = store.head(layout.commit(record.version))
    if committed is not None and committed.last_modified is not None:
        latency = committed.last_modified - datetime.fromisoformat(record.as_of)
        gauges[f"{prefix}batch.latency_seconds"] = latency.total_seconds()
    change, arrival = record.change, state.arrivals.get(batch_id)
    # decided_against counts a changelog batch's updates too, which are new versions, not copies:
    # then no copy-lag gauge is sent (the daily report reads such a batch's holders from its audit).
    if (isinstance(change, BatchChange) and change.decided_against is not None and arrival is not None
            and not record.counts.updates):
        hours = [(arrival - state.arrivals[holder], copies) for holder, copies in change.decided_against.items()
                 if holder in state.arrivals]
        gauges[f"{prefix}copy_lag.max_arrival_hours"] = float(max((h for h, _ in hours), default=0))
        gauges[f"{prefix}copy_lag.copies_over_24_arrival_hours"] = float(sum(n for h, n in hours if h > 24))
        gauges[f"{prefix}copy_lag.earlier_batches"] = float(len(change.decided_against))
    return {"counters": counters, "gauges": gauges}


def log_batch_metrics(summary: dict[str, Any]) -> None:
    """One machine-readable line (EVENTDEDUP_METRICS) and one for people."""
    counts = summary["counts"]
    log.info("EVENTDEDUP_METRICS %s", json.dumps(summary, sort_keys=True))
    log.info("batch %s (log version %d): %d input lines, %d output rows, %d in-batch and %d cross-batch duplicates "
             "dropped, %d quarantined", summary["batch_id"], summary["version"], counts.get("input_lines", 0),
             counts.get("output_rows", 0), counts.get("in_batch_duplicates", 0),
             counts.get("cross_batch_duplicates", 0), counts.get("malformed", 0))
