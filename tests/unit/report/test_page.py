"""The report's page, drawn from figures small enough to work out by hand (docs/report.md, "What
it shows"): what each chart says it is, how columns are labelled and axes ticked, each batch's
mode, and names shown as they are, never as the browser would reorder them."""
from __future__ import annotations

import re
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any

from eventdedup.commit.changes import BatchChange
from eventdedup.commit.records import CommitRecord
from eventdedup.config import config_from_mapping
from eventdedup.counts import BatchCounts
from eventdedup.report import charts
from eventdedup.report.collect import AuditSummary, Collected, CommitInRange
from eventdedup.report.figures import report_figures
from eventdedup.report.page import _columns, render_page

T = datetime(2026, 11, 20, 5, tzinfo=timezone.utc)
CONFIG = config_from_mapping({"s3": {"bucket": "bkt"}, "report": {"producer_field": "app"}})


def batch(version: int, as_of: datetime, mode: str = "enforce") -> CommitRecord:
    counts = BatchCounts.of({"input_lines": 3, "output_rows": 2, "in_batch_duplicates": 1, "in_batch_natural": 1})
    return CommitRecord(version, f"b{version}", None, "t", as_of.isoformat(), counts, (), {},
                        BatchChange(decided_against={}, mode=mode))


def figures_of(records: list[CommitRecord], audits: dict[str, AuditSummary] | None = None) -> dict[str, Any]:
    commits = [CommitInRange(r, datetime.fromisoformat(r.as_of) + timedelta(minutes=1)) for r in records]
    return report_figures(Collected(T, T + timedelta(days=1), len(records), commits, audits or {}, {},
                                    {r.batch_id: datetime.fromisoformat(r.as_of) for r in records}, {}, None), CONFIG)


def test_control_and_bidi_characters_in_names_are_shown_escaped() -> None:
    # U+202E (right-to-left override) makes "exe.txt" read "txt.exe"; U+2066 an isolate; U+0007 a control.
    producer, folder = "app\u202etxt.exe", "landing/\u2066x\u0007/"
    audits = {"b1": AuditSummary(Counter({folder: 1}), Counter({producer: 1}))}
    page = render_page(figures_of([batch(1, T)], audits))
    assert not {"\u202e", "\u2066", "\u0007"} & set(page)
    assert "<td>app\\u202etxt.exe</td>" in page and "<td>landing/\\u2066x\\u0007/</td>" in page
    assert ">app\\u202etxt.exe</text>" in page  # the producers chart's label
    assert charts.visible("\U000e0001a\u00e9") == "\\U000e0001a\u00e9"  # a tag character (Cf) past the BMP; é stays


def test_every_chart_is_a_figure_with_its_caption() -> None:
    page = render_page(figures_of([batch(1, T), batch(2, T + timedelta(minutes=5))]))
    captions = dict(re.findall(r'<figure><svg class="chart" data-chart="([a-z_]+)".*?<figcaption>([^<]+)</figcaption>'
                               r"</figure>", page))
    assert captions == {
        "duplicates": "Duplicates found in each batch, by kind (stacked)",
        "volume": "Input lines read and output rows written by each batch",
        "quarantine": "Quarantined lines and excluded inputs of each batch (stacked)",
        "quarantine_reasons": "Quarantined lines of the range by reason class",
        "copy_lag": "Copies by how long after their original&#x27;s batch they arrived",
        "sources": "Duplicates by input source (folder), most first",
        "producers": "Duplicates by producer (app), most first",
        "latency": "Seconds from each batch&#x27;s as_of to its commit",
        "cache_written": "Cache bytes written per day of commit",
        "live_cache": "Live cache objects by the day of the hour they hold"}
    assert page.count('<svg class="chart"') == len(captions)


def test_columns_are_labelled_by_minute_unless_two_would_share_a_label() -> None:
    def labels(*as_ofs: datetime) -> list[str]:
        rows = figures_of([batch(v, at) for v, at in enumerate(as_ofs, 1)])["batches"]
        return _columns(rows)[0]

    assert labels(T, T + timedelta(minutes=5)) == ["11-20 05:00", "11-20 05:05"]
    # Two manual batches staged in one minute: every label to the second.
    assert labels(T + timedelta(seconds=10), T + timedelta(seconds=40), T + timedelta(minutes=5)) == [
        "11-20 05:00:10", "11-20 05:00:40", "11-20 05:05:00"]
    # A year apart, to the second: with the year.
    assert labels(T, T.replace(year=2027)) == ["2026-11-20 05:00:00", "2027-11-20 05:00:00"]
    # In one second: with their log versions.
    assert labels(T + timedelta(microseconds=100), T + timedelta(microseconds=700_000)) == [
        "2026-11-20 05:00:00 v1", "2026-11-20 05:00:00 v2"]


