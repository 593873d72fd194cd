"""Which committed history a batch checks its events against: whose cache entries, by arrival.

Cache entries live `window_hours` from the arrival of the batch that wrote them, whatever their
events' times (Flink's state TTL from arrival, Amplitude's arrival-day filters): a batch sees the
entries of every batch that arrived within one window before it, in every hour, so a re-sent old
event is caught while its original is in the window.

When a batch arrives (`arrival_hour`, recorded in its commit) is log time, not a clock's:
- an interval batch arrives at its interval's end hour, never before the latest interval's
  arrival;
- any other batch (by prefix, a sweep, a populate, one by `--since/--until` under an id of its
  own) arrives at the log's time: the latest interval's arrival. Its as_of is a clock, which
  during a catch-up runs days ahead of the intervals being backfilled; arriving there, it would
  move every interval after it to that hour too and shrink their windows. Only a log with no
  interval batch yet lets a manual batch's clock set its arrival (never before the latest);
- no batch's window starts before the log's horizon (the entries before it have left the
  state): a window is as long as the state allows.

A rerun of a committed batch sees exactly what its commit recorded (its window start) and hides
the runs of itself and of every batch committed after it, so it reproduces its output byte for
byte. A rerun whose window start is before the log's horizon is refused: entries it saw have
expired, so it can no longer be reproduced.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from eventdedup.column_types import DeclaredColumn
from eventdedup.commit.log import committed_record, committed_version
from eventdedup.commit.state import CommittedState, record_arrival_hour
from eventdedup.errors import ExpiredHistoryError
from eventdedup.keys import hour_index_at, hour_text
from eventdedup.layout import Layout
from eventdedup.s3store import ObjectInfo, S3Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchHistory:
    base_version: int  # the log version the batch is computed against; it commits base_version + 1
    arrival_hour: int  # the batch's arrival (its id guard's hour); its commit records it
    window_start_hour: int  # entries of batches that arrived before this hour are invisible to it
    retain_from_hour: int  # what the batch's commit records as its horizon: one window before its start
    # Owners whose runs the batch sees (owner -> commit version, the order of their runs): committed
    # before it and arrived at or after its window start.
    visible_owners: Mapping[str, int] = field(default_factory=dict)
    # Owners whose runs its new cache heads carry forward: every batch still in the state and
    # committed before it (a rerun's own run and later ones are never copied).
    kept_owners: frozenset[str] = frozenset()
    # A rerun's inputs as its commit recorded them (the ledger's decision, reproduced without
    # consulting the ledger); None for a new batch, or a commit older than the ledger.
    recorded_inputs: frozenset[ObjectInfo] | None = None
    # A rerun's dedup partitions as its commit recorded them (they lay out its output files).
    recorded_partitions: int | None = None
    # A rerun's [dedup] mode as its commit recorded it (what it output and audited follows it).
    recorded_mode: str | None = None
    # A rerun's declared columns and on_mismatch as its commit recorded them (its files carry them).
    recorded_columns: tuple[DeclaredColumn, ...] | None = None
    recorded_on_mismatch: str | None = None

    def guard_hours(self, arrivals: Mapping[str, int]) -> tuple[int, ...]:
        """The arrival hours whose id guards may name an hour holding a visible batch's id: from
        the window's start to the latest arrival of any batch it sees (arrivals need not grow
        along the log: a batch it sees may have arrived after it), its own included."""
        return tuple(range(self.window_start_hour, self._last_arrival(arrivals) + 1))

    def guard_days(self, arrivals: Mapping[str, int]) -> tuple[int, ...]:
        """The arrival days of the same span: where day guards (format 1, one per arrival day) are
        kept (docs/formats.md)."""
        return tuple(range(self.window_start_hour // 24, self._last_arrival(arrivals) // 24 + 1))

    def _last_arrival(self, arrivals: Mapping[str, int]) -> int:
        return max([self.arrival_hour, *(arrivals.get(owner, self.arrival_hour) for owner in self.visible_owners)])


def history_for_batch(store: S3Store, layout: Layout, state: CommittedState, batch_id: str, as_of: datetime,
                      window_hours: int, interval: bool) -> BatchHistory:
    own_version = committed_version(store, layout, state, batch_id)
    if own_version is not None:
        return _rerun_history(store, layout, state, batch_id, own_version, window_hours)
    arrival = arrival_hour(state, as_of, window_hours, interval)
    if arrival != hour_index_at(as_of):
        log.info("batch %s (as of %s) arrives at %s in log time: its cache window is measured from there", batch_id,
                 as_of.isoformat(), hour_text(arrival))
    start = arrival - window_hours
    return BatchHistory(state.version, arrival, start, start - window_hours,
                        _visible(state, start, state.version + 1), frozenset(state.batches))


def arrival_hour(state: CommittedState, as_of: datetime, window_hours: int, interval: bool) -> int:
    """When a new batch arrives, in log time (the rules above)."""
    floors = [] if state.retain_from_hour is None else [state.retain_from_hour + window_hours]
    if interval:
        candidates = [hour_index_at(as_of), *floors]
        if state.latest_interval_arrival_hour is not None:
            candidates.append(state.latest_interval_arrival_hour)
        return max(candidates)
    if state.latest_interval_arrival_hour is not None:
        return max(state.latest_interval_arrival_hour, *floors)
    return max([hour_index_at(as_of), *floors, *([] if state.latest_arrival_hour is None else
                                                 [state.latest_arrival_hour])])


def _visible(state: CommittedState, window_start: int, own_version: int) -> dict[str, int]:
    """Batches committed before `own_version` that arrived at or after the window start (a batch
    without a known arrival, from an older checkpoint, is seen: never fewer checks; docs/formats.md)."""
    return {owner: version for owner, version in state.batches.items()
            if version < own_version and state.arrivals.get(owner, window_start) >= window_start}


def _rerun_history(store: S3Store, layout: Layout, state: CommittedState, batch_id: str, own_version: int,
                   window_hours: int) -> BatchHistory:
    log.info("batch %s is already committed at version %d; recomputing against its own history", batch_id,
             own_version)
    if batch_id not in state.batches:
        raise ExpiredHistoryError(
            f"batch {batch_id} was committed at log version {own_version}, but its window has expired (cache entries "
            f"that arrived before {hour_text(state.retain_from_hour)} are gone): it can no longer be recomputed. Its "
            "commit stands; to reprocess its input, run it as a new batch id"
        )
    record = committed_record(store, layout, own_version)
    change = record.batch_change
    if change is None:
        raise ExpiredHistoryError(f"{batch_id} (log version {own_version}) is a {record.change.KIND}, not a batch: "
                                  "there is nothing to recompute")
    if not change.arrival_windows:
        raise ExpiredHistoryError(
            f"batch {batch_id} (log version {own_version}) was committed before cache windows were measured by "
            "arrival and copies were found across hours: recomputed today it would see other history, so it can "
            "no longer be recomputed exactly. Its commit stands"
        )
    if change.partitions is None:
        raise ExpiredHistoryError(
            f"batch {batch_id} (log version {own_version}) was committed before its dedup partitions were recorded: "
            "its output files were laid out by an earlier version, so a recomputation cannot reproduce them byte "
            "for byte. Its commit stands"
        )
    arrival = record_arrival_hour(record)
    start = change.window_start_hour if change.window_start_hour is not None else arrival - window_hours
    if state.retain_from_hour is not None and start < state.retain_from_hour:
        raise ExpiredHistoryError(
            f"batch {batch_id} (log version {own_version}) saw cache entries that arrived from {hour_text(start)}, "
            f"but entries that arrived before {hour_text(state.retain_from_hour)} have expired: it can no longer be "
            "recomputed exactly"
        )
    retain = change.retain_from_hour if change.retain_from_hour is not None else start - window_hours
    recorded = None if change.ledger_update is None else frozenset(change.ledger_update.inputs)
    kept = frozenset(owner for owner, version in state.batches.items() if version < own_version)
    return BatchHistory(own_version - 1, arrival, start, retain, _visible(state, start, own_version), kept, recorded,
                        change.partitions, change.mode, change.columns, change.on_mismatch)

