"""May a batch be promoted: run order of interval batches, decided on the folded log alone; the mode
its job was computed under."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from eventdedup.commit.changes import BatchChange, Retraction
from eventdedup.commit.gate import check_run_order, refuse_if_mode_changed
from eventdedup.commit.job_result import JobResult
from eventdedup.commit.records import CommitRecord
from eventdedup.commit.state import CommittedState
from eventdedup.counts import BatchCounts
from eventdedup.errors import OutOfOrderBatchError, StaleBatchError
from eventdedup.inputs.intervals import IntervalBatch, batch_id_for_interval, interval_start_of
from eventdedup.inputs.selector import InputSelector

T0 = datetime(2026, 11, 22, 5, 0, tzinfo=timezone.utc)
STEP = timedelta(minutes=5)


def interval(i: int) -> IntervalBatch:
    return IntervalBatch.for_interval(T0 + STEP * i, T0 + STEP * (i + 1))


def ends_of_intervals(batch_id: str) -> datetime | None:
    """Where a committed batch's interval ends, as its manifest would say (None: a prefix batch)."""
    start = interval_start_of(batch_id)
    return None if start is None else start + STEP

WINDOW = 168  # hours: longer than any interval here


def check(state: CommittedState, batch: IntervalBatch) -> None:
    check_run_order(state, batch, ends_of_intervals, WINDOW)


def committed(*batch_ids: str) -> CommittedState:
    """The state the log folds to when these batches commit in this order (those whose ids name an
    interval's start are recorded as interval batches, as the job records them)."""
    state = CommittedState()
    for version, batch_id in enumerate(batch_ids, 1):
        change = BatchChange(interval=interval_start_of(batch_id) is not None)
        record = CommitRecord(version, batch_id, state.last_batch_id, "t", T0.isoformat(), BatchCounts(), (), {},
                              change)
        state = state.apply(record, f"commit {version}")
    return state


def test_the_first_interval_of_a_store_may_start_anywhere() -> None:
    check(committed(), interval(7))
    check(committed("manual-1"), interval(7))  # manual batches are not ordered


def test_the_next_interval_follows_its_predecessor() -> None:
    check(committed(interval(0).batch_id), interval(1))


def test_a_skipped_interval_must_wait_for_the_one_before_it() -> None:
    with pytest.raises(OutOfOrderBatchError, match=f"batch {interval(1).batch_id} \\(the interval before it\\)"):
        check(committed(interval(0).batch_id), interval(2))


def test_an_older_interval_is_refused_behind_a_newer_one() -> None:
    with pytest.raises(OutOfOrderBatchError, match=f"older than the committed batch {interval(3).batch_id}"):
        check(committed(interval(3).batch_id), interval(2))


def test_a_committed_interval_is_a_no_op_rerun() -> None:
    check(committed(interval(0).batch_id, interval(1).batch_id), interval(0))


def test_only_a_time_selector_whose_id_names_its_start_is_an_interval_batch() -> None:
    since, until = T0, T0 + STEP
    assert IntervalBatch.of_request("20261122T050000Z", InputSelector(since=since, until=until)) == interval(0)
    assert IntervalBatch.of_request("my-batch", InputSelector(since=since, until=until)) is None
    assert IntervalBatch.of_request("20261122T050000Z", InputSelector(input_prefix="landing/x/")) is None


def test_interval_ids_name_their_start_and_parse_back() -> None:
    assert batch_id_for_interval(T0) == "20261122T050000Z"
    assert interval_start_of("20261122T050000Z") == T0
    assert interval_start_of("manual") is None
    assert interval_start_of("20261122T0500Z") == T0  # the minute-only ids of earlier versions


def test_interval_ids_sort_as_their_times_across_minute_and_hour_boundaries() -> None:
    starts = [datetime(2026, 11, 22, 13, 59, 56, tzinfo=timezone.utc) + timedelta(seconds=4 * i) for i in range(20)]
    starts += [datetime(2026, 11, 22, 23, 59, 0, tzinfo=timezone.utc) + timedelta(minutes=i) for i in range(3)]
    ids = [batch_id_for_interval(start) for start in starts]
    assert sorted(ids) == [batch_id_for_interval(start) for start in sorted(starts)]
    assert {len(i) for i in ids} == {16}
    assert interval(0).previous_batch_id == "20261122T045500Z"


def test_intervals_of_other_lengths_chain_by_where_the_last_one_ends() -> None:
    two_hours = IntervalBatch.for_interval(T0 + STEP, T0 + STEP + timedelta(hours=2))
    check_run_order(committed(interval(0).batch_id), two_hours, ends_of_intervals, WINDOW)
    after = IntervalBatch.for_interval(two_hours.until, two_hours.until + STEP)
    ends = {interval(0).batch_id: interval(0).until, two_hours.batch_id: two_hours.until}
    check_run_order(committed(interval(0).batch_id, two_hours.batch_id), after, ends.get, WINDOW)
    with pytest.raises(OutOfOrderBatchError, match=f"batch {batch_id_for_interval(two_hours.until)} "):
        check_run_order(committed(interval(0).batch_id, two_hours.batch_id), interval(30), ends.get, WINDOW)


def test_an_interval_starting_inside_the_last_committed_one_is_refused() -> None:
    longer = {interval(0).batch_id: T0 + STEP * 3}
    with pytest.raises(OutOfOrderBatchError, match="intervals may not overlap"):
        check_run_order(committed(interval(0).batch_id), interval(1), longer.get, WINDOW)


def test_without_the_last_interval_s_end_the_predecessor_is_the_interval_of_the_same_length() -> None:
    no_manifests: dict[str, datetime] = {}
    check_run_order(committed(interval(0).batch_id), interval(1), no_manifests.get, WINDOW)
    with pytest.raises(OutOfOrderBatchError, match=f"batch {interval(1).batch_id} \\(the interval before it\\)"):
        check_run_order(committed(interval(0).batch_id), interval(2), no_manifests.get, WINDOW)


@pytest.mark.parametrize("computed, configured", [("observe", "enforce"), ("enforce", "observe")])
def test_a_job_computed_under_another_mode_than_the_configured_one_is_not_promoted(computed: str,
                                                                                   configured: str) -> None:
    job = JobResult("b7", 3, T0.isoformat(), BatchCounts(), (), BatchChange(mode=computed))
    with pytest.raises(StaleBatchError, match=f"computed under \\[dedup\\] mode = '{computed}', but the configured "
                                              f"mode is '{configured}'; if the mode was just switched, rerun the dedup "
                                              "step for b7; if every batch is refused so, the job reads another "
                                              "configuration than the promoter"):
        refuse_if_mode_changed(job, configured)
    refuse_if_mode_changed(job, computed)


def test_a_job_result_from_before_observe_mode_was_computed_enforcing() -> None:
    older = JobResult("b7", 3, T0.isoformat(), BatchCounts(), (), BatchChange(partitions=2))
    assert b'"mode"' not in older.to_bytes()  # the default is left out: older readers see the same document
    assert JobResult.from_bytes(older.to_bytes()).change == BatchChange(partitions=2, mode="enforce")
    refuse_if_mode_changed(older, "enforce")
    refuse_if_mode_changed(JobResult("retract-b7", 3, T0.isoformat(), BatchCounts(), (), Retraction(("b6",), "bad")),
                           "observe")  # an operation has no mode
