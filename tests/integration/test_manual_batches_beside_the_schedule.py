"""Manual batches beside the schedule, schedule changes, and what the log remembers.

Each test is one of the holes issue 38 reported (items 1, 3, 5, 6, 9, 10), run on the real S3
server and Spark; landing objects are placed in time through the dating proxy (no clock). The
documented rules the expected rows come from (docs/design.md):
- a batch sees the cache entries of every batch that arrived within `window_hours` before it;
  an interval batch arrives at its interval's end, a manual batch at the log's time (the latest
  interval's arrival; the clock only where no interval has committed), never moving the
  arrival of the intervals around it;
- first copy of an id wins; a copy of an id an earlier visible batch holds is a cross-batch
  duplicate, kept in that batch;
- whether a batch is an interval is recorded in its commit, never read from its id;
- only interval batches move the ingestion ledger's horizon, and an object stays in the ledger
  while anything its batch wrote is in the committed state;
- a committed batch id never commits again, whatever happened to its marker.
"""
from __future__ import annotations

from datetime import datetime, timedelta

import orjson
import pytest

from eventdedup.commit.log import committed_record, committed_version, load_committed_state
from eventdedup.errors import OutOfOrderBatchError, RetractionRefusedError
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.fsck import fsck
from eventdedup.ops.pipeline import run_batch
from eventdedup.ops.retract import retract_batch
from eventdedup.ops.sweep import sweep_reference
from eventdedup.s3store import S3Store

from ..support.helpers import NOW, as_format_1, committed_rows, make_config, put_lines
from ..support.landing import interval_batch, land, through_proxy

STEP = timedelta(minutes=5)
T0 = NOW - timedelta(hours=1)  # 2026-11-22T05:00Z


def ev(event_id: str, v: int = 1) -> bytes:
    return orjson.dumps({"event_id": event_id, "created_at": "2026-11-22T05:01:00Z", "v": v})


def data_rows(store: S3Store, config) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return sorted((row["event_id"], row["batch_id"]) for row in committed_rows(store, config, "data"))


def audit_rows(store: S3Store, config) -> list[tuple[str, str, str, str]]:  # type: ignore[no-untyped-def]
    return sorted((row["event_id"], row["batch_id"], row["reason"], row["kept_in_batch"])
                  for row in committed_rows(store, config, "audit"))


def test_a_manual_batch_during_a_catch_up_leaves_the_window_of_the_intervals_after_it_whole(
        dating_proxy, dated, s3_server, bucket, spark) -> None:
    """Item 1: a manual batch arrived at the clock, and arrivals never decrease along the log, so
    during a catch-up every interval committed after it arrived at the clock hour too: after a
    3-day outage with a 24-hour window, the backfill's first interval no longer saw the interval
    before the outage, and a copy re-delivered across it passed as new."""
    store, config = through_proxy(dating_proxy, s3_server, bucket, dedup={"window_hours": 24})
    land(store, dated, "landing/a.jsonl", [ev("e1")], T0 + timedelta(minutes=1))
    before = interval_batch(store, config, T0, T0 + STEP, spark)
    clock = T0 + timedelta(days=3)  # the outage ends; an operator runs a manual batch
    put_lines(store, "manual/m.jsonl", [ev("m1")])
    run_batch(store, config, "fix-1", InputSelector(input_prefix="manual/"), clock, lambda: spark)
    land(store, dated, "landing/b.jsonl", [ev("e1"), ev("e2")], T0 + timedelta(minutes=6))
    land(store, dated, "landing/c.jsonl", [ev("e2"), ev("m1")], T0 + timedelta(minutes=11))
    first = interval_batch(store, config, T0 + STEP, T0 + 2 * STEP, spark, now=clock)  # the backfill
    second = interval_batch(store, config, T0 + 2 * STEP, T0 + 3 * STEP, spark, now=clock)
    assert data_rows(store, config) == sorted([("e1", before), ("m1", "fix-1"), ("e2", first)])
    assert audit_rows(store, config) == sorted([
        ("e1", first, "cross_batch_natural", before), ("e2", second, "cross_batch_natural", first),
        ("m1", second, "cross_batch_natural", "fix-1")])


