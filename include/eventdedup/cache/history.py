"""Which committed history a batch checks its events against: which hours, and whose runs.

A new batch checks the hours from its window start (its as_of minus `window_hours`), but never
before the log's expiry horizon (`CommittedState.retain_from_hour`): hours before it have left
the state and maintenance deletes their segments. A batch that lags the log by more than a
window therefore processes its events of expired hours without a cache, as it does events older
than its own window (counted `older_than_window`, never dropped for age), and says so in its log.

A rerun of a committed batch checks exactly the hours its commit recorded and hides the runs of
itself and of every batch committed after it, so it reproduces its output byte for byte. A rerun
whose recorded hours have expired is refused: it can no longer be reproduced.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from eventdedup.commit.log import CommittedState, committed_record, committed_version
from eventdedup.errors import ExpiredHistoryError
from eventdedup.keys import CacheKey, hour_index_at
from eventdedup.layout import Layout
from eventdedup.s3store import ObjectInfo, S3Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchHistory:
    base_version: int  # the log version the batch is computed against; it commits base_version + 1
    window_start_hour: int  # hours before this one are processed without a cache
    retain_from_hour: int  # what the batch's commit records as its horizon
    # Runs of these batches are invisible: a rerun's own and those committed after it. Every other
    # run in a committed head belongs to a committed batch the computation may see.
    hidden_owners: frozenset[str]
    # A rerun's inputs as its commit recorded them (the ledger's decision, reproduced without
    # consulting the ledger); None for a new batch, or a commit older than the ledger.
    recorded_inputs: frozenset[ObjectInfo] | None = None


def history_for_batch(store: S3Store, layout: Layout, state: CommittedState, batch_id: str, as_of: datetime,
                      window_hours: int) -> BatchHistory:
    own_version = committed_version(store, layout, state, batch_id)
    if own_version is not None:
        return _rerun_history(store, layout, state, batch_id, own_version, as_of, window_hours)
    own_start = hour_index_at(as_of - timedelta(hours=window_hours))
    start = own_start if state.retain_from_hour is None else max(own_start, state.retain_from_hour)
    if start > own_start:
        log.warning(
            "batch %s (as of %s) lags the log by more than its window: its window starts at %s, but cache hours "
            "before %s have expired (the newest committed window starts a window after them). Its events before "
            "%s are processed without a duplicate check and counted as older_than_window; to check such batches, "
            "run them before the log moves a window past them, or raise [dedup] window_hours",
            batch_id, as_of.isoformat(), _hour_text(own_start), _hour_text(start), _hour_text(start))
    return BatchHistory(state.version, start, start - window_hours, frozenset())


def _rerun_history(store: S3Store, layout: Layout, state: CommittedState, batch_id: str, own_version: int,
                   as_of: datetime, window_hours: int) -> BatchHistory:
    log.info("batch %s is already committed at version %d; recomputing against its own history", batch_id,
             own_version)
    if batch_id not in state.batches:
        raise ExpiredHistoryError(
            f"batch {batch_id} was committed at log version {own_version}, but its window has expired (cache hours "
            f"before {_hour_text(state.retain_from_hour)} are gone): it can no longer be recomputed. Its commit "
            "stands; to reprocess its input, run it as a new batch id"
        )
    record = committed_record(store, layout, own_version)
    start = record.window_start_hour
    if start is None:  # committed before window starts were recorded
        start = hour_index_at(as_of - timedelta(hours=window_hours))
    if state.retain_from_hour is not None and start < state.retain_from_hour:
        raise ExpiredHistoryError(
            f"batch {batch_id} (log version {own_version}) checked cache hours from {_hour_text(start)}, but hours "
            f"before {_hour_text(state.retain_from_hour)} have expired: it can no longer be recomputed exactly"
        )
    hidden = frozenset(b for b, version in state.batches.items() if version >= own_version)
    retain = record.retain_from_hour if record.retain_from_hour is not None else start - window_hours
    recorded = None if record.ledger_update is None else frozenset(record.ledger_update.inputs)
    return BatchHistory(own_version - 1, start, retain, hidden, recorded)


def _hour_text(hour_index: int | None) -> str:
    if hour_index is None:
        return "(none)"
    return CacheKey.of_hour(hour_index, 0).hour_start.strftime("%Y-%m-%dT%H:00Z")
