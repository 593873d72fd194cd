"""Every landing object is processed exactly once, however late it becomes visible.

Objects are dated through the fault proxy's LIST rewriting (`redate`): a test places an object in
any interval, or makes it appear late, dated inside an interval already committed, without
waiting for the clock. Expected rows follow the documented rules (eventdedup.inputs.landing,
eventdedup.commit.ledger): an interval batch takes every landing object of its lookback that is
visible before its end and not in the ledger; a prefix batch skips what the ledger holds unless
asked to reprocess; the sweep takes unconsumed objects older than the lookback.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from eventdedup.commit.ledger_reader import LedgerReader
from eventdedup.commit.log import committed_record, load_committed_state
from eventdedup.config import Config
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.pipeline import run_batch, verify_rerun
from eventdedup.ops.scheduling import BatchPlan, stage_planned_batch
from eventdedup.ops.status import ledger_lag
from eventdedup.ops.sweep import stage_sweep
from eventdedup.s3store import S3Store

from ..support.helpers import NOW, as_format_1, commit_counts, committed_rows, put_lines
from ..support.landing import interval_batch, land, through_proxy

STEP = timedelta(minutes=5)
T0 = NOW - timedelta(hours=1)  # 05:00


def event(event_id: str, minute: int, v: int = 1) -> bytes:
    return b'{"event_id":"%s","created_at":"2026-11-22T05:%02d:00Z","v":%d}' % (event_id.encode(), minute, v)


def run_interval(store: S3Store, config: Config, start: datetime, spark) -> None:
    selector = InputSelector(since=start, until=start + STEP)
    run_batch(store, config, start.strftime("%Y%m%dT%H%M%SZ"), selector, start + STEP + timedelta(minutes=1),
              lambda: spark)


def ledger_of(store: S3Store, config: Config) -> dict[str, str]:
    """object key -> the batch whose commit consumed it."""
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    entries = LedgerReader(store, state.ledger, layout).entries()
    return {key: committed_record(store, layout, entry.version).batch_id for key, entry in entries.items()}


def test_an_object_dated_in_a_committed_interval_is_taken_by_the_next_one_exactly_once(
        dating_proxy, dated, s3_server, bucket, spark) -> None:
    store, config = through_proxy(dating_proxy, s3_server, bucket)
    land(store, dated, "landing/a.jsonl", [event("a", 1)], T0 + timedelta(minutes=1))
    run_interval(store, config, T0, spark)
    # A slow upload: visible only now, dated (upload start) inside the interval just committed.
    land(store, dated, "landing/straggler.jsonl", [event("s", 2), event("a", 1)], T0 + timedelta(minutes=2))
    land(store, dated, "landing/b.jsonl", [event("b", 6)], T0 + STEP + timedelta(minutes=1))
    run_interval(store, config, T0 + STEP, spark)
    run_interval(store, config, T0 + 2 * STEP, spark)  # nothing new: the straggler is in the ledger
    # Re-uploaded under the same key with other bytes: new input, deduplicated as usual.
    land(store, dated, "landing/straggler.jsonl", [event("s", 2), event("s2", 12)], T0 + 2 * STEP + timedelta(minutes=1))
    run_interval(store, config, T0 + 3 * STEP, spark)

    batches = [(T0 + i * STEP).strftime("%Y%m%dT%H%M%SZ") for i in range(4)]
    assert sorted((r["event_id"], r["batch_id"]) for r in committed_rows(store, config, "data")) == sorted([
        ("a", batches[0]), ("s", batches[1]), ("b", batches[1]), ("s2", batches[3])])
    assert sorted((r["event_id"], r["batch_id"], r["reason"], r["source_object"])
                  for r in committed_rows(store, config, "audit")) == sorted([
        ("a", batches[1], "cross_batch_natural", "landing/straggler.jsonl"),
        ("s", batches[3], "cross_batch_natural", "landing/straggler.jsonl")])
    assert ledger_of(store, config) == {"landing/a.jsonl": batches[0], "landing/b.jsonl": batches[1],
                                        "landing/straggler.jsonl": batches[3]}
    counts = commit_counts(store, config)
    assert [counts[b]["input_lines"] for b in batches] == [1, 3, 0, 2]


def test_overlapping_manual_selections_never_process_an_object_twice(dating_proxy, dated, s3_server, bucket,
                                                                      spark) -> None:
    store, config = through_proxy(dating_proxy, s3_server, bucket)
    put_lines(store, "landing/day/x.jsonl", [event("x", 1)])
    put_lines(store, "landing/day/y.jsonl", [event("y", 2)])
    # Both staged before either runs: their frozen lists overlap whole.
    for batch_id, prefix in (("m1", "landing/day/"), ("m2", "landing/")):
        stage_planned_batch(store, config, BatchPlan(batch_id, InputSelector(input_prefix=prefix)), NOW)
    put_lines(store, "landing/z.jsonl", [event("z", 3)])
    for batch_id, prefix in (("m1", "landing/day/"), ("m2", "landing/")):
        run_batch(store, config, batch_id, InputSelector(input_prefix=prefix), NOW, lambda: spark)
    # Asked explicitly, an operator reprocesses a consumed prefix: every event an audited duplicate.
    run_batch(store, config, "again", InputSelector(input_prefix="landing/day/", reprocess=True), NOW,
              lambda: spark)

    assert sorted((r["event_id"], r["batch_id"]) for r in committed_rows(store, config, "data")) == [
        ("x", "m1"), ("y", "m1")]
    assert sorted((r["event_id"], r["batch_id"], r["reason"]) for r in committed_rows(store, config, "audit")) == [
        ("x", "again", "cross_batch_natural"), ("y", "again", "cross_batch_natural")]
    counts = commit_counts(store, config)
    assert (counts["m2"]["inputs_already_consumed"], counts["m2"]["input_lines"]) == (2, 0)
    assert counts["again"]["inputs_already_consumed"] == 0
    assert ledger_of(store, config) == {"landing/day/x.jsonl": "again", "landing/day/y.jsonl": "again"}
    # A rerun reads what its commit recorded, not what the ledger says now: each is reproduced exactly.
    assert [verify_rerun(store, config, batch, spark) for batch in ("m1", "m2", "again")] == [[], [], []]
    # m2 froze its list before z landed: z waits for a batch, and status says so.
    landed = store.client.head_object(Bucket=bucket, Key="landing/z.jsonl")["LastModified"]  # the server's date
    lag = ledger_lag(store, config, load_committed_state(store, Layout(config.layout)), landed + timedelta(seconds=1))
    assert (lag["unconsumed"], lag["oldest_unconsumed"]) == (1, "landing/z.jsonl")


def test_the_sweep_takes_an_object_older_than_the_lookback_that_no_batch_consumed(
        dating_proxy, dated, s3_server, bucket, spark) -> None:
    store, config = through_proxy(dating_proxy, s3_server, bucket, inputs={"lookback_hours": 1})
    land(store, dated, "landing/on-time.jsonl", [event("t", 1)], T0 + timedelta(minutes=1))
    # Visible only now, but dated three hours back: older than the lookback of any batch from now on.
    land(store, dated, "landing/old.jsonl", [event("o", 1), event("t", 1)], T0 - timedelta(hours=3))
    run_interval(store, config, T0, spark)
    assert ledger_of(store, config) == {"landing/on-time.jsonl": "20261122T050000Z"}

    found = stage_sweep(store, config)  # the log stands at 05:05; the sweep range ends an hour before
    assert found is not None and [info.key for info in found.manifest.inputs] == ["landing/old.jsonl"]
    assert "landing/old.jsonl" in found.message(store)
    run_batch(store, config, found.plan.batch_id, found.plan.selector, NOW, lambda: spark)
    assert found.plan.batch_id == "sweep-20261122T040500Z"
    assert sorted((r["event_id"], r["batch_id"]) for r in committed_rows(store, config, "data")) == [
        ("o", found.plan.batch_id), ("t", "20261122T050000Z")]
    assert [(r["event_id"], r["reason"]) for r in committed_rows(store, config, "audit")] == [
        ("t", "cross_batch_natural")]
    assert stage_sweep(store, config) is None  # swept once: nothing waits any more


def test_an_interval_longer_than_the_lookback_takes_its_whole_interval(dating_proxy, dated, s3_server, bucket,
                                                                       spark) -> None:
    store, config = through_proxy(dating_proxy, s3_server, bucket, inputs={"lookback_hours": 3})
    land(store, dated, "landing/early.jsonl", [event("x", 1)], T0 - timedelta(hours=5))
    batch = interval_batch(store, config, T0 - timedelta(hours=6), T0, spark)  # a 6-hour interval
    assert ledger_of(store, config) == {"landing/early.jsonl": batch}


def test_a_wider_lookback_or_a_manual_batch_never_makes_the_sweep_retake_what_the_ledger_forgot(
        dating_proxy, dated, s3_server, bucket, spark) -> None:
    """The ledger forgets entries older than lookback + sweep as of the latest interval; a sweep
    under a wider configuration, or after a manual batch whose as_of is a clock far ahead of the
    pipeline, must not reach below what it remembers."""
    narrow = {"inputs": {"lookback_hours": 1, "sweep_hours": 2}, "dedup": {"window_hours": 2}}
    store, config = through_proxy(dating_proxy, s3_server, bucket, **narrow)
    land(store, dated, "landing/a.jsonl", [event("a", 1)], T0 + timedelta(minutes=1))
    first = interval_batch(store, config, T0, T0 + STEP, spark)
    for start, end in ((STEP, timedelta(hours=2)), (timedelta(hours=2), timedelta(hours=4)),
                       (timedelta(hours=4), timedelta(hours=5))):  # the log moves on (no interval longer
        interval_batch(store, config, T0 + start, T0 + end, spark)  # than the 2-hour window)
    interval_batch(store, config, T0 + timedelta(hours=5), T0 + timedelta(hours=5) + STEP, spark)  # a is forgotten
    assert "landing/a.jsonl" not in ledger_of(store, config)
    land(store, dated, "landing/republish/m.jsonl", [event("m", 2)], T0 + timedelta(hours=9))
    run_batch(store, config, "republish-1", InputSelector(input_prefix="landing/republish/"),
              T0 + timedelta(hours=9), lambda: spark)
    wide = {"inputs": {"lookback_hours": 4, "sweep_hours": 8}, "dedup": {"window_hours": 2}}
    _, wider = through_proxy(dating_proxy, s3_server, bucket, **wide)
    assert stage_sweep(store, wider) is None
    assert [r["event_id"] for r in committed_rows(store, config, "data") if r["event_id"] == "a"] == ["a"]
    assert first in {r["batch_id"] for r in committed_rows(store, config, "data")}


def test_a_log_written_before_the_ledger_is_not_read_again_after_the_upgrade(dating_proxy, dated, s3_server, bucket,
                                                                            spark) -> None:
    """Commits of the earlier release carry no ledger: everything dated before the end of their
    latest interval was consumed by the earlier rule (LastModified inside an interval)."""
    store, config = through_proxy(dating_proxy, s3_server, bucket)
    land(store, dated, "landing/recent.jsonl", [event("r", 1)], T0 - timedelta(minutes=30))
    before = interval_batch(store, config, T0 - timedelta(hours=1), T0, spark)
    layout = Layout(config.layout)
    for version in (1,):  # rewrite the commit as the earlier release wrote it: no "ledger"
        key = layout.commit(version)
        store.put_bytes(key, as_format_1(store.get_bytes(key), without=("ledger",)))
    assert not load_committed_state(store, layout).ledger.started
    land(store, dated, "landing/next.jsonl", [event("n", 2)], T0 + timedelta(minutes=2))
    after = interval_batch(store, config, T0, T0 + STEP, spark)
    assert sorted((r["event_id"], r["batch_id"]) for r in committed_rows(store, config, "data")) == [
        ("n", after), ("r", before)]
    assert committed_rows(store, config, "audit") == []  # recent.jsonl was not read a second time
    assert load_committed_state(store, layout).ledger.legacy_floor == T0.isoformat()
