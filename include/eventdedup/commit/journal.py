"""The promotion journal: everything needed to finish (or judge) a promotion after a crash.

Written with IfNoneMatch before the first copy; removed after the commit. A journal whose batch
has no commit is exactly what `eventdedup recover` looks for.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from typing import Any

from eventdedup import codec
from eventdedup.commit.job_result import JobResult, StagedObject
from eventdedup.commit.records import (
    COMMIT_FORMAT,
    CommitRecord,
    read_record,
    upgrade_change_v1,
    without_bases_format,
)
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store


@dataclass(frozen=True)
class PromotionJournal:
    """A promotion under way: the job result it promotes, whole, and what its commit will say."""

    token: str
    previous_batch_id: str | None
    job: JobResult

    @property
    def batch_id(self) -> str:
        return self.job.batch_id

    @property
    def target_version(self) -> int:
        return self.job.base_version + 1

    @property
    def entries(self) -> tuple[StagedObject, ...]:
        return self.job.objects

    @property
    def to_copy(self) -> tuple[StagedObject, ...]:
        """What the promotion copies before its commit: every entry but a load manifest, which an
        older job staged (docs/formats.md) and this release writes after the commit instead, from
        the commit record, in the same bytes (eventdedup.commit.view.publish_load_manifests)."""
        return tuple(entry for entry in self.job.objects if entry.kind != "load_manifest")

    def to_bytes(self) -> bytes:
        return codec.dumps(self, indent=True, format_version=COMMIT_FORMAT)

    @classmethod
    def from_bytes(cls, data: bytes, name: str) -> PromotionJournal:
        return read_record(cls, data, upgrade_journal, f"promotion journal {name}", "run `eventdedup recover`")

    def commit_record(self) -> CommitRecord:
        job = self.job
        heads = dict(sorted((entry.cache_key, entry.final_key) for entry in job.objects if entry.cache_key is not None))
        bases = dict(sorted((entry.cache_key, entry.builds_on) for entry in job.objects
                            if entry.cache_key is not None and entry.builds_on))
        return CommitRecord(self.target_version, job.batch_id, self.previous_batch_id, self.token, job.as_of,
                            job.counts, tuple(entry.promoted for entry in job.objects), heads, job.change, bases)


def upgrade_journal(doc: Any) -> Any:
    """A journal of any format as the current document: an unnumbered one's loose job result
    fields and `entries` made its `job`, format 2 read as having no bases (docs/formats.md)."""
    doc = without_bases_format(doc)
    if not codec.is_older_format(doc, COMMIT_FORMAT, None):
        return doc
    job = {key: value for key, value in doc.items() if key not in ("token", "previous_batch_id", "target_version",
                                                                     "entries")}
    job.update(base_version=int(doc["target_version"]) - 1, objects=doc["entries"])
    return {"format": COMMIT_FORMAT, "token": doc["token"], "previous_batch_id": doc["previous_batch_id"],
            "job": upgrade_change_v1(job)}


class EntryState(Enum):
    PROMOTED = "promoted"  # final object present with the staged size and ETag
    STAGED = "staged"  # not (correctly) promoted yet, but the staged source is intact
    LOST = "lost"  # neither: the batch cannot be completed from what is on S3


@dataclass(frozen=True)
class EntryCheck:
    entry: StagedObject
    state: EntryState
    detail: str


def check_entries(store: S3Store, entries: tuple[StagedObject, ...], threads: int = 16) -> list[EntryCheck]:
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(lambda entry: _check_entry(store, entry), entries))


def _check_entry(store: S3Store, entry: StagedObject) -> EntryCheck:
    final = store.head(entry.final_key)
    if final is not None and final.size == entry.staged.size and final.etag == entry.staged.etag:
        return EntryCheck(entry, EntryState.PROMOTED, "")
    staged = store.head(entry.staged.key)
    if staged is not None and staged.size == entry.staged.size and staged.etag == entry.staged.etag:
        return EntryCheck(entry, EntryState.STAGED, "")
    final_text = "missing" if final is None else f"size {final.size} ETag {final.etag}"
    staged_text = "missing" if staged is None else f"size {staged.size} ETag {staged.etag}"
    return EntryCheck(entry, EntryState.LOST,
                      f"{store.uri(entry.final_key)} is {final_text} and its staged source "
                      f"{store.uri(entry.staged.key)} is {staged_text}; expected size {entry.staged.size} "
                      f"ETag {entry.staged.etag}")


def list_journals(store: S3Store, layout: Layout) -> list[PromotionJournal]:
    journals = []
    for item in store.list(layout.journal_prefix):
        data = store.get_bytes_or_none(item.key)
        if data is not None:
            journals.append(PromotionJournal.from_bytes(data, store.uri(item.key)))
    return journals


def journal_or_none(store: S3Store, layout: Layout, batch_id: str) -> PromotionJournal | None:
    key = layout.journal(batch_id)
    data = store.get_bytes_or_none(key)
    return None if data is None else PromotionJournal.from_bytes(data, store.uri(key))
