"""The report's rules, each on values small enough to work out by hand (docs/report.md)."""
from __future__ import annotations

import math
from collections import Counter
from datetime import datetime, timedelta, timezone

from eventdedup.commit.changes import BatchChange
from eventdedup.commit.records import CommitRecord, PromotedObject
from eventdedup.config import config_from_mapping
from eventdedup.counts import BatchCounts
from eventdedup.report.collect import (
    AuditSummary,
    Collected,
    CommitInRange,
    commit_times,
    first_version_at_or_after,
    recorded_sources,
    source_prefix,
)
from eventdedup.report.figures import lag_figures, nearest_rank, report_figures
from eventdedup.s3store import ObjectInfo

HOUR, DAY = 3600.0, 86400.0
T = datetime(2026, 11, 20, tzinfo=timezone.utc)
CONFIG = config_from_mapping({"s3": {"bucket": "bkt"}, "dedup": {"window_hours": 24},
                              "report": {"producer_field": "app", "top": 2}})


def test_nearest_rank_takes_the_value_at_the_rank_ceil_p_percent_of_the_copies() -> None:
    lags = [(0.0, 3), (60.0, 1), (7200.0, 1)]  # 0, 0, 0, 60, 7200
    assert [nearest_rank(lags, p) for p in (1, 50, 60, 61, 80, 81, 100)] == [0.0, 0.0, 0.0, 60.0, 60.0, 7200.0, 7200.0]
    assert nearest_rank([], 50) is None
    # 1,000 copies, lags 1..1000 s: p99.9 is rank 999 exactly (99.9 / 100 in binary is a hair over).
    thousand = [(float(lag), 1) for lag in range(1, 1001)]
    assert (nearest_rank(thousand, 99.9), nearest_rank(thousand, 99), nearest_rank(thousand, 50)) == (999.0, 990.0, 500.0)


def test_bins_hold_lags_above_the_previous_bound_up_to_their_own() -> None:
    figures = lag_figures(Counter({0.0: 2, 300.0: 1, 300.5: 1, DAY: 1, 15 * DAY: 1}), 24 * HOUR)
    bins = {b["label"]: b["copies"] for b in figures["histogram"]}
    assert (bins["same batch"], bins["≤ 5 min"], bins["≤ 15 min"], bins["≤ 1 d"], bins["> 14 d"]) == (2, 1, 1, 1, 1)
    assert sum(bins.values()) == figures["copies"] == 6


def test_the_window_sentence_has_three_answers() -> None:
    window = 24 * HOUR
    assert lag_figures(Counter({0.0: 5}), window)["verdict"].startswith("No copy arrived after its original's batch")
    fine = lag_figures(Counter({0.0: 5, 2 * HOUR: 1}), window)["verdict"]
    assert fine == ("The window looks long enough: the longest lag caught was 2.0 h (8% of the 24 h window), "
                    "and no copy arrived in its last tenth.")
    # 22 h > 0.9 x 24 h: in the last tenth; twice 22 h is 44 h, two whole days: 48 h.
    short = lag_figures(Counter({0.0: 3, 22 * HOUR: 1}), window)
    assert short["beyond"]["window_last_tenth"] == {"copies": 1, "share": 0.25}
    assert short["verdict"].startswith("The window may be too short: 1 of 4 copies (25.0%) arrived in the last "
                                       "tenth of the 24 h window")
    assert "48 h would hold twice the longest lag caught (22.0 h)" in short["verdict"]


def test_a_copy_whose_holder_is_not_in_the_log_is_counted_apart() -> None:
    figures = lag_figures(Counter({0.0: 1, math.nan: 2}), DAY)
    assert (figures["copies"], figures["unknown_holder"]) == (1, 2)


def test_a_source_is_an_input_objects_folder_or_its_first_folders() -> None:
    key = "landing/app-a/2026/11/20/part-1.jsonl.gz"
    assert source_prefix(key, 0) == "landing/app-a/2026/11/20/"
    assert source_prefix(key, 2) == "landing/app-a/"
    assert source_prefix("top.jsonl", 0) == "" and source_prefix("a/b.jsonl", 5) == "a/"


def batch(version: int, batch_id: str, as_of: datetime, held: dict[str, int], **counts: int) -> CommitRecord:
    return CommitRecord(version, batch_id, None, "t", as_of.isoformat(), BatchCounts.of(counts),
                        (PromotedObject("cache", f"c/{batch_id}", 100, '"e"'),), {},
                        BatchChange(decided_against=held))


