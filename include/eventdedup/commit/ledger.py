"""The ingestion ledger: every input object a committed batch consumed, so none is consumed twice.

Timestamps cannot say what was processed: S3 dates an object from the start of its upload, a
writer's clock may lag, a copy may keep its old date. So, like Auto Loader's checkpoint and
Structured Streaming's seen-files log, each commit records the objects (key, ETag, size) its
batch consumed, atomically with its output, and the folded state keeps them. A batch skips every
input the ledger holds at the log version it is computed against; since a batch commits only on
top of that version, no two commits ever consume the same object. A re-uploaded object (same
key, new ETag) is new input.

Bounded like the rest of the state: an entry leaves once the batch that consumed it is older
than the lookback plus the sweep (no listing can return its object any more). A rerun of a
committed batch does not consult the ledger: it reads what its own commit recorded.

This module is the ledger's one home: its entries and how a commit changes them, what a listing
may take given them (`consumed_predicate`, `listing_floor`, `legacy_floor`), what a batch's
commit adds (`ledger_update`) and which of a batch's inputs its job reads (`inputs_to_read`).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

from eventdedup.config import Config
from eventdedup.inputs.manifest import BatchManifest, load_batch_manifest_or_none
from eventdedup.keys import CacheKey, hour_index_at
from eventdedup.layout import Layout
from eventdedup.s3store import ObjectInfo, S3Store

log = logging.getLogger(__name__)


class LedgerEntry(NamedTuple):
    etag: str
    version: int  # the commit that consumed it
    hour: int  # that commit's as_of, in hours since the epoch: when the entry may leave


@dataclass(frozen=True)
class LedgerUpdate:
    """What one commit adds to the ledger (part of a batch's change: eventdedup.commit.changes)."""

    inputs: tuple[ObjectInfo, ...] = ()
    # Entries of commits before this hour may leave: set by interval batches only (their as_of is
    # log time; a manual batch's is a clock's), as of their interval's start less the lookback,
    # the sweep and the hour a producer's clock may run ahead.
    retain_from_hour: int | None = None
    # Set by the first commit that keeps a ledger on a log that had commits without one: every
    # landing object dated before it was consumed by the earlier rule (LastModified in an interval).
    legacy_floor: str | None = None


@dataclass(frozen=True)
class IngestionLedger:
    entries: Mapping[str, LedgerEntry] = field(default_factory=dict)  # object key -> latest consumption
    retain_from_hour: int | None = None
    started: bool = False  # some commit carried a ledger update
    legacy_floor: str | None = None

    def consumed_before(self, info: ObjectInfo, version: int) -> LedgerEntry | None:
        """The entry that shows this exact object (key and ETag) consumed by a commit before `version`."""
        entry = self.entries.get(info.key)
        return entry if entry is not None and entry.etag == info.etag and entry.version < version else None

    def without_versions(self, versions: set[int]) -> IngestionLedger:
        """The ledger as if the commits `versions` (retracted) had consumed nothing."""
        if not versions:
            return self
        entries = {key: entry for key, entry in self.entries.items() if entry.version not in versions}
        return IngestionLedger(entries, self.retain_from_hour, self.started, self.legacy_floor)

    def with_update(self, update: LedgerUpdate | None, version: int, hour: int) -> IngestionLedger:
        """The ledger with one commit's consumed objects added and its horizon moved (no entry
        leaves here: `pruned` decides)."""
        if update is None:
            return self  # a commit written before the ledger existed
        entries = {**self.entries, **{info.key: LedgerEntry(info.etag, version, hour) for info in update.inputs}}
        horizon = self.retain_from_hour
        if update.retain_from_hour is not None:
            horizon = update.retain_from_hour if horizon is None else max(horizon, update.retain_from_hour)
        return IngestionLedger(entries, horizon, True, self.legacy_floor or update.legacy_floor)

    def pruned(self, left_through_version: int) -> IngestionLedger:
        """The ledger without the entries no listing can return again AND whose batch has left the
        committed state (its version at or below `left_through_version`): an object stays while
        anything its batch wrote is in the state, so it is never read again while its events
        might be checked against a window that has moved past them."""
        horizon = self.retain_from_hour
        if horizon is None:
            return self
        entries = {key: entry for key, entry in self.entries.items()
                   if entry.hour >= horizon or entry.version > left_through_version}
        if len(entries) == len(self.entries):
            return self
        return IngestionLedger(entries, horizon, self.started, self.legacy_floor)


def listing_floor(ledger: IngestionLedger) -> datetime | None:
    """Where listings stop: below the ledger's horizon (plus the hour a producer's clock may run
    ahead) entries have left the state, and an object consumed there would look new (raising
    `lookback_hours` or `sweep_hours` must not re-take what the ledger has forgotten)."""
    horizon = ledger.retain_from_hour
    return None if horizon is None else CacheKey.of_hour(horizon + 2, 0).hour_start


def legacy_floor(store: S3Store, layout: Layout, ledger: IngestionLedger,
                 latest_interval_batch_id: str | None) -> datetime | None:
    """The end of the latest interval committed before the ledger existed (None: no such log): a
    log that had commits before the ledger consumed, by the earlier rule, every landing object
    with LastModified before it. The first commit that keeps a ledger records it."""
    if ledger.legacy_floor is not None:
        return datetime.fromisoformat(ledger.legacy_floor)
    if ledger.started or latest_interval_batch_id is None:
        return None
    manifest = load_batch_manifest_or_none(store, layout, latest_interval_batch_id)
    return None if manifest is None else manifest.selector.until


def consumed_predicate(ledger: IngestionLedger, version: int,
                       floor: datetime | None) -> Callable[[ObjectInfo], bool]:
    """Whether a listed object is consumed as of log `version` (for a batch committing on top of
    it): the ledger holds it (same key and ETag), or it is dated before the legacy floor."""
    def consumed(info: ObjectInfo) -> bool:
        if floor is not None and info.last_modified is not None and info.last_modified < floor:
            return True
        return ledger.consumed_before(info, version + 1) is not None
    return consumed


def ledger_update(config: Config, manifest: BatchManifest, consumed: tuple[ObjectInfo, ...],
                  ledger: IngestionLedger, floor: datetime | None) -> LedgerUpdate:
    """What the batch's commit adds to the ledger. Only an interval batch moves the horizon: its
    as_of is log time, where a manual batch's (one by prefix, or by `--since/--until` under an id
    of its own) is a clock's: one staged during a backfill would otherwise drop entries the
    backfill's listings still return, and raise the floor below which they list nothing."""
    selector, inputs = manifest.selector, config.inputs
    horizon = None
    if manifest.interval is not None:
        assert selector.since is not None and selector.until is not None
        looked_back = max(timedelta(hours=inputs.lookback_hours), selector.until - selector.since)
        horizon = hour_index_at(selector.until - looked_back - timedelta(hours=inputs.sweep_hours)) - 1
    first = not ledger.started and floor is not None
    return LedgerUpdate(consumed, horizon, floor.isoformat() if first and floor is not None else None)


def inputs_to_read(ledger: IngestionLedger, base_version: int, manifest: BatchManifest,
                   recorded_inputs: frozenset[ObjectInfo] | None) -> list[tuple[int, ObjectInfo]]:
    """The manifest's inputs (by index) that no batch committed up to `base_version` consumed: the
    ledger's exactly-once rule. A prefix batch asked to reprocess reads them all; a rerun reads
    exactly the inputs its commit recorded (`recorded_inputs`)."""
    if recorded_inputs is not None:
        return [(index, info) for index, info in enumerate(manifest.inputs) if info in recorded_inputs]
    if manifest.selector.reprocess:
        return list(enumerate(manifest.inputs))
    to_read = []
    for index, info in enumerate(manifest.inputs):
        entry = ledger.consumed_before(info, base_version + 1)
        if entry is None:
            to_read.append((index, info))
        else:
            log.info("batch %s: input %s (ETag %s) was consumed by log version %d; skipped (--reprocess to read it "
                     "again)", manifest.batch_id, info.key, info.etag, entry.version)
    return to_read
