"""Folding the commit log: versions follow one another, each batch commits once, heads move."""
from __future__ import annotations

import pytest

from eventdedup.commit.log import CommitRecord, CommittedState, PromotedObject
from eventdedup.errors import CorruptStateError


def record(version: int, batch: str, previous: str | None, heads: dict[str, str]) -> CommitRecord:
    obj = PromotedObject("data", f"deduped/{batch}.parquet", 10, '"e"', 1)
    return CommitRecord(version, batch, previous, f"token-{batch}", "2026-11-22T06:00:00+00:00", {}, (obj,), heads)


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
