"""What a listing may take, given the ingestion ledger a batch is staged or computed against.

- An object the ledger holds (same key and ETag) is consumed.
- An object dated before the ledger's legacy floor is consumed: a log that had commits before
  the ledger existed consumed by the earlier rule every landing object with LastModified before
  the end of its latest interval. The first commit that keeps a ledger records that floor.
- A listing never reaches below the ledger's horizon (plus the hour a producer's clock may run
  ahead): below it, entries have left the state, and an object consumed there would look new
  (raising `lookback_hours` or `sweep_hours` must not re-take what the ledger has forgotten).
"""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from eventdedup.commit.ledger import LedgerUpdate
from eventdedup.commit.log import CommittedState
from eventdedup.config import Config
from eventdedup.inputs.manifest import BatchManifest, load_batch_manifest_or_none
from eventdedup.keys import CacheKey, hour_index_at
from eventdedup.layout import Layout
from eventdedup.s3store import ObjectInfo, S3Store


def listing_floor(state: CommittedState) -> datetime | None:
    horizon = state.ledger.retain_from_hour
    return None if horizon is None else CacheKey.of_hour(horizon + 2, 0).hour_start


def legacy_floor(store: S3Store, layout: Layout, state: CommittedState) -> datetime | None:
    """The end of the latest interval committed before the ledger existed (None: no such log)."""
    if state.ledger.legacy_floor is not None:
        return datetime.fromisoformat(state.ledger.legacy_floor)
    if state.ledger.started or state.latest_interval_batch_id is None:
        return None
    manifest = load_batch_manifest_or_none(store, layout, state.latest_interval_batch_id)
    return None if manifest is None else manifest.selector.until


def consumed_predicate(state: CommittedState, floor: datetime | None) -> Callable[[ObjectInfo], bool]:
    """Whether a listed object is consumed as of the state (for a batch committing on top of it)."""
    def consumed(info: ObjectInfo) -> bool:
        if floor is not None and info.last_modified is not None and info.last_modified < floor:
            return True
        return state.ledger.consumed_before(info, state.version + 1) is not None
    return consumed


def ledger_update(config: Config, manifest: BatchManifest, consumed: tuple[ObjectInfo, ...],
                  state: CommittedState, floor: datetime | None) -> LedgerUpdate:
    """What the batch's commit adds to the ledger. Only an interval batch moves the horizon: its
    as_of is log time, where a manual batch's is a clock's (one staged during a backfill would
    otherwise drop entries the backfill's listings still return)."""
    selector, inputs = manifest.selector, config.inputs
    horizon = None
    if selector.since is not None and selector.until is not None:
        looked_back = max(timedelta(hours=inputs.lookback_hours), selector.until - selector.since)
        horizon = hour_index_at(selector.until - looked_back - timedelta(hours=inputs.sweep_hours)) - 1
    first = not state.ledger.started and floor is not None
    return LedgerUpdate(consumed, horizon, floor.isoformat() if first and floor is not None else None)