def y_ticks(svg: str) -> list[str]:
    return re.findall(rf'<text x="{charts.LEFT - 6}" y="[\d.]+" text-anchor="end">([^<]*)</text>', svg)


def test_count_axes_tick_at_whole_numbers() -> None:
    def bars(top: int) -> list[str]:
        return y_ticks(charts.stacked_bars("c", ["a", "b"], {"s": [top, 0]}, "none", caption="c"))

    # Steps 1, 2, 2.5 (from 25 on), 5 times a power of ten, the first reaching the top in four.
    assert bars(1) == ["0", "1"]
    assert bars(3) == ["0", "1", "2", "3"]
    assert bars(4) == ["0", "1", "2", "3", "4"]
    assert bars(5) == ["0", "2", "4", "6"]
    assert bars(13) == ["0", "5", "10", "15"]
    assert bars(100) == ["0", "25", "50", "75", "100"]
    assert bars(101) == ["0", "50", "100", "150"]
    assert bars(2600) == ["0", "1k", "2k", "3k"]
    assert y_ticks(charts.histogram("h", [("x", 2), ("y", 1)], "none", caption="h")) == ["0", "1", "2"]
    assert y_ticks(charts.lines("l", ["a", "b"], {"s": [1, 1]}, "none", caption="l")) == ["0", "1"]
    # Seconds are not counts: quarters of a round top.
    assert y_ticks(charts.lines("l", ["a", "b"], {"s": [2, 1]}, "none", caption="l", whole=False)) == [
        "0", "0.5", "1", "1.5", "2"]


def test_each_batchs_mode_is_shown_as_runs_in_commit_order() -> None:
    modes = ["enforce", "enforce", "observe", "enforce"]
    page = render_page(figures_of([batch(v, T + timedelta(minutes=5 * v), mode) for v, mode in enumerate(modes, 1)]))
    assert ("<table><tr><th>mode</th><th>first batch</th><th>last batch</th><th>batches</th></tr>"
            "<tr><td>enforce</td><td>b1</td><td>b2</td><td>2</td></tr>"
            "<tr><td>observe</td><td>b3</td><td>b3</td><td>1</td></tr>"
            "<tr><td>enforce</td><td>b4</td><td>b4</td><td>1</td></tr></table>") in page


def test_an_ordered_stores_updates_and_stale_versions_are_drawn_per_batch() -> None:
    """b1 emits 2 (no versions: no section); b2 updates 1 key and drops 2 stale versions; b3
    drops 1: the versions chart has those two series, per batch, and the header counts 3 stale."""
    def versions(version: int, updates: int, stale: int) -> CommitRecord:
        counts = BatchCounts.of({"input_lines": 2 + stale, "output_rows": 2 - (version > 1) * (2 - updates),
                                 "updates": updates, "stale_version": stale, "stale_dropped": stale})
        return CommitRecord(version, f"b{version}", None, "t", (T + timedelta(minutes=5 * version)).isoformat(),
                            counts, (), {}, BatchChange(decided_against={}))

    assert 'data-chart="versions"' not in render_page(figures_of([batch(1, T)]))
    page = render_page(figures_of([versions(1, 0, 0), versions(2, 1, 2), versions(3, 0, 1)]))
    chart = re.search(r'<svg class="chart" data-chart="versions".*?</figure>', page, re.S)
    assert chart is not None and "<figcaption>Updates emitted and stale versions dropped by each batch" in page
    figures = figures_of([versions(1, 0, 0), versions(2, 1, 2), versions(3, 0, 1)])
    assert [b["counts"]["updates"] for b in figures["batches"]] == [0, 1, 0]
    assert [b["counts"]["stale_version"] for b in figures["batches"]] == [0, 2, 1]
    assert "<td>stale versions dropped (or observed)</td><td>3</td>" in page
    assert "</i>updates</span>" in chart.group(0) and "</i>stale versions</span>" in chart.group(0)
    assert chart.group(0).count("<polyline") == 2  # series that are zero throughout are left out
