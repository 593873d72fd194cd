"""Folding the commit log: versions follow one another, each batch commits once, heads move."""
from __future__ import annotations

import gzip

import orjson
import pytest

from eventdedup.commit.changes import BatchChange
from eventdedup.commit.records import CommitRecord, PromotedObject
from eventdedup.commit.state import CommittedState
from eventdedup.counts import BatchCounts
from eventdedup.errors import CorruptStateError
from eventdedup.inputs.intervals import interval_start_of
from eventdedup.keys import CacheKey


def record(version: int, batch: str, previous: str | None, heads: dict[str, str]) -> CommitRecord:
    obj = PromotedObject("data", f"deduped/{batch}.parquet", 10, '"e"', 1)
    return CommitRecord(version, batch, previous, f"token-{batch}", "2026-11-22T06:00:00+00:00", BatchCounts(), (obj,),
                        heads)


def test_state_folds_batches_and_latest_cache_heads() -> None:
    state = CommittedState().apply(record(1, "b1", None, {"k1": "s1", "k2": "s2"}), "c1")
    state = state.apply(record(2, "b2", "b1", {"k2": "s2b"}), "c2")
    assert (state.version, state.last_batch_id) == (2, "b2")
    assert dict(state.batches) == {"b1": 1, "b2": 2}
    assert dict(state.cache_heads) == {"k1": "s1", "k2": "s2b"}


def test_a_gap_or_a_wrong_predecessor_is_a_broken_log() -> None:
    state = CommittedState().apply(record(1, "b1", None, {}), "c1")
    with pytest.raises(CorruptStateError, match="does not follow version 1"):
        state.apply(record(3, "b3", "b1", {}), "c3")
    with pytest.raises(CorruptStateError, match="does not follow version 1"):
        state.apply(record(2, "b2", "bX", {}), "c2")


def test_a_batch_committed_twice_is_a_broken_log() -> None:
    state = CommittedState().apply(record(1, "b1", None, {}), "c1")
    with pytest.raises(CorruptStateError, match="commits batch b1 a second time"):
        state.apply(record(2, "b1", "b1", {}), "c2")


def test_checkpoint_bytes_round_trip_and_garbage_is_named() -> None:
    state = CommittedState().apply(record(1, "b1", None, {"k1": "s1"}), "c1")
    assert CommittedState.from_bytes(state.to_bytes(), "cp") == state
    with pytest.raises(CorruptStateError, match="checkpoint cp does not parse"):
        CommittedState.from_bytes(b"not gzip", "cp")


def test_commit_record_bytes_round_trip() -> None:
    original = record(4, "b4", "b3", {"2026-11-22/05/0001": "seg"})
    assert CommitRecord.from_bytes(original.to_bytes(), "c4") == original


HOUR = 490_000  # an hour index (hours since the epoch) in 2025


def windowed(version: int, batch: str, previous: str | None, window_start: int, window: int = 3) -> CommitRecord:
    """Batch `batch` checked hours from `window_start`; one head per hour it wrote (that hour)."""
    heads = {str(CacheKey.of_hour(window_start + window, 0)): f"seg-{batch}"}
    return CommitRecord(version, batch, previous, f"t-{batch}", "2026-11-22T06:00:00+00:00", BatchCounts(), (), heads,
                        BatchChange(window_start, window_start - window,
                                    interval=interval_start_of(batch) is not None))


def test_batches_and_heads_that_arrived_before_the_horizon_leave_the_state() -> None:
    state = CommittedState()
    for i in range(8):  # batch i arrives at HOUR + i + 3 (window 3), writes the head of that hour
        state = state.apply(windowed(i + 1, f"b{i}", state.last_batch_id, HOUR + i), f"c{i}")
    assert state.arrivals["b7"] == HOUR + 10 and state.latest_arrival_hour == HOUR + 10
    # Horizon: the newest window start (HOUR + 7) minus one window (3).
    assert state.retain_from_hour == HOUR + 4
    # Kept: whatever arrived at or after the horizon: heads written by b1..b7, batches b1..b7.
    assert sorted(state.cache_heads) == [str(CacheKey.of_hour(HOUR + h, 0)) for h in range(4, 11)]
    assert dict(state.batches) == {f"b{i}": i + 1 for i in range(1, 8)}
    assert dict(state.left_since_checkpoint) == {"b0": 1}


