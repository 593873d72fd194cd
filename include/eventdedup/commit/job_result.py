"""What a finished job leaves in staging: every staged object, the batch's counts and its change.

Written last, so its presence means the job completed; promotion trusts nothing else. A batch's
Spark job writes one (eventdedup.job.driver), and so do the operations that commit to the log
like a batch: a retraction and a reshard.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eventdedup import codec
from eventdedup.commit.changes import BatchChange, Change
from eventdedup.commit.records import (
    COMMIT_FORMAT,
    PromotedObject,
    read_record,
    upgrade_change_v1,
    without_bases_format,
)
from eventdedup.counts import BatchCounts
from eventdedup.errors import BatchNotReadyError
from eventdedup.layout import Layout
from eventdedup.s3store import ObjectInfo, S3Store


@dataclass(frozen=True)
class StagedObject:
    kind: str  # data | audit | quarantine | cache | load_manifest
    staged: ObjectInfo
    final_key: str
    rows: int = 0
    cache_key: str | None = None  # a cache head's name in the state (hour segment or id guard)
    # The committed objects of the key this head builds on, oldest first (eventdedup.cache.heads);
    # none: it holds the key's whole history (a new key's, a merge of its whole chain).
    builds_on: tuple[str, ...] = ()

    @property
    def promoted(self) -> PromotedObject:
        """What the commit records once it is copied to its final key (a copy keeps the ETag)."""
        return PromotedObject(self.kind, self.final_key, self.staged.size, self.staged.etag, self.rows)


@dataclass(frozen=True)
class JobResult:
    batch_id: str
    # The log version the job read its cache state at; promotion commits base_version + 1.
    base_version: int
    as_of: str
    counts: BatchCounts
    objects: tuple[StagedObject, ...]
    change: Change = field(default_factory=BatchChange)

    def to_bytes(self) -> bytes:
        return codec.dumps(self, indent=True, format_version=COMMIT_FORMAT)

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "job result") -> JobResult:
        return read_record(cls, data, upgrade_job_result, name, "rerun the dedup step")

    @property
    def excluded_inputs(self) -> tuple[str, ...]:
        """The exclusions the result was computed under (only a batch has any)."""
        return self.change.excluded_inputs if isinstance(self.change, BatchChange) else ()


def upgrade_job_result(doc: Any) -> Any:
    """A job result of any format as the current document: an unnumbered one through
    `upgrade_change_v1`, format 2 as having no bases; a format this release does not know is
    refused (docs/formats.md)."""
    doc = without_bases_format(doc)
    return upgrade_change_v1(doc) if codec.is_older_format(doc, COMMIT_FORMAT, None) else doc


def load_job_result(store: S3Store, layout: Layout, batch_id: str) -> JobResult:
    """The batch's job result: under the name this release writes, else under the older name (a
    batch computed before an upgrade, promoted after it: docs/formats.md)."""
    for key in (layout.job_result(batch_id), layout.legacy_job_result(batch_id)):
        data = store.get_bytes_or_none(key)
        if data is not None:
            return JobResult.from_bytes(data, store.uri(key))
    raise BatchNotReadyError(
        f"batch {batch_id}: no job result at {store.uri(layout.job_result(batch_id))}; "
        f"the Spark job has not completed (run or rerun the dedup step)"
    )


def withdraw_job_result(store: S3Store, layout: Layout, batch_id: str) -> None:
    """Delete the batch's job result, of either format: the next promotion finds none."""
    store.delete_keys([layout.job_result(batch_id), layout.legacy_job_result(batch_id)])
