"""Grow the cache's bucket count with a cut-over: `eventdedup reshard --buckets N`.

`buckets` is part of the cache identity: changed in the configuration alone, every key would map
to another segment and every retransmission would look new. A reshard commits a cut-over to the
log instead (eventdedup.cache.epochs): from an hour boundary on, hour segments have N buckets; the
hours before keep their count and their history, read as they were written. Nothing is rewritten.

The cut-over hour is one that no committed segment reaches and no batch committed so far can
write: after every head in the state and after the log's latest arrival plus the hours an event
may lie in the future (`[events] max_future_hours`). A batch computed before the reshard commits
no more (its promotion finds the log moved on and refuses it as stale), so every hour is written
with one count only. Reruns of earlier batches read and write hours before the cut-over only, as
their commits did, and group by the same (first) count: byte for byte the same.

A reshard is committed like a batch (staged job result, journal, conditional commit), so a crash
anywhere recovers like a promotion. A configuration that sets `[dedup] buckets` must then set N:
until then, batches refuse to run with the old count; one that leaves it unset follows the cache.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from eventdedup.cache.identity import recorded_epochs
from eventdedup.commit.changes import Reshard
from eventdedup.commit.gate import refuse_if_other_journals
from eventdedup.commit.job_result import JobResult
from eventdedup.commit.journal import journal_or_none
from eventdedup.commit.log import committed_record, load_committed_state
from eventdedup.commit.state import CommittedState, log_time
from eventdedup.config import Config
from eventdedup.counts import BatchCounts
from eventdedup.errors import ConfigError
from eventdedup.keys import CacheKey, hour_index_at, hour_text, is_guard_head_key
from eventdedup.layout import Layout
from eventdedup.promotion.promote import promote_batch
from eventdedup.s3store import S3Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReshardOutcome:
    reshard_id: str
    version: int
    from_hour: int
    buckets: int
    newly_committed: bool

    @property
    def from_text(self) -> str:
        return hour_text(self.from_hour)


def earliest_cutover_hour(state: CommittedState, now: datetime, max_future_hours: int) -> int:
    """The first hour no committed segment reaches and no committed batch could have written."""
    latest = state.latest_arrival_hour if state.latest_arrival_hour is not None else hour_index_at(now)
    head_hours = [CacheKey.parse(name).hour_index for name in state.cache_heads if not is_guard_head_key(name)]
    return max([latest + max_future_hours, *head_hours]) + 1


def reshard_id(from_hour: int, buckets: int) -> str:
    return f"reshard-{CacheKey.of_hour(from_hour, 0).hour_start.strftime('%Y%m%dT%H')}Z-{buckets}"


def reshard(store: S3Store, config: Config, buckets: int, now: datetime,
            effective_from: datetime | None = None) -> ReshardOutcome:
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    epochs = recorded_epochs(store, layout, state.bucket_cutovers)
    if epochs is None:
        raise ConfigError("the cache has no identity yet (no batch ran): set [dedup] buckets before the first batch")
    if state.bucket_cutovers and state.bucket_cutovers[-1][1] == buckets:
        from_hour = state.bucket_cutovers[-1][0]
        rid = reshard_id(from_hour, buckets)
        version = state.batches.get(rid, state.version)
        return ReshardOutcome(rid, version, from_hour, buckets, False)
    earliest = earliest_cutover_hour(state, now, config.events.max_future_hours)
    from_hour = earliest if effective_from is None else _whole_hour(effective_from)
    if from_hour < earliest:
        raise ConfigError(
            f"a cut-over at {hour_text(from_hour)} is too early: committed batches may have written hours up to "
            f"{hour_text(earliest - 1)} with {epochs.current} buckets; the earliest cut-over is "
            f"{hour_text(earliest)}")
    epochs.with_cutover(from_hour, buckets)  # refuses a count that is not a whole multiple, or a cut-over too early
    rid = reshard_id(from_hour, buckets)
    if journal_or_none(store, layout, rid) is None:
        refuse_if_other_journals(store, layout, rid)
        result = JobResult(rid, state.version, log_time(state, now).isoformat(), BatchCounts(), (),
                           Reshard(from_hour, buckets))
        store.put_bytes(layout.job_result(rid), result.to_bytes(), content_type="application/json")
    outcome = promote_batch(store, config, rid)
    record = committed_record(store, layout, outcome.version)
    assert record.change == Reshard(from_hour, buckets)
    log.warning("resharded the cache to %d buckets from %s (log version %d)", buckets, hour_text(from_hour),
                outcome.version)
    return ReshardOutcome(rid, outcome.version, from_hour, buckets, outcome.newly_committed)


def _whole_hour(moment: datetime) -> int:
    if moment.tzinfo is None or moment.minute or moment.second or moment.microsecond:
        raise ConfigError(f"--effective-from {moment.isoformat()} must be a whole hour with a UTC offset")
    return hour_index_at(moment)