def test_a_retracted_batch_is_listed_and_left_out_of_every_figure() -> None:
    b1 = batch(1, "b1", T, {}, input_lines=3, output_rows=2, in_batch_duplicates=1, in_batch_natural=1)
    b2 = batch(2, "b2", T + timedelta(hours=2), {"b1": 1}, input_lines=2, output_rows=1, cross_batch_duplicates=1,
               cross_batch_natural=1)
    b3 = batch(3, "b3", T + timedelta(hours=3), {"b1": 4}, input_lines=4, cross_batch_duplicates=4,
               cross_batch_natural=4)
    audits = {"b1": AuditSummary(Counter({"landing/a/": 1}), Counter({"x": 1})),
              "b2": AuditSummary(Counter({"landing/b/": 1}), Counter({None: 1})),
              "b3": AuditSummary(Counter({"landing/c/": 4}), Counter({"y": 4}))}
    commits = [CommitInRange(b1, T + timedelta(minutes=1), cache_objects=1, cache_bytes=100),
               CommitInRange(b2, T + timedelta(hours=2, minutes=1), cache_objects=1, cache_bytes=100),
               CommitInRange(b3, T + timedelta(hours=3, minutes=1), retracted=True, cache_objects=1, cache_bytes=100)]
    collected = Collected(T, T + timedelta(days=1), 3, commits, audits, {}, {"b1": T, "b2": T + timedelta(hours=2)},
                          {"2026-11-20": 4}, None)
    figures = report_figures(collected, CONFIG)
    assert figures["log"]["retracted_batches"] == ["b3"] and figures["log"]["batches"] == 2
    assert [b["retracted"] for b in figures["batches"]] == [False, False, True]
    assert [b["mode"] for b in figures["batches"]] == ["enforce"] * 3
    assert figures["settings"]["modes_in_range"] == {"enforce": 2}
    assert figures["totals"]["input_lines"] == 5 and figures["copy_lag"]["copies"] == 2
    assert figures["copy_lag"]["max_seconds"] == 2 * HOUR
    assert figures["top_sources"] == [{"name": "landing/a/", "duplicates": 1, "share": 0.5},
                                      {"name": "landing/b/", "duplicates": 1, "share": 0.5}]
    assert [p["name"] for p in figures["top_producers"]] == ["(not recorded)", "x"]
    assert figures["batches"][1]["seconds"]["latency"] == 60.0
    assert figures["health"]["cache_written_by_day"] == {"2026-11-20": {"objects": 3, "bytes": 300}}


class TimedLog:
    """Commit objects with given times: HEAD and LIST as the store answers them (the store's clocks
    may put a commit a little before the one it follows). Only the selection is under test here;
    tests/integration/test_report.py selects on the real store."""

    def __init__(self, times: list[datetime]) -> None:
        self.times = times

    def head(self, key: str) -> ObjectInfo:
        version = int(key.rsplit("/", 1)[1].split(".")[0])
        return ObjectInfo(key, 1, '"e"', self.times[version - 1])

    def list(self, prefix: str, *, start_after: str | None = None):  # type: ignore[no-untyped-def]
        for version, at in enumerate(self.times, 1):
            key = f"{prefix}{version:020d}.json"
            if start_after is None or key > start_after:
                yield ObjectInfo(key, 1, '"e"', at)


def test_the_range_holds_every_commit_made_in_it_even_when_clocks_disagree_a_little() -> None:
    from eventdedup.layout import Layout

    layout = Layout(CONFIG.layout)
    minute = timedelta(minutes=1)
    # Commit 4 is stamped a minute before commit 3 (two front ends' clocks), commit 7 after `until`
    # but commit 8 before it again.
    times = [T, T + 10 * minute, T + 20 * minute, T + 19 * minute, T + 30 * minute, T + 40 * minute,
             T + 52 * minute, T + 49 * minute, T + 60 * minute]
    assert layout.commit(3).endswith("00000000000000000003.json")
    store = TimedLog(times)
    picked = commit_times(store, layout, len(times), T + 19 * minute + timedelta(seconds=30), T + 50 * minute)  # type: ignore[arg-type]
    assert [v for v, _ in picked] == [3, 5, 6, 8]
    assert commit_times(store, layout, 6, T, T + 100 * minute)[-1][0] == 6  # type: ignore[arg-type]
    assert commit_times(store, layout, 0, T, T + 100 * minute) == []  # type: ignore[arg-type]
    assert first_version_at_or_after(lambda v: times[v - 1], len(times), T + 100 * minute) == len(times) + 1


