"""The explanation of a batch that selected nothing, for the cases the integration tests do not
reach (tests/integration/test_empty_intervals.py): partitioned keys, an object that arrived inside
the range under a partition the batch does not list, and a manual batch selecting by time."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from eventdedup.inputs.empty_interval import EmptySelection
from eventdedup.s3store import ObjectInfo

UNTIL = datetime(2026, 11, 22, 5, 5, tzinfo=timezone.utc)


def at(minutes_after_until: int) -> datetime:
    return UNTIL + timedelta(minutes=minutes_after_until)


def test_a_partitioned_manual_batch_says_it_selects_by_partition_and_names_an_object_in_another_partition() -> None:
    selection = EmptySelection(
        "fix-1", False, UNTIL - timedelta(minutes=5), UNTIL, UNTIL - timedelta(hours=3),
        UNTIL - timedelta(hours=171),
        (ObjectInfo("in/2026/11/21/05/x.jsonl", 1, '"a"', at(-30)), ObjectInfo("in/2026/11/22/07/y.jsonl", 1, '"b"',
                                                                                 at(120))),
        "events", "in/", 3, "%Y/%m/%d/%H/")
    assert selection.committed("c.toml").split("\n  ") == [
        "batch fix-1 selected no input; it is committed as a manual batch, which moves no schedule.",
        "It selects by partition and arrival: the landing objects under the partitions of 2026-11-22T02:05:00+00:00 "
        "to 2026-11-22T05:05:00+00:00 ([inputs] partition_format = \"%Y/%m/%d/%H/\", the [inputs] lookback_hours "
        "= 3 before its end) that arrived (LastModified: when the store received them, whatever time their keys or "
        "events name) before 2026-11-22T05:05:00+00:00 and that no batch consumed. None did.",
        "2 landing object(s) under s3://events/in/ wait for a batch outside it; the oldest, "
        "s3://events/in/2026/11/21/05/x.jsonl, arrived 2026-11-22T04:35:00+00:00.",
        "1 arrived after its end: the interval batch whose lookback covers their arrival takes them (as the "
        "scheduler's intervals do).",
        "1 arrived inside its range, under keys its listing does not reach ([inputs] partition_format or "
        "sorted_key_format): only a batch of their prefix takes them.",
        "Take them now, as one batch: eventdedup run-batch --config c.toml --batch-id in-2026-11 "
        "--input-prefix in/2026/11/"]
