"""The main bench's real path, its pure parts: the measured runs' order spreads drift over both modes
and both sizes, a commit's counts are held to the workload's, and the summary reads the medians,
the marginal and the targets' verdicts from a result document alone."""
from __future__ import annotations

import pytest

from bench.committed import check_counts, run_order
from bench.summary import marked, print_real_path, summarise, summarise_real_path


def test_every_round_runs_each_mode_and_size_once_and_drift_falls_on_cold_and_warm_alike() -> None:
    order = run_order(4)
    assert len(order) == 16 and all(sorted(order[r * 4:r * 4 + 4]) == sorted(order[:4]) for r in range(4))
    # A batch run commits a million events: over every two rounds, as many precede cold as warm runs.
    for size in ("one_event", "batch"):
        before = {"cold": 0, "warm": 0}
        for n, (mode, of_size) in enumerate(order[:8]):
            if of_size == size:
                before[mode] += sum(1 for _, earlier in order[:n] if earlier == "batch")
        assert before["cold"] == before["warm"]


def test_a_commit_whose_counts_differ_from_the_planted_ones_stops_the_bench() -> None:
    expected = {"events": 10, "cross_batch_duplicates": 2, "in_batch_duplicates": 1, "unique_new": 7}
    counts = {"input_lines": 10, "cross_batch_natural": 2, "in_batch_natural": 1, "output_rows": 7, "quarantined": 0}
    check_counts(counts, expected, "measured-01")
    with pytest.raises(SystemExit, match="measured-02: the commit counted"):
        check_counts({**counts, "cross_batch_natural": 1, "cross_batch_synthetic": 1}, expected, "measured-02")


def _run(mode: str, size: str, wall: float, cpu: float, rows: int) -> dict:
    return {"mode": mode, "size": size, "wall_seconds": wall, "output_rows": rows,
            "phases": {"staging": 0.25, "spark_wait": 1.5, "job": wall - 2.0, "promotion": 0.25, "total": wall},
            "cpu_seconds": {"command_python": 1.0, "jvm": 2.0, "python_workers": cpu, "server": 0.5,
                            "total": cpu + 3.5},
            "peak_memory": {"total_bytes": int(wall * 2**28)}}


REAL = {"events": 1_000_000, "history": "committed",
        "expected": {"one_event": {"unique_new": 1}, "batch": {"unique_new": 900_000}},
        "runs": [_run("cold", "one_event", 4.5, 1.0, 1), _run("cold", "batch", 9.0, 9.0, 900_000),
                 _run("warm", "one_event", 3.5, 1.0, 1), _run("warm", "batch", 7.5, 8.0, 900_000),
                 _run("warm", "batch", 7.0, 7.0, 900_000), _run("warm", "one_event", 3.0, 1.0, 1),
                 _run("cold", "batch", 10.0, 10.0, 900_000), _run("cold", "one_event", 5.0, 1.0, 1),
                 _run("cold", "one_event", 4.0, 1.0, 1), _run("cold", "batch", 11.0, 11.0, 900_000),
                 _run("warm", "one_event", 3.25, 1.0, 1), _run("warm", "batch", 7.25, 12.0, 900_000)]}


def test_the_real_path_is_summarised_per_mode_with_the_marginal_and_the_targets_verdicts() -> None:
    summary = summarise_real_path(REAL)
    cold, warm = summary["cold"], summary["warm"]
    assert (cold["one_event_seconds"], cold["batch_seconds"], cold["marginal_seconds"]) == (4.5, 10.0, 5.5)
    assert cold["marginal_events_per_second"] == pytest.approx(1_000_000 / 5.5)
    assert (warm["one_event_seconds"], warm["batch_seconds"]) == (3.25, 7.25)
    assert warm["marginal_events_per_second"] == 250_000
    # Cold: 181,818 events/s < 200k, 4.5 s > 4 s; warm: 250k (>= 250k) and 3.25 s.
    assert cold["met"] == {"marginal": False, "one_event": False}
    assert warm["met"] == {"marginal": True, "one_event": True}
    assert warm["cpu_seconds"]["batch"]["python_workers"] == 8.0  # the run of median total (11.5 of 10.5, 11.5, 15.5)
    assert warm["phases"]["batch"]["job"] == 5.25 and cold["peak_memory_bytes"] == 11 * 2**28
    assert cold["output_exact"] and warm["output_exact"]


def test_the_real_path_prints_each_modes_figures_and_verdicts(capsys: pytest.CaptureFixture[str]) -> None:
    print_real_path(REAL, summarise_real_path(REAL), "committed")
    out = capsys.readouterr().out
    assert "history committed" in out
    assert "cold (new process, empty local copies): one event 4.50s (<= 4 s: NOT MET)" in out
    assert "marginal 5.50s = 181,818 events/s (>= 200,000: NOT MET); output exact" in out
    assert "marginal 4.00s = 250,000 events/s (>= 250,000: met)" in out
    assert "the S3 store 0.5s apart; all 11.5 core-seconds" in out


def test_a_result_from_before_the_marks_reads_as_seeded_throughout() -> None:
    assert marked({}, "rounds") == "seeded"
    assert marked({"history_of": {"rounds": "committed"}}, "rounds") == "committed"
    # Cold has one run of each size, warm none: warm is left out.
    assert list(summarise_real_path({**REAL, "runs": REAL["runs"][:2]})) == ["cold"]


def test_the_main_summary_carries_the_real_path_beside_the_rounds() -> None:
    result = {"rounds": [{"eventdedup": {"seconds": 6.0, "output_rows": 900_000}}], "workload": {"events": 1_000_000},
              "one_event": {"seconds": [1.0]}, "history_scaling": [], "real_path": REAL}
    summarise(result)
    assert result["summary"]["eventdedup"]["marginal_seconds"] == 5.0
    assert result["summary"]["real_path"] == summarise_real_path(REAL)
    del result["real_path"]
    summarise(result)  # a result from before the real path
    assert "real_path" not in result["summary"]
