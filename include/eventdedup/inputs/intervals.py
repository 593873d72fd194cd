"""Interval batches: the batch of one scheduler data interval, its id, and its predecessor.

An interval batch [since, until) takes the landing objects of its lookback (or of the interval,
if longer) visible before `until` that no batch consumed (eventdedup.inputs.landing and the
ingestion ledger), and its id names the interval's start, so a retried or cleared run reuses
the same batch. A batch whose id does not name its interval (or that selects a prefix) is a
manual batch: it is not ordered in time, only serialised by the commit log.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from eventdedup.errors import OutOfOrderBatchError
from eventdedup.inputs.selector import InputSelector

_INTERVAL_ID = re.compile(r"\d{8}T\d{4}(\d{2})?Z")


def batch_id_for_interval(start: datetime) -> str:
    """'20261122T050000Z' for an interval starting 2026-11-22 05:00:00 UTC: deterministic, so a
    retried or cleared run reuses the same batch, and fixed-width, so ids sort as their times do
    (a minute-only '…T0500Z' would sort after '…T050004Z')."""
    return start.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def interval_start_of(batch_id: str) -> datetime | None:
    """Inverse of batch_id_for_interval, and of the minute-only '…T0500Z' ids of older stores
    (docs/formats.md); None for a manual batch id."""
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

    @classmethod
    def of_request(cls, batch_id: str, selector: InputSelector) -> IntervalBatch | None:
        """The interval batch a request describes, or None for a manual batch."""
        if selector.since is None or selector.until is None or batch_id != batch_id_for_interval(selector.since):
            return None
        return cls.for_interval(selector.since, selector.until)
