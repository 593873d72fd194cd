"""Lookups in the ingestion ledger (eventdedup.commit.ledger): whether an object was consumed before
a log version, reading the ledger's parts from S3 as a lookup needs them and rebuilding a missing
part from the commit log; what a listing may take (`consumed_predicate`) and which of a batch's
inputs its job reads (`inputs_to_read`)."""
from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from eventdedup.commit.changes import Retraction
from eventdedup.commit.ledger import IngestionLedger, LedgerEntry, LedgerPart, decode_part
from eventdedup.commit.log import read_commit
from eventdedup.errors import CorruptStateError
from eventdedup.inputs.manifest import BatchManifest
from eventdedup.keys import hour_index_at
from eventdedup.layout import Layout
from eventdedup.s3store import ObjectInfo, S3Store

log = logging.getLogger(__name__)


class LedgerReader:
    """Lookups in a ledger, reading its parts from S3 as they are needed (each once)."""

    def __init__(self, store: S3Store | None, ledger: IngestionLedger, layout: Layout | None = None) -> None:
        self.store, self.ledger, self.layout = store, ledger, layout
        self._older: dict[str, list[LedgerEntry]] = {}  # key -> its entries in the parts read
        self._read: set[str] = set()
        self._hours_read: set[int | None] = set()  # every part that may hold objects of these hours is read

    def consumed_before(self, info: ObjectInfo, version: int, dated: int | None = None) -> LedgerEntry | None:
        """The entry that shows this exact object (key, ETag and, where both are known, the hour
        of its LastModified: S3 dates an object version once) consumed by a commit before
        `version`. The parts read are those whose span holds its LastModified's hour (or
        `dated`); every part when neither is known. So the same bytes uploaded again later are a
        new object version, new input (their events are checked against the window like any)."""
        if info.last_modified is not None:
            dated = hour_index_at(info.last_modified)
        self._read_parts(dated)
        matching = [entry for entry in self._held(info.key)
                    if entry.etag == info.etag and entry.version < version and self.ledger.is_live(entry)
                    and (entry.dated is None or dated is None or entry.dated == dated)]
        return max(matching, key=lambda entry: entry.version, default=None)

    def entries(self) -> dict[str, LedgerEntry]:
        """Every object key the ledger holds, with its latest consumption that counts: every part is read."""
        self._read_parts(None)
        latest: dict[str, LedgerEntry] = {}
        for key in {*self._older, *self.ledger.recent}:
            live = [entry for entry in self._held(key) if self.ledger.is_live(entry)]
            if live:
                latest[key] = max(live, key=lambda entry: entry.version)
        return latest

    def _held(self, key: str) -> tuple[LedgerEntry, ...]:
        """Every entry of an object key in the parts read and since the checkpoint."""
        return (*self._older.get(key, ()), *self.ledger.recent.get(key, ()))

    def _read_parts(self, dated: int | None) -> None:
        if dated in self._hours_read or None in self._hours_read:
            return
        for part in self.ledger.parts:
            if part.key in self._read or not part.may_hold(dated):
                continue
            if self.store is None:
                raise CorruptStateError(f"ingestion ledger part {part.key} cannot be read without a store")
            data = self.store.get_immutable_or_none(part.key)  # a part is written once, by its range
            entries = (decode_part(data, self.store.uri(part.key)) if data is not None
                       else self._rebuilt(part))
            for key, entry in entries:
                self._older.setdefault(key, []).append(entry)
            self._read.add(part.key)
        self._hours_read.add(dated)  # only once every part it needs is read (a failed read is tried again)

    def _rebuilt(self, part: LedgerPart) -> list[tuple[str, LedgerEntry]]:
        """A missing part's entries, from the commits it was written from (a part is derived
        data, like a checkpoint: the log holds every entry)."""
        assert self.store is not None
        if self.layout is None:
            raise CorruptStateError(f"ingestion ledger part {self.store.uri(part.key)} is named by the state but "
                                    "missing; reading it as empty would take its objects again")
        log.warning("ingestion ledger part %s is missing: rebuilding it from commits %d to %d",
                    self.store.uri(part.key), part.first_version, part.last_version)
        ledger, versions = IngestionLedger(), {}
        for version in range(part.first_version, part.last_version + 1):
            record = read_commit(self.store, self.layout, version)
            if record is None:
                raise CorruptStateError(f"ingestion ledger part {self.store.uri(part.key)} is missing and commit "
                                        f"{version} it was written from cannot be read")
            versions[record.batch_id] = version
            change = record.change
            if isinstance(change, Retraction):  # as the fold took them out before the part was written
                ledger = ledger.without_versions({*change.retracted_versions,
                                                  *(versions[b] for b in change.retracts if b in versions)})
            elif record.batch_change is not None:
                ledger = ledger.with_update(record.batch_change.ledger_update, version,
                                            hour_index_at(datetime.fromisoformat(record.as_of)))
        return [(key, entry) for key, held in ledger.recent.items() for entry in held]


def consumed_predicate(ledger: LedgerReader, version: int,
                       floor: datetime | None) -> Callable[[ObjectInfo], bool]:
    """Whether a listed object is consumed as of log `version` (for a batch committing on top of
    it): the ledger holds it (same key and ETag), or it is dated before the legacy floor."""
    def consumed(info: ObjectInfo) -> bool:
        if floor is not None and info.last_modified is not None and info.last_modified < floor:
            return True
        return ledger.consumed_before(info, version + 1) is not None
    return consumed


def inputs_to_read(ledger: LedgerReader, base_version: int, manifest: BatchManifest,
                   recorded_inputs: frozenset[ObjectInfo] | None) -> list[tuple[int, ObjectInfo]]:
    """The manifest's inputs (by index) that no batch committed up to `base_version` consumed: the
    ledger's exactly-once rule. A prefix batch asked to reprocess reads them all; a rerun reads
    exactly the inputs its commit recorded (`recorded_inputs`). The parts read are those that may
    hold an input, by the LastModified hour its manifest recorded (all, where it did not)."""
    if recorded_inputs is not None:
        return [(index, info) for index, info in enumerate(manifest.inputs) if info in recorded_inputs]
    if manifest.selector.reprocess:
        return list(enumerate(manifest.inputs))
    to_read = []
    for index, info in enumerate(manifest.inputs):
        entry = ledger.consumed_before(info, base_version + 1, manifest.dated_hour(index))
        if entry is None:
            to_read.append((index, info))
        else:
            log.info("batch %s: input %s (ETag %s) was consumed by log version %d; skipped (--reprocess to read it "
                     "again)", manifest.batch_id, info.key, info.etag, entry.version)
    return to_read
