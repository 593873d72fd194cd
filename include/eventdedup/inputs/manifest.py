"""Freeze a batch's input list as its batch manifest on S3 before anything is processed.

A batch is its id plus this frozen list: a rerun reuses it and never re-lists, so late-arriving
objects can never change what a batch id means. An interval or sweep batch freezes the landing
objects of its range that the ingestion ledger does not hold (`is_consumed`); a prefix batch
freezes everything under the prefix, and its job skips (and counts) what the ledger holds.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from eventdedup import codec
from eventdedup.config import Config
from eventdedup.errors import BatchManifestError
from eventdedup.inputs.intervals import IntervalBatch
from eventdedup.inputs.landing import unconsumed_in_range
from eventdedup.inputs.selector import InputSelector, checked_selector, utc_iso
from eventdedup.keys import hour_index_at
from eventdedup.layout import Layout
from eventdedup.naming import validate_batch_id
from eventdedup.s3store import ObjectInfo, S3Store

log = logging.getLogger(__name__)
# How far a scheduler's interval end may lie ahead of this host's clock.
MAX_CLOCK_SKEW = timedelta(minutes=15)


@dataclass(frozen=True)
class BatchManifest:
    batch_id: str
    selector: InputSelector
    # The batch's reference time: the dedup window and the future-timestamp bound are
    # measured from it, so a rerun next week judges events exactly as the first run did.
    as_of: datetime
    inputs: tuple[ObjectInfo, ...]
    # The log's version when the batch was staged: any commit of the batch is a later version
    # (eventdedup.commit.log.committed_version). None in older manifests (docs/formats.md).
    staged_at_version: int | None = None
    # The hour (since the epoch) of each input's LastModified, aligned with `inputs` (empty when
    # unknown: older manifests, docs/formats.md; inputs not from a listing). The ingestion
    # ledger files an entry by it (eventdedup.commit.ledger).
    input_hours: tuple[int, ...] = ()

    def to_bytes(self) -> bytes:
        return codec.dumps(self, indent=True)

    def dated_hour(self, index: int) -> int | None:
        """The hour of input `index`'s LastModified; None when not recorded."""
        return self.input_hours[index] if len(self.input_hours) == len(self.inputs) else None

    @property
    def interval(self) -> IntervalBatch | None:
        """The interval batch the manifest stages; None for a manual batch (eventdedup.inputs.intervals)."""
        return IntervalBatch.of_request(self.batch_id, self.selector)

    @classmethod
    def from_bytes(cls, data: bytes, name: str) -> BatchManifest:
        try:
            return codec.loads(cls, data)
        except (codec.CodecError, BatchManifestError) as exc:
            raise BatchManifestError(f"batch manifest {name} is unreadable: {exc}") from None


def freeze_batch_inputs(
    store: S3Store, config: Config, batch_id: str, selector: InputSelector, now: datetime,
    is_consumed: Callable[[ObjectInfo], bool] = lambda _: False, floor: datetime | None = None,
    objects: Callable[[], Iterable[ObjectInfo]] | None = None, log_version: int | None = None,
    before_freezing: Callable[[tuple[ObjectInfo, ...]], None] | None = None,
) -> BatchManifest:
    """Return the batch's manifest, listing its inputs and writing it first if this batch id is new.
    `objects` gives a prefix batch's objects where a listing of the prefix would not (a populate of
    our own output reads the committed view: eventdedup.commit.view.dataset_objects).
    `before_freezing` sees a new batch's inputs before its manifest is written, and may refuse the
    batch by raising: then nothing is written, and the batch id stays free."""
    validate_batch_id(batch_id)
    layout = Layout(config.layout)
    selector = checked_selector(layout, selector)
    key = layout.batch_manifest(batch_id)
    existing = load_batch_manifest_or_none(store, layout, batch_id)
    if existing is not None:
        return _reused(existing, selector, store.uri(key))
    # Log time where the selector has one (an interval's end, a sweep's range end), else the clock.
    as_of = selector.until or selector.sweep_before or now.astimezone(timezone.utc)
    if as_of > now + MAX_CLOCK_SKEW:
        # A batch's as_of moves the log's horizons (cache expiry, the ledger): one from the future
        # would expire every real hour's history until the clock caught up.
        raise BatchManifestError(
            f"batch {batch_id}: its interval ends at {utc_iso(as_of)}, after the current time {utc_iso(now)}; "
            "a batch may only take what has already landed")
    inputs = tuple(_list_inputs(store, config, selector, is_consumed, floor, objects))
    if before_freezing is not None:
        before_freezing(inputs)
    dated = [hour_index_at(info.last_modified) for info in inputs if info.last_modified is not None]
    manifest = BatchManifest(batch_id, selector, as_of.astimezone(timezone.utc), inputs, log_version,
                             tuple(dated) if len(dated) == len(inputs) else ())
    data = manifest.to_bytes()
    if store.put_if_absent(key, data) is None:
        # Another stager won the race; its manifest is the batch's definition.
        winner = load_batch_manifest_or_none(store, layout, batch_id)
        assert winner is not None
        return _reused(winner, selector, store.uri(key))
    store.wrote_immutable(key, data)
    log.info("staged batch %s: %d input objects (%s)", batch_id, len(inputs), codec.to_doc(selector))
    return manifest


