"""What a scheduler needs from eventdedup, without importing one: batch ids for data intervals,
run-order rules, the consistency gate, and alert records.

The Airflow DAGs call these; each task body stays one or two calls.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson

from .commit_log import CommittedState, load_committed_state, read_commit
from .config import Config
from .errors import EventDedupError, InconsistentStoreError, OutOfOrderBatchError
from .layout import Layout
from .recovery import RecoveryReport, examine, recover
from .s3store import S3Store

log = logging.getLogger(__name__)

# Scheduled batch ids name their data interval's start.
_INTERVAL_ID = re.compile(r"\d{8}T\d{4}(\d{2})?Z")


def batch_id_for_interval(start: datetime) -> str:
    """'20261122T0500Z' for an interval starting 2026-11-22 05:00 UTC ('…T050004Z' when it does
    not start on a minute): deterministic, so a retried or cleared run reuses the same batch."""
    start = start.astimezone(timezone.utc)
    return start.strftime("%Y%m%dT%H%M%SZ" if start.second else "%Y%m%dT%H%MZ")


def interval_start_of(batch_id: str) -> datetime | None:
    """Inverse of batch_id_for_interval; None for a manual batch id."""
    if not _INTERVAL_ID.fullmatch(batch_id):
        return None
    pattern = "%Y%m%dT%H%M%SZ" if len(batch_id) == 16 else "%Y%m%dT%H%MZ"
    return datetime.strptime(batch_id, pattern).replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class IntervalBatch:
    batch_id: str
    since: datetime
    until: datetime
    previous_batch_id: str  # the batch of the interval just before

    @classmethod
    def for_interval(cls, start: datetime, end: datetime) -> IntervalBatch:
        length = end - start
        if length <= timedelta(0):
            raise OutOfOrderBatchError(f"data interval {start.isoformat()} .. {end.isoformat()} is empty")
        return cls(batch_id_for_interval(start), start, end, batch_id_for_interval(start - length))


def check_run_order(store: S3Store, config: Config, batch: IntervalBatch) -> None:
    """An interval batch commits only on top of its predecessor, and never behind a later one.

    Without this, a cleared or backfilled run could commit an older interval after a newer one,
    and events the newer batch already emitted would reappear (or vanish) against a history that
    does not match the order they happened in. The first interval batch of a store may start
    anywhere. Manual batches with free-form ids are not ordered (they are still serialised by
    the commit log)."""
    state = load_committed_state(store, Layout(config.layout))
    if batch.batch_id in state.batches:
        return  # a rerun of a committed batch is a no-op
    starts = {b: interval_start_of(b) for b in state.batches}
    committed = sorted((b for b, start in starts.items() if start is not None), key=lambda b: starts[b])
    later = [b for b in committed if starts[b] > batch.since]  # type: ignore[operator]
    if later:
        raise OutOfOrderBatchError(
            f"batch {batch.batch_id} is older than the committed batch {later[0]}; batches may only move forward "
            f"in time (a backwards backfill or a cleared old run is refused). Process a newer interval instead"
        )
    if committed and batch.previous_batch_id not in state.batches:
        raise OutOfOrderBatchError(
            f"batch {batch.batch_id} must wait: batch {batch.previous_batch_id} (the interval before it) must commit "
            f"first; the last committed interval batch is {committed[-1]}"
        )


def consistency_gate(store: S3Store, config: Config) -> RecoveryReport:
    """Diagnose without repairing; raise if anything is unfinished or inconsistent.

    The pipeline does not repair itself between runs: an unfinished promotion means a run died
    in the one step that must be atomic, and a person should look before it is rolled forward.
    `eventdedup recover` (which finishes or abandons it) reopens the pipeline."""
    report = examine(store, config)
    if report.cleanups and not (report.problems or report.actions):
        report = recover(store, config)  # only leftovers of committed batches: tidy and go on
    if report.problems or report.actions:
        findings = [f"inconsistent: {p}" for p in report.problems] + [f"unfinished: {a}" for a in report.actions]
        raise InconsistentStoreError(
            "the pipeline is halted until `eventdedup recover` succeeds:\n  " + "\n  ".join(findings)
        )
    return report


def committed_counts(store: S3Store, config: Config, batch_id: str) -> dict[str, Any]:
    """The commit record's summary of a committed batch: version, counts, output objects."""
    layout = Layout(config.layout)
    state: CommittedState = load_committed_state(store, layout)
    if batch_id not in state.batches:
        raise EventDedupError(f"batch {batch_id} is not committed")
    record = read_commit(store, layout, state.batches[batch_id])
    assert record is not None
    return {"batch_id": batch_id, "version": record.version, "counts": dict(record.counts),
            "data_objects": sum(1 for obj in record.objects if obj.kind == "data")}


@dataclass(frozen=True)
class Alert:
    """A failed promotion or a halted pipeline, as written to alerts/<batch_id>.json and the log."""

    batch_id: str
    kind: str  # promotion_failed | pipeline_halted
    message: str
    run_id: str
    at: str

    @classmethod
    def now(cls, batch_id: str, kind: str, message: str, run_id: str) -> Alert:
        return cls(batch_id, kind, message, run_id, datetime.now(timezone.utc).isoformat())

    def to_json(self) -> dict[str, str]:
        return {"batch_id": self.batch_id, "kind": self.kind, "message": self.message, "run_id": self.run_id,
                "at": self.at}

    @property
    def subject(self) -> str:
        return f"eventdedup {self.kind.replace('_', ' ')}: batch {self.batch_id}"


def record_alert(store: S3Store, config: Config, alert: Alert) -> str:
    """Write the alert object and the structured log line; returns the object's URI."""
    key = Layout(config.layout).alert(alert.batch_id)
    store.put_bytes(key, orjson.dumps(alert.to_json(), option=orjson.OPT_INDENT_2), content_type="application/json")
    log.error("EVENTDEDUP_ALERT %s", orjson.dumps({**alert.to_json(), "object": store.uri(key)}).decode())
    return store.uri(key)
