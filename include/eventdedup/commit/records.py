"""The commit record: what commit N of the log says, and its format on S3.

Modelled on Delta Lake's `_delta_log`: commit N is one JSON object written with
`put_object(IfNoneMatch="*")`, so at most one writer can ever create it, and it names commit
N-1's batch. A batch is visible, and its cache entries trusted, only once its commit exists.

The record (format COMMIT_FORMAT) holds its fields, `change`, the typed payload of what it
changes (eventdedup.commit.changes), and `cache_bases`, the older objects a head builds on
(eventdedup.cache.heads). Records, job results and journals of earlier formats are upgraded when
read (`upgrade_commit`, `without_bases_format`, `upgrade_change_v1`); which release wrote which
format, and how each is read: docs/formats.md.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from eventdedup import codec
from eventdedup.commit.changes import BatchChange, Change, Reshard, Retraction
from eventdedup.counts import BatchCounts
from eventdedup.errors import CorruptStateError
from eventdedup.inputs.intervals import interval_start_of
from eventdedup.s3store import ObjectInfo

COMMIT_FORMAT = 3
R = TypeVar("R")


@dataclass(frozen=True)
class PromotedObject:
    kind: str  # data | audit | quarantine | cache | load_manifest
    key: str
    size: int
    etag: str
    rows: int = 0

    @property
    def info(self) -> ObjectInfo:
        return ObjectInfo(self.key, self.size, self.etag)


@dataclass(frozen=True)
class CommitRecord:
    version: int
    batch_id: str
    previous_batch_id: str | None
    # Unique per promotion attempt: lets a promoter whose PUT response was lost recognise the
    # commit as its own (Iceberg's "commit state unknown") instead of reporting a conflict.
    token: str
    as_of: str
    counts: BatchCounts
    objects: tuple[PromotedObject, ...]
    cache_heads: Mapping[str, str]  # cache key "YYYY-MM-DD/HH/BBBB" (or a guard's) -> object key
    change: Change = field(default_factory=BatchChange)
    # Cache key -> the committed objects its new head builds on, oldest first (keys with none left out).
    cache_bases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def is_operation(self) -> bool:
        """A retraction or a reshard: staged from the log, not from a batch manifest; no input."""
        return not isinstance(self.change, BatchChange)

    @property
    def retracts(self) -> tuple[str, ...]:
        return self.change.retracts if isinstance(self.change, Retraction) else ()

    @property
    def batch_change(self) -> BatchChange | None:
        return self.change if isinstance(self.change, BatchChange) else None

    def to_bytes(self) -> bytes:
        return codec.dumps(self, indent=True, format_version=COMMIT_FORMAT)

    @classmethod
    def from_bytes(cls, data: bytes, name: str) -> CommitRecord:
        return read_record(cls, data, upgrade_commit, f"commit record {name}", "the log cannot be trusted")


def read_record(kind: type[R], data: bytes, upgrade: Callable[[Any], Any], what: str, consequence: str) -> R:
    """A commit record, job result or journal of any format; damage is a CorruptStateError naming it."""
    try:
        return codec.loads(kind, data, upgrade)
    except codec.CodecError as exc:
        raise CorruptStateError(f"{what} does not parse: {exc}; {consequence}") from None


def upgrade_commit(doc: Any) -> Any:
    """A commit record of any format as the current document (docs/formats.md)."""
    doc = without_bases_format(doc)
    return upgrade_change_v1(doc) if codec.is_older_format(doc, COMMIT_FORMAT, 1) else doc


def without_bases_format(doc: Any) -> Any:
    """A format-2 document (commit record, job result or journal) as the current format: the same
    fields, with no head building on older objects (docs/formats.md)."""
    return {**doc, "format": COMMIT_FORMAT} if isinstance(doc, dict) and doc.get("format") == 2 else doc


_V1_CHANGE_FIELDS = ("window_start_hour", "retain_from_hour", "ledger", "partitions", "excluded_inputs", "retracts",
                     "reason", "reshard")


def upgrade_change_v1(doc: dict[str, Any]) -> dict[str, Any]:
    """A format-1 document (commit record, job result or journal) with its loose change fields,
    and a retraction's or a reshard's figures out of its counts, made one `change` (docs/formats.md)."""
    upgraded = {key: value for key, value in doc.items() if key not in _V1_CHANGE_FIELDS}
    counts = dict(doc.get("counts") or {})
    change: dict[str, Any]
    if doc.get("retracts"):
        change = {"kind": Retraction.KIND, "retracts": doc["retracts"], "reason": doc.get("reason") or "",
                  "retracted_output_rows": counts.pop("retracted_output_rows", 0),
                  "cache_keys_rewritten": counts.pop("cache_keys_rewritten", 0)}
        counts.pop("retracted_batches", None)
    elif doc.get("reshard") is not None:
        cutover = doc["reshard"]  # {"from_hour", "buckets"} in commit records, [hour, buckets] in job results
        hour, buckets = (cutover["from_hour"], cutover["buckets"]) if isinstance(cutover, dict) else cutover
        change = {"kind": Reshard.KIND, "from_hour": hour, "buckets": buckets}
        counts.pop("buckets", None)
        counts.pop("from_hour", None)
    else:
        change = {"kind": BatchChange.KIND, **{key: doc[key] for key in _V1_CHANGE_FIELDS[:5]
                                               if doc.get(key) is not None},
                  "arrival_windows": "cross_hour_duplicates" in counts,
                  # An interval batch: one whose id names an interval start (docs/formats.md).
                  "interval": interval_start_of(str(doc.get("batch_id", ""))) is not None}
    upgraded["counts"] = counts
    upgraded["change"] = change
    upgraded["format"] = COMMIT_FORMAT
    return upgraded
