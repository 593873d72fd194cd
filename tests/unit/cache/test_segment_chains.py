"""A cache key's chain (eventdedup.cache.heads): when a new head merges the newest objects, how
the log folds heads that build on older objects, and stores written before chains existed."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from eventdedup.cache.heads import ChainPolicy
from eventdedup.commit.changes import BatchChange
from eventdedup.commit.records import CommitRecord
from eventdedup.commit.state import CommittedState
from eventdedup.counts import BatchCounts
from eventdedup.errors import CorruptStateError

V3 = Path(__file__).parents[2] / "fixtures" / "formats" / "v3"
KB, MB = 1 << 10, 1 << 20
T0 = datetime(2026, 11, 22, tzinfo=timezone.utc)
FALLING = [100 * MB, 40 * MB, 16 * MB, 6_400 * KB, 2_560 * KB, 1_024 * KB, 410 * KB, 164 * KB]  # each 2.5x the next


@pytest.mark.parametrize("sizes, own, merged", [
    ([], 5 * KB, 0),  # a new key: its own run is the whole chain
    ([18 * MB], 1 * KB, 0),  # a straggler beside a big base: a tail of its own
    ([18 * MB, 40 * KB], 1 * KB, 1),  # the tail before it is small: merged
    ([18 * MB, 200 * KB], 120 * KB, 1),  # 120 KB x 2 >= 200 KB: merged; 320 KB x 2 < 18 MB: the base stays
    ([18 * MB, 200 * KB], 90 * KB, 0),  # 90 KB x 2 < 200 KB: builds on both
    ([1 * MB], 1 * MB, 1),  # as big as the base: merged with it
    ([2 * MB, 2 * MB - 1], 1 * KB, 0),  # 2 MB - 1 is not small and 2 KB < it: kept
    # a carry: 512 KB x 2 >= 1 MB, 1.5 MB x 2 >= 2 MB, ... every object merges into one of 127.5 MB
    ([64 * MB, 32 * MB, 16 * MB, 8 * MB, 4 * MB, 2 * MB, 1 * MB], 512 * KB, 7),
    (FALLING[:7], 1 * KB, 0),  # 8 objects with the new head: the most a chain holds
    (FALLING, 1 * KB, 1),  # a 9th would pass it: the newest merges; 165 KB x 2 < 410 KB stops there
])
def test_a_new_head_merges_the_newest_objects_by_the_documented_rules(sizes, own, merged) -> None:
    assert ChainPolicy().objects_to_merge(sizes, own) == merged


def test_every_object_of_a_chain_that_would_pass_its_length_is_merged_first() -> None:
    policy = ChainPolicy(merge_ratio=2, small_bytes=0, max_chain=3)
    # keep 2 (the most before the new head), then 2 x 10 < 100: stops
    assert policy.objects_to_merge([1000, 100, 10], 1) == 1
    assert policy.objects_to_merge([1000, 100], 1) == 0
    assert ChainPolicy(max_chain=1).objects_to_merge([18 * MB, 5 * MB], 1) == 2  # chains of one: copy-forward


def record(version: int, batch: str, heads: dict[str, str], bases: dict[str, tuple[str, ...]] | None = None,
           arrival: int = 490_000) -> CommitRecord:
    return CommitRecord(version, batch, None if version == 1 else f"b{version - 1}", "t",
                        (T0 + timedelta(hours=version)).isoformat(), BatchCounts(), (), heads,
                        BatchChange(arrival_hour=arrival), bases or {})


def test_a_head_that_builds_on_its_keys_older_objects_extends_the_chain_and_a_whole_one_replaces_it() -> None:
    state = CommittedState().apply(record(1, "b1", {"k": "s1", "j": "t1"}), "c1")
    state = state.apply(record(2, "b2", {"k": "s2"}, {"k": ("s1",)}), "c2")
    state = state.apply(record(3, "b3", {"k": "s3"}, {"k": ("s1", "s2")}), "c3")
    assert state.chain("k") == ("s1", "s2", "s3")
    assert state.cache_objects() == {"s1", "s2", "s3", "t1"}
    merged = state.apply(record(4, "b4", {"k": "s4"}, {"k": ("s1",)}), "c4")  # merged s2, s3 into s4
    assert merged.chain("k") == ("s1", "s4") and merged.cache_objects() == {"s1", "s4", "t1"}
    whole = merged.apply(record(5, "b5", {"k": "s5"}), "c5")
    assert whole.chain("k") == ("s5",) and dict(whole.cache_bases) == {}
    assert whole.cache_chains() == {"k": ("s5",), "j": ("t1",)}
    assert CommittedState.from_bytes(state.to_bytes(), "cp") == state  # bases survive a checkpoint


@pytest.mark.parametrize("bases", [("s2",), ("s1", "s4"), ("x",), ("s1", "s2", "s9")])
def test_a_head_that_builds_on_anything_but_its_chains_oldest_objects_is_a_broken_log(bases) -> None:
    state = CommittedState().apply(record(1, "b1", {"k": "s1"}), "c1")
    state = state.apply(record(2, "b2", {"k": "s2"}, {"k": ("s1",)}), "c2")
    with pytest.raises(CorruptStateError, match="not on the oldest objects of its chain"):
        state.apply(record(3, "b3", {"k": "s3"}, {"k": bases}), "c3")


def test_a_chain_naming_an_object_twice_is_a_broken_log() -> None:
    state = CommittedState().apply(record(1, "b1", {"k": "s1"}), "c1")
    with pytest.raises(CorruptStateError, match="names an object twice"):
        state.apply(record(2, "b2", {"k": "s1"}, {"k": ("s1",)}), "c2")


def test_bases_of_a_key_the_commit_writes_no_head_of_are_a_broken_log() -> None:
    state = CommittedState().apply(record(1, "b1", {"k": "s1"}), "c1")
    with pytest.raises(CorruptStateError, match="no head of"):
        state.apply(record(2, "b2", {}, {"k": ("s1",)}), "c2")


def test_a_key_that_leaves_the_window_takes_its_bases_with_it() -> None:
    state = CommittedState().apply(record(1, "b1", {"k": "s1"}, arrival=490_000), "c1")
    state = state.apply(record(2, "b2", {"k": "s2"}, {"k": ("s1",)}, arrival=490_001), "c2")
    late = record(3, "b3", {"m": "u3"}, arrival=490_400)
    state = state.apply(replace(late, change=replace(late.change, retain_from_hour=490_200)), "c3")
    assert state.chain("k") == () and dict(state.cache_bases) == {}
    assert state.cache_objects() == {"u3"}


def test_a_store_written_before_chains_reads_on_and_takes_chains() -> None:
    """tests/fixtures/formats/v3/written_by.py: a checkpoint of format 3 and a commit record of
    format 2, written by 374bf85, before heads could build on older objects."""
    state = CommittedState.from_bytes((V3 / "checkpoint.json.gz").read_bytes(), "checkpoint")
    old = CommitRecord.from_bytes((V3 / "commit-3.json").read_bytes(), "commit-3")
    assert dict(state.cache_bases) == {} and dict(old.cache_bases) == {}
    assert state.chain("2025-11-24/16/0001") == ("cache/date=2025-11-24/hour=16/bucket=0001/b2.seg",)
    state = state.apply(old, "commit-3")
    key = "2025-11-24/16/0001"
    tail = record(4, "b4", {key: "cache/date=2025-11-24/hour=16/bucket=0001/b4.seg"},
                  {key: ("cache/date=2025-11-24/hour=16/bucket=0001/b2.seg",)}, arrival=490_000 + 24 * 365 + 4)
    state = state.apply(CommitRecord.from_bytes(tail.to_bytes(), "commit-4"), "commit-4")
    assert state.chain(key) == ("cache/date=2025-11-24/hour=16/bucket=0001/b2.seg",
                                "cache/date=2025-11-24/hour=16/bucket=0001/b4.seg")
    assert b'"format": 3' in tail.to_bytes()
