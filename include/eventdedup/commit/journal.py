"""The promotion journal: everything needed to finish (or judge) a promotion after a crash.

Written with IfNoneMatch before the first copy; removed after the commit. A journal whose batch
has no commit is exactly what `eventdedup recover` looks for.
"""
from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum

import orjson

from eventdedup.commit.job_result import JobResult, StagedObject
from eventdedup.commit.ledger import LedgerUpdate
from eventdedup.commit.log import CommitRecord, PromotedObject
from eventdedup.errors import CorruptStateError
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store


@dataclass(frozen=True)
class PromotionJournal:
    batch_id: str
    token: str
    target_version: int
    previous_batch_id: str | None
    as_of: str
    counts: Mapping[str, int]
    entries: tuple[StagedObject, ...]
    window_start_hour: int | None = None
    retain_from_hour: int | None = None
    ledger_update: LedgerUpdate | None = None
    partitions: int | None = None
    retracts: tuple[str, ...] = ()
    reason: str | None = None
    reshard: tuple[int, int] | None = None

    @classmethod
    def for_job(cls, job: JobResult, token: str, previous_batch_id: str | None) -> PromotionJournal:
        return cls(job.batch_id, token, job.base_version + 1, previous_batch_id, job.as_of, job.counts, job.objects,
                   job.window_start_hour, job.retain_from_hour, job.ledger_update, job.partitions, job.retracts,
                   job.reason, job.reshard)

    def to_bytes(self) -> bytes:
        return orjson.dumps({
            "batch_id": self.batch_id, "token": self.token, "target_version": self.target_version,
            "previous_batch_id": self.previous_batch_id, "as_of": self.as_of, "counts": dict(self.counts),
            "entries": [entry.to_json() for entry in self.entries],
            "window_start_hour": self.window_start_hour, "retain_from_hour": self.retain_from_hour,
            "ledger": None if self.ledger_update is None else self.ledger_update.to_json(),
            "partitions": self.partitions, "retracts": list(self.retracts), "reason": self.reason,
            "reshard": None if self.reshard is None else list(self.reshard),
        }, option=orjson.OPT_INDENT_2)

    @classmethod
    def from_bytes(cls, data: bytes, name: str) -> PromotionJournal:
        try:
            doc = orjson.loads(data)
            return cls(doc["batch_id"], doc["token"], int(doc["target_version"]), doc["previous_batch_id"],
                       doc["as_of"], dict(doc["counts"]), tuple(StagedObject.from_json(e) for e in doc["entries"]),
                       doc.get("window_start_hour"), doc.get("retain_from_hour"),
                       LedgerUpdate.from_json(doc.get("ledger")), doc.get("partitions"),
                       tuple(doc.get("retracts", ())), doc.get("reason"),
                       None if doc.get("reshard") is None else (int(doc["reshard"][0]), int(doc["reshard"][1])))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise CorruptStateError(f"promotion journal {name} does not parse: {exc}") from None

    def commit_record(self) -> CommitRecord:
        objects = tuple(
            PromotedObject(e.kind, e.final_key, e.staged.size, e.staged.etag, e.rows) for e in self.entries
        )
        heads = {e.cache_key: e.final_key for e in self.entries if e.cache_key is not None}
        return CommitRecord(self.target_version, self.batch_id, self.previous_batch_id, self.token,
                            self.as_of, dict(self.counts), objects, heads, self.window_start_hour,
                            self.retain_from_hour, self.ledger_update, self.partitions, self.retracts, self.reason,
                            self.reshard)


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
