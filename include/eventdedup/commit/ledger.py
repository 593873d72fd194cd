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
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from eventdedup.s3store import ObjectInfo


class LedgerEntry(NamedTuple):
    etag: str
    version: int  # the commit that consumed it
    hour: int  # that commit's as_of, in hours since the epoch: when the entry may leave


@dataclass(frozen=True)
class LedgerUpdate:
    """What one commit adds to the ledger (carried by job result, journal and commit record)."""

    inputs: tuple[ObjectInfo, ...] = ()
    # Entries of commits before this hour may leave: set by interval batches only (their as_of is
    # log time; a manual batch's is a clock's), as of their interval's start less the lookback,
    # the sweep and the hour a producer's clock may run ahead.
    retain_from_hour: int | None = None
    # Set by the first commit that keeps a ledger on a log that had commits without one: every
    # landing object dated before it was consumed by the earlier rule (LastModified in an interval).
    legacy_floor: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"inputs": [info.to_json() for info in self.inputs], "retain_from_hour": self.retain_from_hour,
                "legacy_floor": self.legacy_floor}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | None) -> LedgerUpdate | None:
        if doc is None:
            return None
        horizon = doc.get("retain_from_hour")
        return cls(tuple(ObjectInfo.from_json(item) for item in doc.get("inputs", ())),
                   None if horizon is None else int(horizon), doc.get("legacy_floor"))


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
        if update is None:
            return self  # a commit written before the ledger existed
        entries = {**self.entries, **{info.key: LedgerEntry(info.etag, version, hour) for info in update.inputs}}
        horizon = self.retain_from_hour
        if update.retain_from_hour is not None:
            horizon = update.retain_from_hour if horizon is None else max(horizon, update.retain_from_hour)
        if horizon is not None:
            entries = {key: entry for key, entry in entries.items() if entry.hour >= horizon}
        return IngestionLedger(entries, horizon, True, self.legacy_floor or update.legacy_floor)

    def to_json(self) -> dict[str, Any]:
        return {"retain_from_hour": self.retain_from_hour, "started": self.started,
                "legacy_floor": self.legacy_floor,
                "entries": {key: list(entry) for key, entry in self.entries.items()}}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | None) -> IngestionLedger:
        if not doc:
            return cls()
        horizon = doc.get("retain_from_hour")
        return cls({str(key): LedgerEntry(str(etag), int(version), int(hour))
                    for key, (etag, version, hour) in doc["entries"].items()},
                   None if horizon is None else int(horizon), bool(doc.get("started", True)), doc.get("legacy_floor"))
