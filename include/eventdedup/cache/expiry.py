"""Cache expiry: delete cache segments nothing can read any more, as the commit log decides.

Two kinds of segment are garbage:
- superseded ones: copy-forward means a key's head segment holds every run of the segments
  before it, and every reader (new batch or rerun) loads only heads;
- segments of hours before the log's expiry horizon (`CommittedState.retain_from_hour`): the
  newest committed window start minus one window. The folded state has already dropped their
  heads, no new batch checks them (eventdedup.cache.history) and no batch that can still be
  recomputed read them.

The horizon is log time, not the wall clock: a maintenance run during an outage, a backfill
behind it or a manual batch committed late cannot make expiry delete what the next batch reads,
and expiry and the state agree on which hours exist. Superseded segments are judged only for
committed batches; segments of batches not committed (a promotion in flight) are left alone
unless their hour has expired, when no promotion can commit them any more (it would be stale).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from eventdedup.commit.log import CommittedState, committed_version, load_committed_state
from eventdedup.config import Config
from eventdedup.keys import CacheKey
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store

log = logging.getLogger(__name__)


@dataclass
class ExpiryReport:
    cutoff_hour_start: datetime | None  # None: nothing has expired yet
    superseded: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    kept: int = 0

    def summary(self) -> str:
        cutoff = "none yet" if self.cutoff_hour_start is None else f"before {self.cutoff_hour_start.isoformat()}"
        return (f"deleted {len(self.superseded)} superseded and {len(self.expired)} expired cache segments "
                f"(expired hours: {cutoff}); kept {self.kept}")


def expire_cache(store: S3Store, config: Config, apply: bool = True) -> ExpiryReport:
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    horizon = state.retain_from_hour
    report = ExpiryReport(None if horizon is None else CacheKey.of_hour(horizon, 0).hour_start)
    heads = set(state.cache_heads.values())
    committed: dict[str, bool] = {}  # one lookup per owner (a GET only for owners that left the state)
    for item in store.list(config.layout.cache_prefix):
        segment = layout.segment_owner_and_key(item.key)
        if segment is None:
            report.kept += 1  # not ours to judge: a foreign object
        elif horizon is not None and segment[1].hour_index < horizon:
            report.expired.append(item.key)
        elif item.key not in heads and _is_committed(store, layout, state, segment[0], committed):
            report.superseded.append(item.key)
        else:
            report.kept += 1
    if apply:
        store.delete_keys(report.superseded + report.expired)
    log.info("cache expiry: %s", report.summary())
    return report


def _is_committed(store: S3Store, layout: Layout, state: CommittedState, owner: str, known: dict[str, bool]) -> bool:
    if owner not in known:
        known[owner] = committed_version(store, layout, state, owner) is not None
    return known[owner]
