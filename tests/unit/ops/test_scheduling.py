"""A scheduler run's batch: explicit params win, else the data interval; plans survive XCom."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from eventdedup import codec
from eventdedup.errors import BatchManifestError, InvalidNameError
from eventdedup.inputs.selector import InputSelector
from eventdedup.ops.scheduling import BatchPlan

START = datetime(2026, 11, 22, 5, 0, tzinfo=timezone.utc)
END = START + timedelta(minutes=5)


def test_a_scheduled_run_processes_its_data_interval() -> None:
    plan = BatchPlan.for_run({"batch_id": None, "input_prefix": None}, START, END)
    assert plan == BatchPlan("20261122T050000Z", InputSelector(since=START, until=END))


def test_a_manual_run_processes_the_named_prefix() -> None:
    plan = BatchPlan.for_run({"batch_id": "republish-1", "input_prefix": "landing/x"}, START, END)
    assert plan == BatchPlan("republish-1", InputSelector(input_prefix="landing/x/"))


def test_a_manual_run_needs_both_params_and_a_safe_id() -> None:
    with pytest.raises(BatchManifestError, match="needs both params"):
        BatchPlan.for_run({"batch_id": "x", "input_prefix": None}, START, END)
    with pytest.raises(InvalidNameError):
        BatchPlan.for_run({"batch_id": "../x", "input_prefix": "landing/"}, START, END)


def test_a_run_without_interval_or_params_is_refused_with_what_to_do() -> None:
    with pytest.raises(BatchManifestError, match="trigger it with params batch_id and input_prefix"):
        BatchPlan.for_run({}, None, None)


@pytest.mark.parametrize("plan", [BatchPlan("20261122T050000Z", InputSelector(since=START, until=END)),
                                  BatchPlan("republish-1", InputSelector(input_prefix="landing/x/"))])
def test_plans_round_trip_through_json(plan: BatchPlan) -> None:
    assert codec.from_doc(BatchPlan, codec.to_doc(plan)) == plan


def test_an_operators_interval_run_takes_its_id_from_its_start() -> None:
    """What the gap refusal tells an operator to trigger (issue 38, item 10): params since and until."""
    plan = BatchPlan.for_run({"since": "2026-11-22T05:10:00+00:00", "until": "2026-11-22T06:00:00+00:00"}, None, None)
    assert plan == BatchPlan("20261122T051000Z", InputSelector(since=datetime(2026, 11, 22, 5, 10, tzinfo=timezone.utc),
                                                               until=datetime(2026, 11, 22, 6, tzinfo=timezone.utc)))
    with pytest.raises(BatchManifestError, match="its start's, 20261122T051000Z, not other"):
        BatchPlan.for_run({"since": "2026-11-22T05:10:00+00:00", "until": "2026-11-22T06:00:00+00:00",
                           "batch_id": "other"}, None, None)
    with pytest.raises(BatchManifestError, match="both params since and until"):
        BatchPlan.for_run({"since": "2026-11-22T05:10:00+00:00"}, None, None)