def test_a_manual_batch_whose_id_reads_as_an_interval_id_does_not_move_the_schedule(
        dating_proxy, dated, s3_server, bucket, spark) -> None:
    """Item 3: `run-batch --batch-id 20261224T000000Z --input-prefix ...` committed as a manual
    batch, but the log took the latest interval from ids: every scheduled interval before that
    date was refused and the sweep lost its reference. Whether a batch is an interval is recorded
    in its commit."""
    store, config = through_proxy(dating_proxy, s3_server, bucket)
    land(store, dated, "landing/a.jsonl", [ev("a")], T0 + timedelta(minutes=1))
    interval_batch(store, config, T0, T0 + STEP, spark)
    put_lines(store, "manual/m.jsonl", [ev("m")])
    run_batch(store, config, "20261224T000000Z", InputSelector(input_prefix="manual/"), T0 + STEP, lambda: spark)
    land(store, dated, "landing/b.jsonl", [ev("b")], T0 + timedelta(minutes=6))
    following = interval_batch(store, config, T0 + STEP, T0 + 2 * STEP, spark)
    state = load_committed_state(store, Layout(config.layout))
    assert state.latest_interval_batch_id == following
    assert sweep_reference(store, config) == T0 + 2 * STEP
    assert ("b", following) in data_rows(store, config)


def test_retracting_such_a_batch_an_earlier_release_took_for_an_interval_frees_the_schedule(
        dating_proxy, dated, s3_server, bucket, spark) -> None:
    """Item 3, for logs an earlier release wrote: its records do not say which batches are
    intervals, so the manual batch above reads as the latest interval and the schedule waits
    behind it. Retracting it undoes that: the latest interval is the one before it again."""
    store, config = through_proxy(dating_proxy, s3_server, bucket)
    layout = Layout(config.layout)
    land(store, dated, "landing/a.jsonl", [ev("a")], T0 + timedelta(minutes=1))
    earlier = interval_batch(store, config, T0, T0 + STEP, spark)
    put_lines(store, "manual/m.jsonl", [ev("m")])
    run_batch(store, config, "20261224T000000Z", InputSelector(input_prefix="manual/"), T0 + STEP, lambda: spark)
    for version in (1, 2):  # as the earlier release wrote them: no word of intervals
        store.put_bytes(layout.commit(version), as_format_1(store.get_bytes(layout.commit(version)),
                                                            without=("interval", "arrival_hour")))
    assert load_committed_state(store, layout).latest_interval_batch_id == "20261224T000000Z"
    land(store, dated, "landing/b.jsonl", [ev("b")], T0 + timedelta(minutes=6))
    with pytest.raises(OutOfOrderBatchError, match="older than the committed batch 20261224T000000Z"):
        interval_batch(store, config, T0 + STEP, T0 + 2 * STEP, spark)
    retract_batch(store, config, "20261224T000000Z", "a manual batch named like an interval", T0 + STEP)
    assert load_committed_state(store, layout).latest_interval_batch_id == earlier
    following = interval_batch(store, config, T0 + STEP, T0 + 2 * STEP, spark)
    assert ("b", following) in data_rows(store, config)


def test_the_ledger_holds_an_object_while_the_state_holds_what_its_batch_wrote(
        dating_proxy, dated, s3_server, bucket, spark) -> None:
    """Item 5: ledger entries left after lookback + sweep + 1 hour, measured from the consuming
    commit, while its cache entries stay in the state a window longer; an object taken again by
    a prefix batch after the ledger forgot it was checked against a window that had also moved
    past its events, and came out a second time. An entry now stays while its batch is in the
    committed state."""
    store, config = through_proxy(dating_proxy, s3_server, bucket, dedup={"window_hours": 3},
                                  inputs={"lookback_hours": 1, "sweep_hours": 1})
    put_lines(store, "landing/once/o.jsonl", [ev("o")])
    run_batch(store, config, "first", InputSelector(input_prefix="landing/once/"), T0, lambda: spark)
    later = T0 + timedelta(hours=4)  # the schedule moves the ledger's horizon past `first`
    land(store, dated, "landing/x.jsonl", [ev("x")], later + timedelta(minutes=1))
    interval_batch(store, config, later, later + STEP, spark)
    state = load_committed_state(store, Layout(config.layout))
    assert "first" in state.batches  # its entries are still in the state
    again = run_batch(store, config, "again", InputSelector(input_prefix="landing/once/"), later + STEP,
                      lambda: spark)
    assert (again.counts["inputs_already_consumed"], again.counts["input_lines"]) == (1, 0)
    assert [row for row in data_rows(store, config) if row[0] == "o"] == [("o", "first")]


