"""The ingestion ledger folded from commit records: what counts as consumed, and when an entry leaves."""
from __future__ import annotations

from datetime import datetime, timezone

from eventdedup import codec
from eventdedup.commit.changes import BatchChange
from eventdedup.commit.ledger import (
    IngestionLedger,
    LedgerEntry,
    LedgerUpdate,
    listing_floor,
)
from eventdedup.commit.ledger_reader import LedgerReader, consumed_predicate
from eventdedup.commit.records import CommitRecord
from eventdedup.commit.state import CommittedState
from eventdedup.counts import BatchCounts
from eventdedup.keys import CacheKey
from eventdedup.s3store import ObjectInfo

A1 = ObjectInfo("landing/a.jsonl", 10, '"a1"')
A2 = ObjectInfo("landing/a.jsonl", 12, '"a2"')  # the same key uploaded again: other bytes
B = ObjectInfo("landing/b.jsonl", 10, '"b"')
HOUR = 490_000


def entries(ledger: IngestionLedger) -> dict[str, LedgerEntry]:
    return LedgerReader(None, ledger).entries()


def test_only_the_same_key_and_etag_consumed_by_an_earlier_commit_counts() -> None:
    ledger = LedgerReader(None, IngestionLedger().with_update(LedgerUpdate((A1,)), version=3, hour=HOUR))
    assert ledger.consumed_before(A1, 4) == LedgerEntry('"a1"', 3, HOUR)
    assert ledger.consumed_before(A1, 3) is None  # a rerun of commit 3 itself: its own input, not consumed before
    assert ledger.consumed_before(A2, 4) is None  # re-uploaded: new input
    assert ledger.consumed_before(B, 4) is None
    assert IngestionLedger().with_update(None, 1, HOUR) == IngestionLedger()  # a commit older than the ledger


def test_entries_leave_once_before_the_newest_horizon_and_their_batch_left_the_state() -> None:
    ledger = IngestionLedger().with_update(LedgerUpdate((A1,)), 1, HOUR).pruned(0)
    ledger = ledger.with_update(LedgerUpdate((B,), HOUR - 1), 2, HOUR + 10).pruned(0)
    assert set(entries(ledger)) == {A1.key, B.key}
    ledger = ledger.with_update(LedgerUpdate((), HOUR + 5), 3, HOUR + 11)
    assert set(entries(ledger.pruned(0))) == {A1.key, B.key}  # below the horizon, but commit 1 is in the state
    ledger = ledger.pruned(1)  # commit 1's batch has left the state
    assert set(entries(ledger)) == {B.key}
    ledger = ledger.with_update(LedgerUpdate((A2,), HOUR + 1), 4, HOUR + 6).pruned(3)  # an older horizon
    assert ledger.retain_from_hour == HOUR + 5 and set(entries(ledger)) == {A2.key, B.key}
    assert codec.from_doc(IngestionLedger, codec.to_doc(ledger)) == ledger


def test_listings_stay_above_what_the_ledger_remembers_and_below_the_legacy_floor_all_is_consumed() -> None:
    floor = datetime(2026, 11, 22, 5, tzinfo=timezone.utc)
    record = CommitRecord(1, "b1", None, "t", "2026-11-22T06:00:00+00:00", BatchCounts(), (), {},
                          BatchChange(ledger_update=LedgerUpdate((A1,), HOUR, floor.isoformat())))
    state = CommittedState().apply(record, "c1")
    assert listing_floor(state.ledger) == CacheKey.of_hour(HOUR + 2, 0).hour_start
    consumed = consumed_predicate(LedgerReader(None, state.ledger), state.version, datetime.fromisoformat(state.ledger.legacy_floor or ""))
    dated = ObjectInfo("landing/old.jsonl", 1, '"o"', last_modified=datetime(2026, 11, 22, 4, 59, tzinfo=timezone.utc))
    later = ObjectInfo("landing/new.jsonl", 1, '"n"', last_modified=floor)
    assert (consumed(A1), consumed(dated), consumed(later)) == (True, True, False)


def test_commit_records_carry_their_ledger_update_into_the_folded_state() -> None:
    record = CommitRecord(1, "b1", None, "t", "2026-11-22T06:00:00+00:00", BatchCounts(), (), {},
                          BatchChange(ledger_update=LedgerUpdate((A1, B), HOUR)))
    assert CommitRecord.from_bytes(record.to_bytes(), "c1") == record
    state = CommittedState().apply(record, "c1")
    assert {key: entry.version for key, entry in entries(state.ledger).items()} == {A1.key: 1, B.key: 1}
    assert CommittedState.from_bytes(state.to_bytes(), "cp").ledger == state.ledger


def test_a_retracted_commits_entries_count_for_nothing_and_an_earlier_consumption_still_counts() -> None:
    """An object is consumed when a commit that counts consumed that exact object (key and
    ETag): retracting the commit that took the re-uploaded A2 makes A2 new again; A1, which
    commit 1 took, stays consumed."""
    ledger = IngestionLedger().with_update(LedgerUpdate((A1, B)), 1, HOUR).with_update(LedgerUpdate((A2,)), 2, HOUR)
    ledger = ledger.without_versions({2})
    reader = LedgerReader(None, ledger)
    assert (reader.consumed_before(A1, 3), reader.consumed_before(A2, 3)) == (LedgerEntry('"a1"', 1, HOUR), None)
    assert reader.consumed_before(B, 3) == LedgerEntry('"b"', 1, HOUR)
    assert reader.entries() == {A1.key: LedgerEntry('"a1"', 1, HOUR), B.key: LedgerEntry('"b"', 1, HOUR)}