def test_a_changelog_batchs_updates_are_not_copies_its_holders_come_from_the_audit() -> None:
    """decided_against counts a changelog batch's updates too; the audit holds duplicates only."""
    b1 = batch(1, "b1", T, {}, input_lines=1, output_rows=1)
    b2 = batch(2, "b2", T + timedelta(hours=1), {"b1": 3}, input_lines=3, output_rows=2, updates=2,
               cross_batch_duplicates=1, cross_batch_natural=1)
    collected = Collected(T, T + timedelta(days=1), 2, [CommitInRange(b1, T), CommitInRange(b2, T)],
                          {"b1": AuditSummary(), "b2": AuditSummary(holders=Counter({"b1": 1}))}, {},
                          {"b1": T, "b2": T + timedelta(hours=1)}, {}, None)
    lag = report_figures(collected, CONFIG)["copy_lag"]
    assert lag["copies"] == 1 and lag["max_seconds"] == HOUR


def test_a_batchs_distinct_values_are_bounded_the_rest_counted_together() -> None:
    from eventdedup.counts import OTHER_VALUES, RECORDED_VALUES, bounded_counts

    many = {f"client-{i:05d}": 1 for i in range(RECORDED_VALUES + 50)}
    many["client-big"] = 10
    bounded = bounded_counts(many)
    assert len(bounded) == RECORDED_VALUES + 1 and bounded["client-big"] == 10
    assert bounded[OTHER_VALUES] == 51 and sum(bounded.values()) == sum(many.values())
    assert bounded_counts({"a": 1}) == {"a": 1}
    # A value is recorded to 128 characters: a producer field holding a payload keeps records small.
    assert bounded_counts({"x" * 500: 1, "x" * 127 + "y": 2}) == {"x" * 127 + "…": 1, "x" * 127 + "y": 2}


def test_more_folders_than_recorded_are_rolled_up_to_their_parents_keeping_every_prefixs_sum() -> None:
    from eventdedup.counts import OTHER_VALUES, rolled_up_folders

    folders = {f"landing/client-{c:03d}/2026/11/": 1 for c in range(300)} | {"landing/big/2026/11/": 50, "top/": 2}
    rolled = rolled_up_folders(folders, limit=100)
    assert len(rolled) <= 100 and sum(rolled.values()) == sum(folders.values())
    # Rolled up to each client's folder, then to landing/: the first folder's sums stay exact.
    by_first: Counter[str] = Counter()
    for folder, n in rolled.items():
        by_first[folder.split("/")[0]] += n
    assert dict(by_first) == {"landing": 350, "top": 2}
    assert rolled == {"landing/": 350, "top/": 2}
    few = {"a/b/": 3, "a/c/": 1}
    assert rolled_up_folders(few) == few  # within the limit: as they are
    assert OTHER_VALUES not in rolled_up_folders({f"t{i}/": 1 for i in range(100)})
    assert rolled_up_folders({f"t{i:03d}/": 1 for i in range(150)})[OTHER_VALUES] == 50


def recorded_long_folder(folder: str) -> str:
    """A folder over 128 characters as docs/report.md says a commit records it."""
    import hashlib

    return folder[:110] + "…" + hashlib.blake2b(folder.encode(), digest_size=8).hexdigest() + "/"


def test_long_folders_are_recorded_apart_as_folders_and_credited_to_themselves() -> None:
    from eventdedup.counts import rolled_up_folders

    shared = "landing/" + "p" * 120 + "/"  # alike to 129 characters, past the 128 kept
    one, two = shared + "one/", shared + "two/"
    rolled = rolled_up_folders({one: 2, two: 3, "short/": 1})
    assert rolled == {recorded_long_folder(two): 3, recorded_long_folder(one): 2, "short/": 1}
    assert {len(name) for name in rolled if name != "short/"} == {128}
    assert recorded_sources(rolled, 0) == Counter(rolled)  # each is its own source, not its parent's
    assert recorded_sources(rolled, 1) == Counter({"landing/": 5, "short/": 1})


