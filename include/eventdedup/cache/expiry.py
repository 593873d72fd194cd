"""Cache expiry: delete cache objects nothing can read any more, as the commit log decides.

Two kinds of cache object (hour segment or id guard) are garbage:
- superseded ones: a key's chain (its head and the older objects it builds on:
  eventdedup.cache.heads) holds every live run (or id) of the key, and every reader (new batch
  or rerun) loads only chains: an object of the key outside its chain was merged into a newer one;
- expired ones: the folded state drops a head once every batch that wrote it arrived before the
  log's horizon (`CommittedState.retain_from_hour`), one window before the newest window start.
  No new batch sees entries that old, and no batch that can still be recomputed saw them.

The horizon is log time (arrival hours), not the wall clock: a maintenance run during an outage,
a backfill behind it or a manual batch committed late cannot make expiry delete what the next
batch reads, and expiry and the state agree on which heads exist. Objects are judged only for
committed owners; those of a batch not committed (a promotion in flight) are left alone.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from eventdedup.commit.log import committed_version, load_committed_state
from eventdedup.commit.state import CommittedState
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
        return (f"deleted {len(self.superseded)} superseded and {len(self.expired)} expired cache objects "
                f"(expired arrivals: {cutoff}); kept {self.kept}")


def expire_cache(store: S3Store, config: Config, apply: bool = True) -> ExpiryReport:
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    horizon = state.retain_from_hour
    report = ExpiryReport(None if horizon is None else CacheKey.of_hour(horizon, 0).hour_start)
    heads = state.cache_objects()
    committed: dict[str, bool] = {}  # one lookup per owner (a GET only for owners that left the state)
    for item in store.list(config.layout.cache_prefix):
        found = layout.cache_object_of(item.key)
        if found is None or item.key in heads or not _is_committed(store, layout, state, found[0], committed):
            report.kept += 1  # a foreign object, a head, or a promotion in flight
        elif found[1] in state.cache_heads:
            report.superseded.append(item.key)
        else:
            report.expired.append(item.key)
    if apply:
        store.delete_keys(report.superseded + report.expired)
    log.info("cache expiry: %s", report.summary())
    return report


def _is_committed(store: S3Store, layout: Layout, state: CommittedState, owner: str, known: dict[str, bool]) -> bool:
    if owner not in known:
        known[owner] = committed_version(store, layout, state, owner) is not None
    return known[owner]
