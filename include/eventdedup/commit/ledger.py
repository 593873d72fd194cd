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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from eventdedup.s3store import ObjectInfo


class LedgerEntry(NamedTuple):
    etag: str
    version: int  # the commit that consumed it
    hour: int  # that commit's as_of, in hours since the epoch: when the entry may leave


@dataclass(frozen=True)
class IngestionLedger:
    entries: Mapping[str, LedgerEntry] = field(default_factory=dict)  # object key -> latest consumption
    retain_from_hour: int | None = None

    def consumed_before(self, info: ObjectInfo, version: int) -> LedgerEntry | None:
        """The entry that shows this exact object (key and ETag) consumed by a commit before `version`."""
        entry = self.entries.get(info.key)
        return entry if entry is not None and entry.etag == info.etag and entry.version < version else None

    def with_commit(self, inputs: Iterable[ObjectInfo], version: int, hour: int,
                    retain_from_hour: int | None) -> IngestionLedger:
        entries = {**self.entries, **{info.key: LedgerEntry(info.etag, version, hour) for info in inputs}}
        horizon = self.retain_from_hour
        if retain_from_hour is not None:
            horizon = retain_from_hour if horizon is None else max(horizon, retain_from_hour)
        if horizon is not None:
            entries = {key: entry for key, entry in entries.items() if entry.hour >= horizon}
        return IngestionLedger(entries, horizon)

    def to_json(self) -> dict[str, Any]:
        return {"retain_from_hour": self.retain_from_hour,
                "entries": {key: list(entry) for key, entry in self.entries.items()}}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | None) -> IngestionLedger:
        if not doc:
            return cls()
        horizon = doc.get("retain_from_hour")
        return cls({str(key): LedgerEntry(str(etag), int(version), int(hour))
                    for key, (etag, version, hour) in doc["entries"].items()},
                   None if horizon is None else int(horizon))