def test_a_long_folder_an_older_record_cut_as_a_value_is_credited_to_itself() -> None:
    """Records written before 2026-11-28 cut a folder over 128 characters to 127 and "…", no "/"."""
    cut = ("landing/" + "p" * 130 + "/one/")[:127] + "…"
    assert recorded_sources({cut: 4, "landing/b/": 1}, 0) == Counter({cut + "/": 4, "landing/b/": 1})
    assert recorded_sources({cut: 4, "landing/b/": 1}, 1) == Counter({"landing/": 5})


def test_verify_rerun_matches_an_older_records_cut_folders_with_the_rerun() -> None:
    from eventdedup.commit.job_result import JobResult
    from eventdedup.counts import rolled_up_folders
    from eventdedup.ops.pipeline import _change_differences

    one, two = "landing/" + "p" * 130 + "/one/", "landing/" + "p" * 130 + "/two/"
    held = CommitRecord(1, "b1", None, "t", T.isoformat(), BatchCounts(), (), {}, BatchChange(
        duplicates_by_folder={one[:127] + "…": 5, "landing/b/": 1}))  # one and two, added up as cut then

    def rerun(folders: dict[str, int]) -> JobResult:
        return JobResult("b1", 0, T.isoformat(), BatchCounts(), (),
                         BatchChange(duplicates_by_folder=rolled_up_folders(folders)))

    assert _change_differences(rerun({one: 2, two: 3, "landing/b/": 1}), held) == []
    assert [d.split(":")[0] for d in _change_differences(rerun({one: 2, two: 2, "landing/b/": 2}), held)] == [
        "duplicates_by_folder differs"]
    newer = CommitRecord(1, "b1", None, "t", T.isoformat(), BatchCounts(), (), {}, BatchChange(
        duplicates_by_folder={recorded_long_folder(one): 2, recorded_long_folder(two): 3}))
    assert _change_differences(rerun({one: 2, two: 3}), newer) == []
    assert _change_differences(rerun({one: 3, two: 2}), newer) != []  # recorded apart: compared apart


def test_stages_take_as_of_down_to_the_stores_whole_second() -> None:
    """A manual batch staged at 00:00:00.75: its manifest, written within that second, is dated 00:00:00."""
    as_of = T + timedelta(microseconds=750_000)
    record = batch(1, "b1", as_of, {}, input_lines=1, output_rows=1)
    commit = CommitInRange(record, T + timedelta(seconds=6), staged_at=T, promoted_at=T + timedelta(seconds=5))
    figures = report_figures(Collected(T, T + timedelta(days=1), 1, [commit], {}, {}, {"b1": as_of}, {}, None), CONFIG)
    assert figures["batches"][0]["seconds"] == {"latency": 6.0, "staging": 0.0, "dedup_job": 5.0, "promotion": 1.0}
    assert figures["batches"][0]["as_of"] == as_of.isoformat()


def test_operations_are_listed_and_copies_without_a_timed_holder_counted_apart() -> None:
    from eventdedup.commit.changes import Retraction

    b1 = batch(1, "b1", T, {}, input_lines=1, output_rows=1)
    # b2: three cross-batch copies; decided_against names one holder the log no longer has (gone)
    # and says nothing of a third copy (a record short of its copies): both counted apart.
    b2 = batch(2, "b2", T + timedelta(hours=1), {"b1": 1, "gone": 1}, input_lines=3, cross_batch_duplicates=3,
               cross_batch_natural=3)
    undo = CommitRecord(3, "undo", "b2", "t", (T + timedelta(hours=2)).isoformat(), BatchCounts(), (), {},
                        Retraction(("b0",), "test"))
    collected = Collected(T, T + timedelta(days=1), 3, [CommitInRange(b1, T), CommitInRange(b2, T),
                                                        CommitInRange(undo, T + timedelta(hours=2))],
                          {}, {}, {"b1": T, "b2": T + timedelta(hours=1)}, {}, None)
    figures = report_figures(collected, CONFIG)
    assert figures["log"]["operations"] == [{"version": 3, "batch_id": "undo", "kind": "retraction",
                                             "committed_at": (T + timedelta(hours=2)).isoformat()}]
    assert figures["log"]["batches"] == 2
    assert (figures["copy_lag"]["copies"], figures["copy_lag"]["unknown_holder"]) == (1, 2)
