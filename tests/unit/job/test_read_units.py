"""How a batch's work is cut: read-task sizes, dedup partitions, and line numbers across ranges."""
from __future__ import annotations

import numpy as np

from eventdedup.job.read_units import (
    LOCAL_LINE_BITS,
    MAX_SPLIT_BYTES,
    OPEN_COST_BYTES,
    LineNumbers,
    dedup_partitions,
    split_bytes,
)
from eventdedup.tables import make_seq

MiB = 1024 * 1024


def test_a_task_share_is_an_even_part_of_the_input_in_whole_rounds_over_the_cores() -> None:
    assert split_bytes(324 * MiB, 2) == 81 * MiB  # 3 tasks of 128 MiB would leave a core idle: 4 of 81
    assert split_bytes(100 * MiB, 2) == 50 * MiB
    assert split_bytes(10 * 1024, 2) == OPEN_COST_BYTES  # tiny input: never below a GET's cost
    assert split_bytes(0, 2) == OPEN_COST_BYTES
    assert split_bytes(10_000 * MiB, 8) <= MAX_SPLIT_BYTES
    assert split_bytes(10_000 * MiB, 8) * 80 >= 10_000 * MiB


def test_dedup_partitions_follow_the_input_and_the_cores_unless_set() -> None:
    assert dedup_partitions(0, 64, 2, 1) == 2  # one event: one round of tasks
    assert dedup_partitions(0, 64, 2, 324 * MiB) == 4
    assert dedup_partitions(0, 64, 2, 100_000 * MiB) == 64  # never more than one per bucket
    assert dedup_partitions(0, 8, 16, 1) == 8
    assert dedup_partitions(0, 64, 1, 0) == 1
    assert dedup_partitions(12, 64, 2, 1) == 12  # set by hand
    assert dedup_partitions(128, 64, 2, 1) == 64


def test_line_numbers_of_ranges_continue_from_the_lines_of_the_ranges_before() -> None:
    numbers = LineNumbers({0: [5, 0, 7, 3], 1: [4]})
    local = np.array([(0 << LOCAL_LINE_BITS) + 1, (0 << LOCAL_LINE_BITS) + 5, (2 << LOCAL_LINE_BITS) + 1,
                      (2 << LOCAL_LINE_BITS) + 7, (3 << LOCAL_LINE_BITS) + 2])
    assert numbers.of(0, local).tolist() == [1, 5, 6, 12, 14]
    assert numbers.of(1, np.array([0, 1, 4])).tolist() == [0, 1, 4]  # a whole object's numbers stand
    seqs = np.array([make_seq(1, 3), make_seq(0, (3 << LOCAL_LINE_BITS) + 3)], np.int64)
    inputs, lines = numbers.of_seqs(seqs)
    assert inputs.tolist() == [1, 0] and lines.tolist() == [3, 15]


def test_no_range_holds_more_lines_than_its_local_numbers_can_count() -> None:
    from eventdedup.job.read_units import MAX_RANGE_BYTES, UNIT_BITS, Cut, plan_read_tasks
    from eventdedup.s3store import ObjectInfo

    big = ObjectInfo("landing/huge.jsonl", (MAX_RANGE_BYTES << UNIT_BITS) - 12_345, '"e"')
    units = [unit for task in plan_read_tasks([(0, big)], 2, lambda index, info: Cut.BYTES) for unit in task]
    assert len(units) <= 1 << UNIT_BITS
    assert max(unit.size for unit in units) <= MAX_RANGE_BYTES
    assert sum(unit.size for unit in units) == big.size
    beyond = ObjectInfo("landing/beyond.jsonl", (MAX_RANGE_BYTES << UNIT_BITS) + 1, '"e"')
    (whole,) = [unit for task in plan_read_tasks([(0, beyond)], 2, lambda index, info: Cut.BYTES) for unit in task]
    assert whole.whole  # read whole: its line numbers have all 40 bits


def test_parquet_bytes_do_not_depend_on_how_the_rows_are_chunked() -> None:
    import pyarrow as pa

    from eventdedup.tables import table_to_parquet

    raw = [("x" * (200 + i % 97)).encode().decode() + str(i) for i in range(30_000)]  # ~7 MB: many pages
    whole = pa.table({"n": list(range(30_000)), "raw": raw})
    pieces = pa.concat_tables([whole.slice(0, 7_001), whole.slice(7_001, 12_345), whole.slice(19_346)])
    assert pieces.column("raw").num_chunks == 3
    assert table_to_parquet(pieces) == table_to_parquet(whole)