def test_a_manual_batch_by_time_does_not_move_the_ledgers_horizon(dating_proxy, dated, s3_server, bucket,
                                                                  spark) -> None:
    """Item 6: a manual `--since/--until` batch ahead of the schedule moved the ledger's horizon
    (its as_of is a clock), so the backfill's intervals below the new floor listed nothing: their
    objects were never consumed nor swept, with no alert."""
    store, config = through_proxy(dating_proxy, s3_server, bucket, inputs={"lookback_hours": 1, "sweep_hours": 2})
    land(store, dated, "landing/a.jsonl", [ev("a")], T0 + timedelta(minutes=1))
    interval_batch(store, config, T0, T0 + STEP, spark)
    ahead = T0 + timedelta(hours=10)
    run_batch(store, config, "look-ahead", InputSelector(since=ahead, until=ahead + STEP), ahead + STEP,
              lambda: spark)  # a manual batch: its id does not name its interval
    land(store, dated, "landing/b.jsonl", [ev("b")], T0 + timedelta(minutes=6))
    following = interval_batch(store, config, T0 + STEP, T0 + 2 * STEP, spark, now=ahead + STEP)
    assert ("b", following) in data_rows(store, config)


def test_a_batch_whose_committed_marker_was_deleted_never_commits_again(s3_server, bucket, spark) -> None:
    """Item 9: a batch that has left the folded state is known committed by its marker; with the
    marker deleted, rerunning the batch committed it a second time (fsck reported the marker, the
    commit went ahead). The log itself says it is committed: the rerun is a no-op again, and fsck
    names the missing marker. A retracted batch is never found committed in the log."""
    config = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 1, "window_hours": 1,
                                                                "checkpoint_interval": 1})
    store = S3Store(s3_server.client(), bucket)
    layout = Layout(config.layout)
    for number, hours in ((1, 0), (2, 3), (3, 6)):
        put_lines(store, f"landing/b{number}/1.jsonl", [ev(f"e{number}")])
        run_batch(store, config, f"b{number}", InputSelector(input_prefix=f"landing/b{number}/"),
                  NOW + timedelta(hours=hours), lambda: spark)
    assert "b1" not in load_committed_state(store, layout).batches
    store.delete_keys([layout.batch_committed_marker("b1")])
    again = run_batch(store, config, "b1", InputSelector(input_prefix="landing/b1/"), NOW + timedelta(hours=6),
                      lambda: spark)
    assert (again.version, again.newly_committed) == (1, False)
    assert load_committed_state(store, layout).version == 3
    assert [row for row in data_rows(store, config) if row[0] == "e1"] == [("e1", "b1")]
    assert [item.key for item in fsck(store, config).missing] == [layout.batch_committed_marker("b1")]
    # b2 retracted (it is still in the state), then the log moves on until it would have left:
    # a retracted id stays out of the view, and a rerun of it is refused, not "already committed".
    retract_batch(store, config, "b3", "bad input", NOW + timedelta(hours=6))
    put_lines(store, "landing/b4/1.jsonl", [ev("e4")])
    run_batch(store, config, "b4", InputSelector(input_prefix="landing/b4/"), NOW + timedelta(hours=12),
              lambda: spark)
    assert committed_version(store, layout, load_committed_state(store, layout), "b3") is None
    with pytest.raises(RetractionRefusedError, match="b3 was retracted"):
        run_batch(store, config, "b3", InputSelector(input_prefix="landing/b3/"), NOW + timedelta(hours=12),
                  lambda: spark)


