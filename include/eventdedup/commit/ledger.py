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

What a batch holds, not what the window holds: at 1,000 input objects a batch the ledger keeps
millions of entries, so the folded state does not carry them. Each checkpoint writes the entries
of the commits since the one before as one immutable part (`ledger/<last>-<first>.json.gz`, by
log version), and the state names its parts with their spans of versions and hours; it carries
in memory only the entries of the commits since its checkpoint. Applying a commit costs what the
commit consumed; loading the state reads no part. Each entry also keeps the hour of its object's
LastModified (S3 dates an object version the same in every listing), and each part the span of
those hours: a lookup reads only the parts whose span holds its object's hour, whatever any
clock said when it was consumed (`LedgerReader`). Entries of commits that did not record it are
in every span.

This module holds the ledger's values and their codec: its entries and how a commit changes them,
its parts (`write_part`), where listings stop (`listing_floor`, `legacy_floor`) and what a batch's
commit adds (`ledger_update`). Lookups, which read parts and rebuild a missing one from the log,
are eventdedup.commit.ledger_reader's.
"""
from __future__ import annotations

import gzip
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import NamedTuple

import orjson

from eventdedup.config import Config
from eventdedup.errors import CorruptStateError
from eventdedup.inputs.manifest import BatchManifest, load_batch_manifest_or_none
from eventdedup.keys import CacheKey, hour_index_at
from eventdedup.layout import Layout
from eventdedup.s3store import ObjectInfo, S3Store

PART_FORMAT = 1


class LedgerEntry(NamedTuple):
    etag: str
    version: int  # the commit that consumed it
    hour: int  # that commit's as_of, in hours since the epoch: when the entry may leave
    dated: int | None = None  # the hour of the object's LastModified; None if its commit did not record it


@dataclass(frozen=True)
class LedgerUpdate:
    """What one commit adds to the ledger (part of a batch's change: eventdedup.commit.changes)."""

    inputs: tuple[ObjectInfo, ...] = ()
    # Entries of commits before this hour may leave: set by interval batches only (their as_of is
    # log time; a manual batch's is a clock's), as of their interval's start less the lookback,
    # the sweep and the hour a producer's clock may run ahead.
    retain_from_hour: int | None = None
    # Set by the first commit that keeps a ledger on a log that had commits without one: every
    # landing object dated before it was consumed by the rule before the ledger (LastModified in an
    # interval; docs/formats.md).
    legacy_floor: str | None = None
    # The hour of each input's LastModified, aligned with `inputs`; empty when not known (older
    # records: docs/formats.md; inputs not from a listing).
    dated_hours: tuple[int, ...] = ()


@dataclass(frozen=True)
class LedgerPart:
    """The entries of the commits from `first_version` to `last_version`, one immutable object."""

    key: str
    first_version: int
    last_version: int
    min_hour: int  # of its entries' commits
    max_hour: int
    entries: int
    # The span of its objects' LastModified hours, and how many entries have none recorded (a
    # part with any is read by every lookup).
    min_dated: int | None = None
    max_dated: int | None = None
    undated: int = 0

    def may_hold(self, dated: int | None) -> bool:
        """Whether it may hold an entry of an object dated in hour `dated` (None: unknown)."""
        if dated is None or self.undated:
            return True
        return self.min_dated is not None and self.max_dated is not None and self.min_dated <= dated <= self.max_dated


Entries = Mapping[str, tuple[LedgerEntry, ...]]  # object key -> its consumptions, in version order


@dataclass(frozen=True)
class IngestionLedger:
    # Entries of the commits since the last checkpoint.
    recent: Entries = field(default_factory=dict)
    parts: tuple[LedgerPart, ...] = ()  # every older entry, in version order
    retain_from_hour: int | None = None
    started: bool = False  # some commit carried a ledger update
    legacy_floor: str | None = None
    # Retracted commits whose entries a part may hold (sorted): they count for nothing.
    dropped_versions: tuple[int, ...] = ()
    # Entries of commits at or below this version AND of an hour before the horizon have left.
    left_through_version: int = 0

    @property
    def entry_count(self) -> int:
        """How many entries it keeps (those of retracted commits or left, not yet dropped, included)."""
        return sum(part.entries for part in self.parts) + sum(len(held) for held in self.recent.values())

    def is_live(self, entry: LedgerEntry) -> bool:
        """Whether an entry still counts: not of a retracted commit, and not left."""
        if entry.version in self.dropped_versions:
            return False
        horizon = self.retain_from_hour
        return horizon is None or entry.hour >= horizon or entry.version > self.left_through_version

    def without_versions(self, versions: set[int]) -> IngestionLedger:
        """The ledger as if the commits `versions` (retracted) had consumed nothing: their recent
        entries go, their entries in parts count for nothing."""
        if not versions:
            return self
        recent = {key: kept for key, held in self.recent.items()
                  if (kept := tuple(entry for entry in held if entry.version not in versions))}
        in_parts = {v for v in versions if any(p.first_version <= v <= p.last_version for p in self.parts)}
        return replace(self, recent=recent, dropped_versions=tuple(sorted({*self.dropped_versions, *in_parts})))

    def with_update(self, update: LedgerUpdate | None, version: int, hour: int) -> IngestionLedger:
        """The ledger with one commit's consumed objects added and its horizon moved (no entry
        leaves here: `pruned` decides). Costs what the commit consumed (and the commits since the
        checkpoint), never the ledger's size."""
        if update is None:
            return self  # a commit without a ledger update (older records: docs/formats.md)
        recent = dict(self.recent)
        dated: tuple[int | None, ...] = (update.dated_hours if len(update.dated_hours) == len(update.inputs)
                                         else (None,) * len(update.inputs))
        for info, dated_hour in zip(update.inputs, dated, strict=True):
            recent[info.key] = (*recent.get(info.key, ()), LedgerEntry(info.etag, version, hour, dated_hour))
        horizon = self.retain_from_hour
        if update.retain_from_hour is not None:
            horizon = update.retain_from_hour if horizon is None else max(horizon, update.retain_from_hour)
        return replace(self, recent=recent, retain_from_hour=horizon, started=True,
                       legacy_floor=self.legacy_floor or update.legacy_floor)

    def pruned(self, left_through_version: int) -> IngestionLedger:
        """The ledger without the entries no listing can return again AND whose batch has left the
        committed state (its version at or below `left_through_version`): an object stays while
        anything its batch wrote is in the state, so it is never read again while its events
        might be checked against a window that has moved past them. Whole parts leave; an entry
        of a part that stays counts for nothing (`is_live`)."""
        horizon = self.retain_from_hour
        if horizon is None:
            return self
        parts = tuple(part for part in self.parts
                      if part.max_hour >= horizon or part.last_version > left_through_version)
        dropped = tuple(v for v in self.dropped_versions if any(p.first_version <= v <= p.last_version for p in parts))
        return replace(self, parts=parts, dropped_versions=dropped,
                       left_through_version=max(self.left_through_version, left_through_version))

    def flushed(self, part: LedgerPart) -> IngestionLedger:
        """The ledger once its recent entries are written as `part` (a checkpoint)."""
        return replace(self, recent={}, parts=(*self.parts, part))


def encode_part(entries: Entries) -> bytes:
    rows = sorted((key, entry) for key, held in entries.items() for entry in held)
    return gzip.compress(orjson.dumps({
        "format": PART_FORMAT, "keys": [key for key, _ in rows], "etags": [entry.etag for _, entry in rows],
        "versions": [entry.version for _, entry in rows], "hours": [entry.hour for _, entry in rows],
        "dated": [entry.dated for _, entry in rows],
    }), compresslevel=5, mtime=0)


def decode_part(data: bytes, name: str) -> list[tuple[str, LedgerEntry]]:
    """A part's entries; damage raises CorruptStateError (read as empty, objects would be read twice)."""
    try:
        doc = orjson.loads(gzip.decompress(data))
        keys, etags, versions, hours, dated = doc["keys"], doc["etags"], doc["versions"], doc["hours"], doc["dated"]
        if doc.get("format") != PART_FORMAT or not len(keys) == len(etags) == len(versions) == len(hours) == len(dated):
            raise ValueError(f"format {doc.get('format')!r}, columns of {len(keys)}/{len(etags)}/{len(versions)}/"
                             f"{len(hours)}/{len(dated)} entries")
        rows = [(str(k), LedgerEntry(str(e), int(v), int(h), None if d is None else int(d)))
                for k, e, v, h, d in zip(keys, etags, versions, hours, dated, strict=True)]
    except (OSError, EOFError, ValueError, KeyError, TypeError, orjson.JSONDecodeError) as exc:
        raise CorruptStateError(f"ingestion ledger part {name} does not parse: {exc}") from None
    return rows


def write_part(store: S3Store, layout: Layout, ledger: IngestionLedger, version: int) -> IngestionLedger:
    """Write the recent entries as the part of the commits up to `version` (a checkpoint's). Its
    name holds its range of versions: two promoters that loaded the state from different
    checkpoints write different parts, each named only by its own checkpoint; the same range
    always makes the same bytes."""
    if not ledger.recent:
        return ledger
    recent = [entry for held in ledger.recent.values() for entry in held]
    first = min(entry.version for entry in recent)
    key = layout.ledger_part(first, version)
    store.put_bytes(key, encode_part(ledger.recent), content_type="application/gzip")
    dated = [entry.dated for entry in recent if entry.dated is not None]
    part = LedgerPart(key, first, version, min(e.hour for e in recent),
                      max(e.hour for e in recent), len(recent), min(dated, default=None), max(dated, default=None),
                      len(recent) - len(dated))
    return ledger.flushed(part)


def listing_floor(ledger: IngestionLedger) -> datetime | None:
    """Where listings stop: below the ledger's horizon (plus the hour a producer's clock may run
    ahead) entries have left the state, and an object consumed there would look new (raising
    `lookback_hours` or `sweep_hours` must not re-take what the ledger has forgotten)."""
    horizon = ledger.retain_from_hour
    return None if horizon is None else CacheKey.of_hour(horizon + 2, 0).hour_start


def legacy_floor(store: S3Store, layout: Layout, ledger: IngestionLedger,
                 latest_interval_batch_id: str | None) -> datetime | None:
    """The end of the latest interval a log committed without a ledger (None: no such log): such a
    log consumed every landing object with LastModified before it (docs/formats.md). The first
    commit that keeps a ledger records it."""
    if ledger.legacy_floor is not None:
        return datetime.fromisoformat(ledger.legacy_floor)
    if ledger.started or latest_interval_batch_id is None:
        return None
    manifest = load_batch_manifest_or_none(store, layout, latest_interval_batch_id)
    return None if manifest is None else manifest.selector.until


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
    dated = {(info.key, info.etag): manifest.dated_hour(index) for index, info in enumerate(manifest.inputs)}
    hours = [dated.get((info.key, info.etag)) for info in consumed]
    return LedgerUpdate(consumed, horizon, floor.isoformat() if first and floor is not None else None,
                        tuple(hour for hour in hours if hour is not None) if None not in hours else ())
