"""The Spark job refuses, with the object named, rather than produce a wrong batch."""
from __future__ import annotations

from dataclasses import replace

import pytest

from eventdedup.commit.log import load_committed_state
from eventdedup.errors import CorruptStateError, InputChangedError
from eventdedup.inputs.manifest import freeze_batch_inputs
from eventdedup.inputs.selector import InputSelector
from eventdedup.job import read_units
from eventdedup.job.driver import run_dedup_job
from eventdedup.keys import is_guard_head_key
from eventdedup.layout import Layout
from eventdedup.ops.fsck import fsck
from eventdedup.ops.pipeline import run_batch, verify_rerun

from ..support.helpers import NOW, bucket_listing, put_lines

E = b'{"event_id":"e1","created_at":"2026-11-22T03:10:00Z"}'


def test_an_input_changed_after_staging_fails_the_job_naming_it(store, config, spark) -> None:
    put_lines(store, "landing/b1/1.jsonl", [E])
    freeze_batch_inputs(store, config, "b1", InputSelector(input_prefix="landing/b1/"), NOW)
    put_lines(store, "landing/b1/1.jsonl", [E, E])
    with pytest.raises(InputChangedError, match=f"s3://{store.bucket}/landing/b1/1.jsonl changed or vanished"):
        run_dedup_job(spark, config, "b1")


def test_a_large_input_changed_after_staging_fails_the_job_naming_it(monkeypatch, store, config, spark) -> None:
    # Large enough to be read in ranges: the planner's look at its first bytes meets the change first.
    monkeypatch.setattr(read_units, "MAX_SPLIT_BYTES", 1024)
    monkeypatch.setattr(read_units, "OPEN_COST_BYTES", 256)
    put_lines(store, "landing/b1/1.jsonl", [E] * 200)
    freeze_batch_inputs(store, config, "b1", InputSelector(input_prefix="landing/b1/"), NOW)
    put_lines(store, "landing/b1/1.jsonl", [E] * 201)
    with pytest.raises(InputChangedError, match=f"s3://{store.bucket}/landing/b1/1.jsonl changed or vanished"):
        run_dedup_job(spark, config, "b1")


def _damage(store, config, spark, damage: str, what: str) -> str:
    put_lines(store, "landing/b1/1.jsonl", [E])
    run_batch(store, config, "b1", InputSelector(input_prefix="landing/b1/"), NOW, lambda: spark)
    heads = load_committed_state(store, Layout(config.layout)).cache_heads
    (segment,) = [key for name, key in heads.items() if is_guard_head_key(name) == (what == "id guard")]
    data = store.get_bytes(segment)
    if damage == "delete":
        store.delete_keys([segment])
    else:
        store.put_bytes(segment, data[:-7] if damage == "truncate" else b"\x00" * len(data))
    put_lines(store, "landing/b2/1.jsonl", [E])
    return segment


@pytest.mark.parametrize("what", ["cache segment", "id guard"])
@pytest.mark.parametrize("damage", ["truncate", "garbage", "delete"])
def test_a_damaged_cache_object_halts_the_batch_naming_the_object(store, config, spark, damage, what) -> None:
    """An executor without a copy of the committed object (cold, or copies off) reads S3's bytes."""
    cold = replace(config, spark=replace(config.spark, local_cache_bytes=0))
    segment = _damage(store, cold, spark, damage, what)
    with pytest.raises(CorruptStateError, match=f"{what} s3://{store.bucket}/{segment}"):
        run_batch(store, cold, "b2", InputSelector(input_prefix="landing/b2/"), NOW, lambda: spark)
    assert load_committed_state(store, Layout(config.layout)).batches == {"b1": 1}


@pytest.mark.parametrize("damage", ["garbage", "delete"])
def test_a_warm_executor_decides_from_the_committed_bytes_and_fsck_names_the_damage(store, config, spark,
                                                                                    damage) -> None:
    """A warm executor's copy of the ETag the log records is the committed bytes: the batch decides
    from them (e1 is a duplicate of b1's), and fsck, which the recovery gate runs, names the
    object S3 no longer holds as committed; verify-rerun, which asks S3, refuses it."""
    segment = _damage(store, config, spark, damage, "cache segment")
    outcome = run_batch(store, config, "b2", InputSelector(input_prefix="landing/b2/"), NOW, lambda: spark)
    assert outcome.counts["cross_batch_duplicates"] == 1 and outcome.counts["output_rows"] == 0
    report = fsck(store, config)
    named = [item.key for item in report.missing] + [item.key for item, _ in report.changed]
    assert named == [segment] and not report.consistent
    with pytest.raises(CorruptStateError, match=f"cache segment s3://{store.bucket}/{segment}"):
        verify_rerun(store, config, "b2", spark)


@pytest.mark.parametrize("damage", [b"{not json", b"", b'{"format": 1}'])
def test_a_commit_record_that_does_not_parse_halts_the_next_batch_before_any_work(store, config, spark, damage) -> None:
    put_lines(store, "landing/b1/1.jsonl", [E])
    run_batch(store, config, "b1", InputSelector(input_prefix="landing/b1/"), NOW, lambda: spark)
    layout = Layout(config.layout)
    store.put_bytes(layout.commit(1), damage)
    put_lines(store, "landing/b2/1.jsonl", [E])
    with pytest.raises(CorruptStateError, match=f"commit record s3://{store.bucket}/_eventdedup/log/0+1.json"):
        run_batch(store, config, "b2", InputSelector(input_prefix="landing/b2/"), NOW, lambda: spark)
    assert not [key for key in bucket_listing(store) if key.startswith(layout.staging_root("b2"))]


def test_an_empty_batch_commits_with_zero_counts(store, config, spark) -> None:
    outcome = run_batch(store, config, "empty", InputSelector(input_prefix="landing/nothing/"), NOW, lambda: spark)
    assert outcome.version == 1 and outcome.counts["input_lines"] == 0 and outcome.counts["output_rows"] == 0