def test_a_head_of_an_old_hour_lives_a_window_from_its_last_write_not_from_its_hour() -> None:
    old_hour = str(CacheKey.of_hour(HOUR - 1000, 0))
    state = CommittedState()
    for i in range(8):
        rec = windowed(i + 1, f"b{i}", state.last_batch_id, HOUR + i)
        if i == 6:  # b6 re-sends an event 1,000 hours old: its entry lives from b6's arrival
            rec = CommitRecord(rec.version, rec.batch_id, rec.previous_batch_id, rec.token, rec.as_of, BatchCounts(), (),
                               {**rec.cache_heads, old_hour: "seg-old"}, rec.change)
        state = state.apply(rec, f"c{i}")
    assert state.cache_heads[old_hour] == "seg-old" and state.head_arrivals[old_hour] == HOUR + 9
    for i in range(8, 13):
        state = state.apply(windowed(i + 1, f"b{i}", state.last_batch_id, HOUR + i), f"c{i}")
    assert state.retain_from_hour == HOUR + 9 and old_hour in state.cache_heads
    state = state.apply(windowed(14, "b13", "b12", HOUR + 13), "c13")
    assert state.retain_from_hour == HOUR + 10 and old_hour not in state.cache_heads


def test_arrivals_never_move_back_along_the_log() -> None:
    state = CommittedState()
    for i in range(3):
        state = state.apply(windowed(i + 1, f"b{i}", state.last_batch_id, HOUR + 10 + i), f"c{i}")
    late = state.apply(windowed(4, "late", "b2", HOUR), "c4")  # a manual batch staged long ago
    assert late.arrivals["late"] == HOUR + 15 and late.retain_from_hour == HOUR + 9 and "late" in late.batches


def test_the_latest_interval_batch_is_kept_after_it_leaves_the_state() -> None:
    interval_id = "20261122T050000Z"
    state = CommittedState().apply(windowed(1, interval_id, None, HOUR), "c1")
    state = state.apply(windowed(2, "manual", interval_id, HOUR + 10), "c2")
    assert interval_id not in state.batches and state.latest_interval_batch_id == interval_id
    assert state.left_through_version == 1


def test_a_checkpoint_keeps_the_bounds_and_one_written_before_them_still_loads() -> None:
    state = CommittedState()
    for i in range(6):
        state = state.apply(windowed(i + 1, f"b{i}", state.last_batch_id, HOUR + i), f"c{i}")
    loaded = CommittedState.from_bytes(state.to_bytes(), "cp")
    assert loaded == state and not loaded.left_since_checkpoint  # markers are written before a checkpoint
    old = gzip.compress(orjson.dumps({"version": 2, "batches": {"20261122T050000Z": 1, "m": 2},
                                      "cache_heads": {"2026-11-22/05/0000": "s"}, "last_batch_id": "m"}))
    legacy = CommittedState.from_bytes(old, "old-cp")
    assert (legacy.latest_interval_batch_id, legacy.retain_from_hour, dict(legacy.batches)) == (
        "20261122T050000Z", None, {"20261122T050000Z": 1, "m": 2})


def test_the_state_knows_the_etag_of_every_chain_object_and_of_no_other() -> None:
    """Each commit's heads take the ETag its record lists them with; an object that merged into a
    head or whose key left the state drops out; a checkpoint keeps them; one without them is
    the same state (its copies are confirmed by a 304 instead)."""
    def cache_record(version: int, batch: str, previous: str | None, heads: dict[str, str],
                     bases: dict[str, tuple[str, ...]]) -> CommitRecord:
        objects = tuple(PromotedObject("cache", key, 10, f'"etag-{key}"') for key in heads.values())
        return CommitRecord(version, batch, previous, f"t-{batch}", "2026-11-22T06:00:00+00:00", BatchCounts(),
                            (*objects, PromotedObject("data", f"data/{batch}", 5, '"d"')), heads, BatchChange(),
                            cache_bases=bases)

    state = CommittedState()
    state = state.apply(cache_record(1, "b1", None, {"k1": "k1/b1", "k2": "k2/b1"}, {}), "c1")
    state = state.apply(cache_record(2, "b2", "b1", {"k1": "k1/b2"}, {"k1": ("k1/b1",)}), "c2")  # b2 builds on b1's
    state = state.apply(cache_record(3, "b3", "b2", {"k2": "k2/b3"}, {}), "c3")  # b3 merges b1's k2
    assert state.object_etags == {key: f'"etag-{key}"' for key in ("k1/b1", "k1/b2", "k2/b3")}
    assert state.chain_etags().keys() == {obj for chain in state.cache_chains().values() for obj in chain}
    restored = CommittedState.from_bytes(state.to_bytes(), "checkpoint")
    assert restored.object_etags == state.object_etags
    older = orjson.loads(gzip.decompress(state.to_bytes()))
    del older["object_etags"]  # a checkpoint of a release that did not record them (docs/formats.md)
    without = CommittedState.from_bytes(gzip.compress(orjson.dumps(older)), "older")
    assert without == state and without.object_etags == {}
