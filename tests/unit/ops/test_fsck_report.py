"""`eventdedup fsck`'s summary counts problems, not lines: the Delta table's line is information
unless the table is ahead of the log (docs/operations.md)."""
from __future__ import annotations

from eventdedup.delta.projection import TableStatus
from eventdedup.ops.fsck import Expected, FsckReport

GONE = Expected("data", "deduped/date=2026-11-20/hour=05/b1-0.parquet", 10, '"e"', "b1", 1)


def table(projected: int, log: int) -> TableStatus:
    return TableStatus("auto", "s3://bkt/deduped", True, 4, projected, log)


def test_one_missing_object_beside_the_tables_line_is_one_problem() -> None:
    report = FsckReport(commits_checked=2, objects_checked=7, list_requests=3, missing=[GONE], table=table(1, 2))
    assert report.text().splitlines() == [
        "missing: data deduped/date=2026-11-20/hour=05/b1-0.parquet (batch b1, commit 1)",
        "Delta table s3://bkt/deduped: version 4, reflects log version 1 of 2 (lags by 1: `eventdedup recover` "
        "rolls it forward)",
        "2 commit(s), 7 object(s) checked with 3 LIST request(s): 1 problem(s)"]


def test_a_table_ahead_of_the_log_is_a_problem_and_a_lag_is_not() -> None:
    ahead = FsckReport(commits_checked=2, objects_checked=7, list_requests=3, table=table(3, 2))
    assert not ahead.consistent and ahead.text().splitlines()[-1].endswith(": 1 problem(s)")
    both = FsckReport(commits_checked=2, objects_checked=7, list_requests=3, missing=[GONE], table=table(3, 2))
    assert both.text().splitlines()[-1].endswith(": 2 problem(s)")
    lagging = FsckReport(commits_checked=2, objects_checked=7, list_requests=3, table=table(1, 2))
    assert lagging.consistent and lagging.text().splitlines()[-1].endswith(": consistent")
