"""Cache expiry: delete cache segments nothing inside the dedup window can still read.

Two kinds of segment are garbage:
- superseded ones: copy-forward means a key's head segment holds every run of the segments
  before it, and every reader (new batch or rerun) loads only heads;
- segments of hours before the oldest window still in use: a rerun of a batch recomputes it
  against the hours of *its* window (its as_of minus window_hours), so the cut-off is the
  oldest window among batches whose as_of lies inside the window, not simply now - window.

Only segments of committed batches are ever deleted, judged against one loaded log state: a
promotion in flight copies segments of a batch that is not committed yet, and they are left alone.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from eventdedup.commit.log import committed_record, load_committed_state
from eventdedup.config import Config
from eventdedup.keys import hour_index_at
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store

log = logging.getLogger(__name__)


@dataclass
class ExpiryReport:
    cutoff_hour_start: datetime
    superseded: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    kept: int = 0

    def summary(self) -> str:
        return (f"deleted {len(self.superseded)} superseded and {len(self.expired)} expired cache segments "
                f"(hours before {self.cutoff_hour_start.isoformat()}); kept {self.kept}")


def expire_cache(store: S3Store, config: Config, now: datetime, apply: bool = True) -> ExpiryReport:
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    window = timedelta(hours=config.dedup.window_hours)
    cutoff = _oldest_window_start(store, layout, state.batches, now - window, window)
    report = ExpiryReport(cutoff)
    heads = set(state.cache_heads.values())
    for item in store.list(config.layout.cache_prefix):
        key = item.key
        segment = layout.segment_owner_and_key(key)
        if segment is None or segment[0] not in state.batches:
            report.kept += 1  # not ours to judge: an in-flight promotion, or a foreign object
        elif segment[1].hour_index < hour_index_at(cutoff):
            report.expired.append(key)
        elif key not in heads:
            report.superseded.append(key)
        else:
            report.kept += 1
    if apply:
        store.delete_keys(report.superseded + report.expired)
    log.info("cache expiry: %s", report.summary())
    return report


def _oldest_window_start(store: S3Store, layout: Layout, batches: Mapping[str, int],
                         window_start: datetime, window: timedelta) -> datetime:
    """The earliest hour any batch committed inside the window may read when it is rerun."""
    oldest = window_start
    for version in sorted(batches.values(),
                          reverse=True):  # newest first: stop at the first batch older than the window
        as_of = datetime.fromisoformat(committed_record(store, layout, version).as_of)
        if as_of < window_start:
            break
        oldest = min(oldest, as_of - window)
    return oldest.replace(minute=0, second=0, microsecond=0)