def load_batch_manifest(store: S3Store, layout: Layout, batch_id: str) -> BatchManifest:
    manifest = load_batch_manifest_or_none(store, layout, batch_id)
    if manifest is None:
        raise BatchManifestError(
            f"batch {batch_id}: no manifest at {store.uri(layout.batch_manifest(batch_id))}; stage the batch first"
        )
    return manifest


def load_batch_manifest_or_none(store: S3Store, layout: Layout, batch_id: str) -> BatchManifest | None:
    key = layout.batch_manifest(batch_id)
    data = store.get_immutable_or_none(key)  # created once per batch id, never replaced
    return None if data is None else BatchManifest.from_bytes(data, store.uri(key))


def _reused(existing: BatchManifest, requested: InputSelector, uri: str) -> BatchManifest:
    if existing.selector != requested:
        raise BatchManifestError(
            f"batch {existing.batch_id} already exists with inputs {codec.to_doc(existing.selector)} ({uri}); "
            f"refusing a different input list {codec.to_doc(requested)}: use a new batch id"
        )
    log.info("batch %s: reusing its frozen manifest (%d inputs)", existing.batch_id, len(existing.inputs))
    return existing


def _list_inputs(store: S3Store, config: Config, selector: InputSelector, is_consumed: Callable[[ObjectInfo], bool],
                 floor: datetime | None, objects: Callable[[], Iterable[ObjectInfo]] | None) -> list[ObjectInfo]:
    if selector.input_prefix is not None:
        listed = store.list(selector.input_prefix) if objects is None else objects()
        found = [item for item in listed if not item.key.endswith("/")]  # no "folders"
    else:
        start, end = listed_range(config, selector, floor)
        found, listing = unconsumed_in_range(store, config, start, end, is_consumed,
                                             ahead=selector.sweep_before is None)
        log.info("listed %d landing object(s) of %s .. %s in %d LIST request(s); %d not consumed yet",
                 len(listing.objects), start.isoformat(), end.isoformat(), listing.list_requests, len(found))
    # LastModified stays (the manifest records its hour per input: eventdedup.commit.ledger); it
    # is no part of an object's identity and not written as one.
    return sorted((ObjectInfo(item.key, item.size, item.etag, item.last_modified) for item in found),
                  key=lambda info: info.key)


def listed_range(config: Config, selector: InputSelector, floor: datetime | None) -> tuple[datetime, datetime]:
    """The range an interval or sweep batch lists: its selector's range, from no earlier than `floor`
    (below it the ingestion ledger has forgotten what was consumed)."""
    start, end = selector_range(config, selector)
    return (start if floor is None else max(start, floor)), end


def selector_range(config: Config, selector: InputSelector) -> tuple[datetime, datetime]:
    """The time range an interval (its lookback, or the interval itself if longer) or a sweep (the
    sweep range behind the lookback) lists."""
    lookback, sweep = timedelta(hours=config.inputs.lookback_hours), timedelta(hours=config.inputs.sweep_hours)
    if selector.sweep_before is not None:
        return selector.sweep_before - sweep, selector.sweep_before
    assert selector.since is not None and selector.until is not None
    return min(selector.since, selector.until - lookback), selector.until