def test_a_schedule_change_that_leaves_a_gap_is_crossed_with_the_command_the_refusal_names(
        dating_proxy, dated, s3_server, bucket, spark) -> None:
    """Item 10: a schedule changed from 5 minutes to hourly leaves a gap (05:10 to 06:00) that no
    run covers, and the order gate refused every later interval forever. The refusal names the
    gap and the one command that commits it as an interval; after it, the hourly runs go on."""
    store, config = through_proxy(dating_proxy, s3_server, bucket)
    land(store, dated, "landing/a.jsonl", [ev("a")], T0 + timedelta(minutes=1))
    interval_batch(store, config, T0, T0 + STEP, spark)
    interval_batch(store, config, T0 + STEP, T0 + 2 * STEP, spark)
    hourly = datetime.fromisoformat("2026-11-22T06:00:00+00:00")
    land(store, dated, "landing/gap.jsonl", [ev("g")], T0 + timedelta(minutes=30))
    with pytest.raises(OutOfOrderBatchError) as refused:
        interval_batch(store, config, hourly, hourly + timedelta(hours=1), spark)
    command = ("eventdedup run-batch --config <config> --batch-id 20261122T051000Z "
               "--since 2026-11-22T05:10:00+00:00 --until 2026-11-22T06:00:00+00:00")
    assert "which ends at 2026-11-22T05:10:00+00:00" in str(refused.value) and command in str(refused.value)
    bridge = InputSelector(since=T0 + 2 * STEP, until=hourly)  # what that command runs
    run_batch(store, config, "20261122T051000Z", bridge, hourly, lambda: spark)
    following = interval_batch(store, config, hourly, hourly + timedelta(hours=1), spark)
    state = load_committed_state(store, Layout(config.layout))
    assert state.latest_interval_batch_id == following
    assert ("g", "20261122T051000Z") in data_rows(store, config)
    assert committed_record(store, Layout(config.layout), state.batches["20261122T051000Z"]).batch_id == (
        "20261122T051000Z")


def test_a_gap_longer_than_the_window_is_bridged_in_window_long_intervals_and_a_copy_across_it_is_found(
        dating_proxy, dated, s3_server, bucket, spark) -> None:
    """Item 10, a gap longer than the window (helper-3's review): one interval bridging a 3-day
    gap arrives at its end, so with a 24-hour window it did not see the interval right before the
    gap, and a copy landed a minute after its original passed as new. An interval longer than the
    window is refused at staging; the refusal of the gap names a bridge no longer than the window,
    and the refusal after it the next."""
    store, config = through_proxy(dating_proxy, s3_server, bucket, dedup={"window_hours": 24})
    land(store, dated, "landing/a.jsonl", [ev("x")], T0 + timedelta(minutes=1))
    before = interval_batch(store, config, T0, T0 + STEP, spark)
    land(store, dated, "landing/b.jsonl", [ev("x")], T0 + timedelta(minutes=6))  # the same event, a minute later
    resume = T0 + timedelta(days=3)
    with pytest.raises(OutOfOrderBatchError, match="longer than the dedup window"):
        run_batch(store, config, "20261122T050500Z", InputSelector(since=T0 + STEP, until=resume), resume,
                  lambda: spark)
    start, bridges = T0 + STEP, []
    while True:
        try:
            interval_batch(store, config, resume, resume + STEP, spark, now=resume + STEP)
            break
        except OutOfOrderBatchError as refused:
            until = datetime.fromisoformat(str(refused).split("--until ", 1)[1].split("`", 1)[0])
            assert until - start <= timedelta(hours=24)
            bridges.append(interval_batch(store, config, start, until, spark, now=resume))
            start = until
    assert len(bridges) == 3 and start == resume
    assert [row for row in data_rows(store, config) if row[0] == "x"] == [("x", before)]
    assert [row for row in audit_rows(store, config) if row[0] == "x"] == [
        ("x", bridges[0], "cross_batch_natural", before)]


def test_a_copy_in_another_hour_of_a_batch_that_arrived_later_is_found(dating_proxy, dated, s3_server, bucket,
                                                                       spark) -> None:
    """Item 1's arrivals need not grow along the log (helper-3's review): a manual batch on a store
    with no interval yet arrives at its clock, and the schedule may start from earlier. A batch
    loaded the id guards of the days from its window's start to its own arrival only, while it
    sees every batch arrived since its window's start, later ones too: a copy of such a batch's
    id in another hour came out again. It loads the guards up to the latest arrival it sees."""
    store, config = through_proxy(dating_proxy, s3_server, bucket, dedup={"window_hours": 24})
    clock = T0 + timedelta(hours=20)  # 2026-11-23T01:00, the next arrival day
    put_lines(store, "manual/m.jsonl", [orjson.dumps({"event_id": "x", "created_at": "2026-11-22T03:10:00Z"})])
    run_batch(store, config, "first", InputSelector(input_prefix="manual/"), clock, lambda: spark)
    land(store, dated, "landing/a.jsonl", [orjson.dumps({"event_id": "x", "created_at": "2026-11-22T04:50:00Z"})],
         T0 + timedelta(minutes=1))
    interval = interval_batch(store, config, T0, T0 + STEP, spark, now=clock)
    assert [row for row in data_rows(store, config) if row[0] == "x"] == [("x", "first")]
    assert audit_rows(store, config) == [("x", interval, "cross_batch_synthetic", "first")]  # renamed, not new
