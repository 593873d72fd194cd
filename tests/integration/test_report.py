"""`eventdedup report` on a planned workload: every figure is computed here from the plan (which
line copies which event, planted in which batch at which time), by the rules docs/report.md states,
never from a run of the report.

The plan: five manual batches whose as_of the test sets (00:05 on day 0, then +5 min, +2 h,
+26 h and +70 h), a 72-hour window, three sources (folders) and a producer field `app`.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from eventdedup.commit.log import load_committed_state
from eventdedup.commit.view import committed_objects
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.exclude import exclude_input
from eventdedup.ops.pipeline import run_batch
from eventdedup.ops.scheduling import BatchPlan, stage_planned_batch
from eventdedup.report.build import build_report
from eventdedup.report.collect import collect
from eventdedup.s3store import S3Store

from ..support.helpers import committed_rows, make_config, put_lines

# The planted workload is built once per worker that runs this module's tests: keep them on one.
pytestmark = pytest.mark.xdist_group("report")

T0 = datetime(2026, 11, 20, 0, 5, tzinfo=timezone.utc)
WINDOW_HOURS = 72
EVERYTHING = (datetime(2000, 1, 1, tzinfo=timezone.utc), datetime(2100, 1, 1, tzinfo=timezone.utc))


def event(event_id: str, app: str, payload: str = "p", at: str = "2026-11-20T00:01:00Z") -> bytes:
    return json.dumps({"event_id": event_id, "created_at": at, "app": app, "payload": payload}).encode()


@dataclass
class PlannedBatch:
    batch_id: str
    as_of: datetime
    # source key -> lines; and what each planted copy is: (source folder, app, lag seconds)
    objects: dict[str, list[bytes]] = field(default_factory=dict)
    copies: list[tuple[str, str, float]] = field(default_factory=list)
    new_events: int = 0
    renamed: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    quarantined: Counter[str] = field(default_factory=Counter)
    cross_hour: int = 0
    excluded: list[str] = field(default_factory=list)  # input keys an operator excludes before its job

    def line(self, source: str, line: bytes) -> None:
        self.objects.setdefault(f"landing/{source}/{self.batch_id}.jsonl", []).append(line)

    def new(self, source: str, event_id: str, app: str) -> None:
        self.line(source, event(event_id, app))
        self.new_events += 1

    def copy(self, source: str, event_id: str, app: str, original: PlannedBatch, kind: str,
             at: str | None = None) -> None:
        """A copy of an event `original` emitted: natural (same payload) or synthetic (renamed); `at`:
        another event time, in another hour (a synthetic copy found across hours)."""
        synthetic = kind.endswith("synthetic")
        self.line(source, event(event_id, app, payload="changed" if synthetic and at is None else "p",
                                at=at or "2026-11-20T00:01:00Z"))
        self.copies.append((f"landing/{source}/", app, (self.as_of - original.as_of).total_seconds()))
        self.kinds[kind] += 1
        self.renamed += synthetic
        self.cross_hour += at is not None

    def exclude(self, source: str, lines: list[bytes]) -> None:
        """An input object an operator excludes after staging: quarantined whole, as one line."""
        key = f"landing/{source}/{self.batch_id}-excluded.jsonl"
        self.objects[key] = lines
        self.excluded.append(key)
        self.quarantined["excluded_input"] += 1

    def bad(self, source: str, line: bytes, reason_class: str) -> None:
        self.line(source, line)
        self.quarantined[reason_class] += 1

    @property
    def input_lines(self) -> int:
        return sum(1 if key in self.excluded else len(lines) for key, lines in self.objects.items())

    @property
    def output_rows(self) -> int:
        return self.new_events + self.renamed


def planned_workload() -> list[PlannedBatch]:
    b1, b2, b3, b4, b5 = (PlannedBatch(f"b{i}", T0 + offset) for i, offset in enumerate(
        (timedelta(0), timedelta(minutes=5), timedelta(hours=2), timedelta(hours=26), timedelta(hours=70)), 1))
    for i in range(1, 7):
        b1.new("app-a", f"e{i}", "a")
    b1.copy("app-a", "e1", "a", b1, "in_batch_natural")
    b1.new("app-b", "e7", "b")
    b1.new("app-b", "e8", "b")
    b1.copy("app-b", "e2", "b", b1, "in_batch_synthetic")
    b2.new("app-a", "f1", "a")
    b2.new("app-a", "f2", "a")
    b2.copy("app-a", "e3", "a", b1, "cross_batch_natural")
    b2.copy("app-c", "e4", "c", b1, "cross_batch_synthetic")
    b3.copy("app-a", "e5", "a", b1, "cross_batch_natural")
    b3.copy("app-a", "f1", "a", b2, "cross_batch_natural")
    b3.new("app-a", "g1", "a")
    b3.copy("app-a", "e3", "a", b1, "cross_batch_synthetic", at="2026-11-20T01:30:00Z")
    b4.copy("app-b", "e6", "a", b1, "cross_batch_natural")  # a natural copy: its payload (app too) is the original's
    b4.bad("app-b", b'{"event_id": "broken', "malformed_json")
    b4.bad("app-b", b'{"created_at":"2026-11-20T00:01:00Z"}', "bad_id")
    b4.new("app-b", "g2", "b")
    b4.exclude("app-b", [event("never-read", "b")])
    b5.copy("app-c", "e7", "b", b1, "cross_batch_natural")
    b5.copy("app-c", "e8", "b", b1, "cross_batch_natural")
    b5.new("app-c", "g3", "c")
    b5.copy("app-c", "g3", "c", b5, "in_batch_natural")
    return [b1, b2, b3, b4, b5]


@dataclass
class Workload:
    store: S3Store
    config: object
    plan: list[PlannedBatch]


@pytest.fixture(scope="module")
def workload(s3_server, spark) -> Iterator[Workload]:  # type: ignore[no-untyped-def]
    name = f"report-{os.getpid()}"
    s3_server.client().create_bucket(Bucket=name)
    config = make_config(s3_server.endpoint_url, name, dedup={"window_hours": WINDOW_HOURS},
                         report={"producer_field": "app"})
    store = S3Store(s3_server.client(), name)
    plan = planned_workload()
    for batch in plan:
        for key, lines in batch.objects.items():
            put_lines(store, key, lines)
        # Each batch takes the landing objects no earlier batch consumed (the ingestion ledger).
        selector = InputSelector(input_prefix="landing/")
        if batch.excluded:
            stage_planned_batch(store, config, BatchPlan(batch.batch_id, selector), batch.as_of)
            for key in batch.excluded:
                exclude_input(store, Layout(config.layout), batch.batch_id, key, "a producer bug", batch.as_of)
        run_batch(store, config, batch.batch_id, selector, batch.as_of, lambda: spark)
    yield Workload(store, config, plan)
    s3_server.delete_bucket(name)


def expected_lags(plan: list[PlannedBatch]) -> list[float]:
    return sorted(lag for batch in plan for _, _, lag in batch.copies)


def nearest_rank(values: list[float], percentile: float) -> float:
    return values[max(1, math.ceil(percentile / 100 * len(values))) - 1]


def test_every_batch_is_reported_with_its_planted_counts(workload: Workload) -> None:
    figures = build_report(workload.store, workload.config, *EVERYTHING).figures
    rows = {row["batch_id"]: row for row in figures["batches"]}
    assert list(rows) == [batch.batch_id for batch in workload.plan]
    for batch in workload.plan:
        counts = rows[batch.batch_id]["counts"]
        natural = batch.kinds["in_batch_natural"] + batch.kinds["cross_batch_natural"]
        assert (counts["input_lines"], counts["output_rows"], counts["malformed"], counts["renamed"]) == (
            batch.input_lines, batch.output_rows, sum(batch.quarantined.values()), batch.renamed), batch.batch_id
        assert {kind: counts[kind] for kind in batch.kinds} == dict(batch.kinds), batch.batch_id
        assert (counts["in_batch_duplicates"], counts["cross_batch_duplicates"]) == (
            batch.kinds["in_batch_natural"], batch.kinds["cross_batch_natural"])
        assert counts["in_batch_duplicates"] + counts["cross_batch_duplicates"] == natural
        assert (counts["cross_hour_duplicates"], counts["inputs_excluded"]) == (batch.cross_hour, len(batch.excluded))
        assert rows[batch.batch_id]["as_of"] == batch.as_of.isoformat()
    plan = workload.plan
    kinds = sum((b.kinds for b in plan), Counter())
    assert {name: figures["totals"][name] for name in (
        "input_lines", "output_rows", "malformed", "renamed", "cross_hour_duplicates", "inputs_excluded",
        "in_batch_duplicates", "cross_batch_duplicates", *kinds)} == {
        "input_lines": sum(b.input_lines for b in plan), "output_rows": sum(b.output_rows for b in plan),
        "malformed": sum(sum(b.quarantined.values()) for b in plan), "renamed": sum(b.renamed for b in plan),
        "cross_hour_duplicates": sum(b.cross_hour for b in plan),
        "inputs_excluded": sum(len(b.excluded) for b in plan),
        # Natural copies are dropped (synthetic ones renamed), in their batch or across batches.
        "in_batch_duplicates": kinds["in_batch_natural"], "cross_batch_duplicates": kinds["cross_batch_natural"],
        **kinds}
    assert all(figures["totals"][name] == 0 for name in (
        "kept_synthetic", "updates", "would_drop_in_batch", "would_drop_cross_batch", "would_rename", "would_keep",
        "would_update", "populated"))
    assert figures["quarantine_by_reason"] == dict(sum((b.quarantined for b in plan), Counter()))
    assert figures["log"] == {"head_version": len(plan), "commits_in_range": len(plan), "batches": len(plan),
                              "retracted_batches": [], "operations": []}
    assert figures["settings"]["modes_in_range"] == {"enforce": len(plan)}


def test_the_copy_lag_distribution_is_the_planted_one(workload: Workload) -> None:
    lag = build_report(workload.store, workload.config, *EVERYTHING).figures["copy_lag"]
    lags = expected_lags(workload.plan)
    window = WINDOW_HOURS * 3600.0
    assert lag["copies"] == len(lags) == 11
    bounds = [0.0, 300.0, 900.0, 3600.0, 6 * 3600.0, 86400.0, 2 * 86400.0, 3 * 86400.0, 7 * 86400.0, 14 * 86400.0]
    expected_bins = [sum(1 for v in lags if (i == 0 and v == 0) or (i > 0 and bounds[i - 1] < v <= bounds[i]))
                     for i in range(len(bounds))] + [sum(1 for v in lags if v > bounds[-1])]
    assert [b["copies"] for b in lag["histogram"]] == expected_bins == [3, 2, 0, 0, 3, 0, 1, 2, 0, 0, 0]
    assert lag["percentiles_seconds"] == {str(p): nearest_rank(lags, p) for p in (50, 90, 99, 99.9)}
    assert lag["max_seconds"] == max(lags) == 70 * 3600.0
    beyond = {name: sum(1 for v in lags if v > bound) for name, bound in
              (("1h", 3600.0), ("1d", 86400.0), ("half_window", window / 2), ("window_last_tenth", 0.9 * window),
               ("window", window))}
    assert {name: v["copies"] for name, v in lag["beyond"].items()} == beyond == {
        "1h": 6, "1d": 3, "half_window": 2, "window_last_tenth": 2, "window": 0}
    assert {name: v["share"] for name, v in lag["beyond"].items()} == pytest.approx(
        {name: n / len(lags) for name, n in beyond.items()})
    assert (lag["window_hours"], lag["unknown_holder"]) == (WINDOW_HOURS, 0)
    # Two copies came 70 h after their originals, in the 72 h window's last tenth: too short, and
    # twice the longest lag (140 h) rounds up to whole days: 144 h.
    assert lag["verdict"].startswith("The window may be too short: 2 of 11 copies (18.2%)")
    assert "144 h would hold twice the longest lag caught (2.9 d)" in lag["verdict"]


def test_top_sources_and_producers_rank_the_planted_copies(workload: Workload) -> None:
    figures = build_report(workload.store, workload.config, *EVERYTHING).figures
    sources = Counter(source for batch in workload.plan for source, _, _ in batch.copies)
    producers = Counter(app for batch in workload.plan for _, app, _ in batch.copies)

    def ranked(counter: Counter[str]) -> list[dict[str, object]]:
        total = sum(counter.values())
        return [{"name": name, "duplicates": n, "share": n / total}
                for name, n in sorted(counter.items(), key=lambda item: (-item[1], item[0]))]

    assert figures["top_sources"] == ranked(sources)
    assert figures["top_producers"] == ranked(producers)
    assert [(t["name"], t["duplicates"]) for t in figures["top_producers"]] == [("a", 6), ("b", 3), ("c", 2)]


def test_health_comes_from_the_stores_own_times(workload: Workload) -> None:
    """Latency and stages from the objects' own times on the store (read here with boto3), cache
    bytes written from the commit records (read here as JSON), live cache from the folded state."""
    store, layout = workload.store, Layout(workload.config.layout)
    client, bucket = store.client, store.bucket
    listing = client.list_objects_v2(Bucket=bucket, Prefix=layout.settings.commit_log_prefix)
    committed = {layout.version_of_commit_key(item["Key"]): item["LastModified"] for item in listing["Contents"]}
    figures = build_report(store, workload.config, *EVERYTHING).figures
    stages: dict[str, list[float]] = {}
    written: dict[str, dict[str, int]] = {}
    for row, batch in zip(figures["batches"], workload.plan, strict=True):
        record = json.loads(client.get_object(Bucket=bucket, Key=layout.commit(row["version"]))["Body"].read())
        at = committed[row["version"]]
        staged = client.head_object(Bucket=bucket, Key=layout.batch_manifest(batch.batch_id))["LastModified"]
        first = next(o for o in record["objects"] if o["kind"] in ("audit", "data", "quarantine"))
        copied = client.head_object(Bucket=bucket, Key=first["key"])["LastModified"]
        expected = {"latency": (at - batch.as_of).total_seconds(), "staging": (staged - batch.as_of).total_seconds(),
                    "dedup_job": (copied - staged).total_seconds(), "promotion": (at - copied).total_seconds()}
        assert (row["committed_at"], row["seconds"]) == (at.isoformat(), expected)
        for name, value in expected.items():
            stages.setdefault(name, []).append(value)
        day = written.setdefault(at.date().isoformat(), {"objects": 0, "bytes": 0})
        cache = [o for o in record["objects"] if o["kind"] == "cache"]
        day["objects"] += len(cache)
        day["bytes"] += sum(o["size"] for o in cache)
    assert figures["health"]["seconds"] == {name: {"median": sorted(v)[len(v) // 2], "max": max(v)}
                                            for name, v in stages.items()}  # five batches: the middle one
    assert figures["health"]["cache_written_by_day"] == written
    state = load_committed_state(store, layout)
    live = Counter(key.split("/")[0] if key[:4].isdigit() else "guards" for key in state.cache_heads
                   for _ in range(1 + len(state.cache_bases.get(key, ()))))
    assert figures["health"]["live_cache_objects_by_day"] == dict(sorted(live.items()))
    assert set(live) == {"2026-11-20", "guards"}  # every event's hour is on the 20th; id guards apart


def test_each_commit_records_what_its_audit_and_quarantine_hold_and_no_file_is_read(workload: Workload) -> None:
    """The commits record their duplicates by folder and producer, their copies' holders and their
    quarantined lines by class: each map is what the batch's committed audit and quarantine files
    hold (read here in full), and the report reads none of those files."""
    from eventdedup.counts import bounded_counts, rolled_up_folders
    from eventdedup.parse.quarantine_reasons import reason_class

    store, config, layout = workload.store, workload.config, Layout(workload.config.layout)
    audit, quarantine = committed_rows(store, config, "audit"), committed_rows(store, config, "quarantine")
    for version, batch in enumerate(workload.plan, 1):
        change = json.loads(store.get_bytes(layout.commit(version)))["change"]
        rows = [r for r in audit if r["batch_id"] == batch.batch_id]
        assert change["duplicates_by_folder"] == rolled_up_folders(
            Counter(r["source_object"].rpartition("/")[0] + "/" for r in rows))
        assert change["duplicates_by_producer"] == bounded_counts(Counter(r["producer"] or "" for r in rows))
        assert change["copies_decided_against"] == dict(Counter(
            r["kept_in_batch"] for r in rows if r["kept_in_batch"] != batch.batch_id))
        assert change["quarantined_by_reason"] == dict(Counter(
            reason_class(r["error"]) for r in quarantine if r["batch_id"] == batch.batch_id)) == dict(batch.quarantined)
    figures = build_report(store, config, *EVERYTHING).figures
    assert figures["read"] == {"requests_for_columns": 0, "column_bytes_read": 0, "audit_and_quarantine_bytes": 0,
                               "unreadable_files": []}


def test_copies_of_batches_before_the_range_are_timed_from_their_commits(workload: Workload) -> None:
    """The newest four commits: b1, whose copies b2..b5 hold, is outside; its time comes from its
    commit record's head."""
    store, layout = workload.store, Layout(workload.config.layout)
    figures = build_report(store, workload.config, *EVERYTHING, last=4).figures
    assert [row["batch_id"] for row in figures["batches"]] == ["b2", "b3", "b4", "b5"]
    listing = store.client.list_objects_v2(Bucket=store.bucket, Prefix=layout.settings.commit_log_prefix)
    committed = {layout.version_of_commit_key(item["Key"]): item["LastModified"] for item in listing["Contents"]}
    assert figures["range"] == {"since": committed[2].isoformat(), "until": committed[5].isoformat()}
    lags = sorted(lag for batch in workload.plan[1:] for _, _, lag in batch.copies)
    assert figures["copy_lag"]["copies"] == len(lags) and figures["copy_lag"]["max_seconds"] == max(lags)
    assert figures["copy_lag"]["percentiles_seconds"]["50"] == nearest_rank(lags, 50)


def test_the_ingestion_lag_counts_what_waits_at_the_time_given(workload: Workload) -> None:
    store = workload.store
    put_lines(store, "landing/app-z/late.jsonl", [event("late", "z")])  # consumed by no batch
    try:
        landed = store.client.head_object(Bucket=store.bucket, Key="landing/app-z/late.jsonl")["LastModified"]
        ingestion = build_report(store, workload.config, *EVERYTHING, now=landed + timedelta(minutes=1)).figures[
            "health"]["ingestion"]
        assert (ingestion["unconsumed"], ingestion["oldest_unconsumed"]) == (1, "landing/app-z/late.jsonl")
        assert build_report(store, workload.config, *EVERYTHING).figures["health"]["ingestion"] is None
    finally:
        store.delete_keys(["landing/app-z/late.jsonl"])


def test_a_range_holds_exactly_the_commits_made_in_it(workload: Workload) -> None:
    store, layout = workload.store, Layout(workload.config.layout)
    listing = store.client.list_objects_v2(Bucket=store.bucket, Prefix=layout.settings.commit_log_prefix)
    times = sorted((layout.version_of_commit_key(item["Key"]), item["LastModified"]) for item in listing["Contents"])
    since, until = times[2][1], times[4][1]
    collected = collect(store, workload.config, since, until)
    assert [c.record.version for c in collected.commits] == [v for v, t in times if since <= t < until]
    assert collect(store, workload.config, times[-1][1] + timedelta(seconds=1), EVERYTHING[1]).commits == []


def test_the_page_draws_every_chart_in_a_real_browser(workload: Workload, tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    assert chromium, "the report's browser test needs Debian's chromium (make chromium installs it)"
    page = tmp_path / "report.html"
    page.write_text(build_report(workload.store, workload.config, *EVERYTHING).html, encoding="utf-8")
    assert "http://" not in page.read_text().replace('xmlns="http://www.w3.org/2000/svg"', "")
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    charts = dict(re.findall(r'<svg class="chart" data-chart="([a-z_]+)"[^>]*?data-marks="(\d+)"', dom))
    rendered = dict(re.findall(r'<svg class="chart" data-chart="([a-z_]+)"[^>]*?data-rendered="(\d+x\d+)"', dom))
    expected = {"duplicates", "volume", "quarantine", "quarantine_reasons", "copy_lag", "sources", "producers",
                "latency", "cache_written", "live_cache"}
    assert set(charts) == expected, dom[:2000]
    assert all(int(marks) > 0 for marks in charts.values()), charts
    assert all(int(size.split("x")[0]) > 0 and int(size.split("x")[1]) > 0 for size in rendered.values()), rendered
    shot = os.environ.get("EVENTDEDUP_REPORT_SCREENSHOT")
    if shot:  # docs/images/report.png: taken by this test on request, as the README shows it
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--window-size=860,2600", f"--screenshot={Path(shot).resolve()}", page.as_uri()],
                       capture_output=True, timeout=120, check=True)


# Measures, once the page has loaded, the body's right edge, the widest table's, and how wide the
# document scrolls against the window, into a data- attribute of the body for --dump-dom.
_MEASURE_WIDTHS = """<script>addEventListener('load',function(){var r=0;document.querySelectorAll('table').forEach(
function(t){r=Math.max(r,t.getBoundingClientRect().right)});document.body.setAttribute('data-widths',
[Math.round(document.body.getBoundingClientRect().right),Math.ceil(r),document.documentElement.scrollWidth,
window.innerWidth].join(' '))});</script>"""


def test_a_long_name_wraps_within_the_page_in_a_real_browser(tmp_path: Path) -> None:
    """A producer value of 128 characters without a space (as a commit records it at most), and a
    folder as long: every table stays within the page's column, and the page does not scroll sideways."""
    from eventdedup.commit.changes import BatchChange
    from eventdedup.commit.records import CommitRecord
    from eventdedup.counts import BatchCounts
    from eventdedup.report.collect import AuditSummary, Collected, CommitInRange
    from eventdedup.report.figures import report_figures
    from eventdedup.report.page import render_page

    chromium = shutil.which("chromium")
    assert chromium, "the report's browser test needs Debian's chromium (make chromium installs it)"
    config = make_config("http://127.0.0.1:9", "wrap", report={"producer_field": "app"})
    record = CommitRecord(1, "b1", None, "t", T0.isoformat(), BatchCounts.of(
        {"input_lines": 2, "output_rows": 1, "in_batch_duplicates": 1, "in_batch_natural": 1}), (), {},
        BatchChange(decided_against={}))
    audits = {"b1": AuditSummary(Counter({"landing/" + "f" * 119 + "/": 1}), Counter({"ab12" * 32: 1}))}
    collected = Collected(T0, T0 + timedelta(days=1), 1, [CommitInRange(record, T0)], audits, {}, {"b1": T0}, {},
                          None)
    page = tmp_path / "report.html"
    page.write_text(render_page(report_figures(collected, config)).replace("</body>", _MEASURE_WIDTHS + "</body>"),
                    encoding="utf-8")
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1000,2000",
                          "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True).stdout
    assert "ab12" * 32 in dom
    widths = re.search(r'data-widths="(\d+) (\d+) (\d+) (\d+)"', dom)
    assert widths, dom[:2000]
    body_right, table_right, scroll_width, window_width = map(int, widths.groups())
    assert table_right <= body_right and scroll_width <= window_width, widths.groups()


def test_a_rerun_under_another_producer_field_still_verifies_but_a_changed_decision_does_not(
        workload: Workload, spark) -> None:  # type: ignore[no-untyped-def]
    """The producer is copied from the raw line as [report] producer_field says when the audit is
    written, no decision of the batch's: verify-rerun compares every other audit column."""
    from dataclasses import replace

    from eventdedup.ops.pipeline import verify_rerun

    config = workload.config
    unset = replace(config, report=replace(config.report, producer_field=""))
    assert verify_rerun(workload.store, unset, "b2", spark) == []
    keeping = replace(config, dedup=replace(config.dedup, synthetic="keep"))  # b2's synthetic copy: kept, not renamed
    assert any("audit" in problem for problem in verify_rerun(workload.store, keeping, "b2", spark))


def test_columns_are_read_by_range_not_whole(s3_server, bucket) -> None:  # type: ignore[no-untyped-def]
    """A production-sized audit file (6,000 duplicates of ~300-byte lines): the short columns come
    back exactly, for a fraction of its bytes; a footer past the first tail read, and a column the
    file lacks (written before it existed), are read too."""
    import pyarrow as pa

    from eventdedup.report.ranged_parquet import ReadCost, read_columns
    from eventdedup.tables import AUDIT_SCHEMA, table_to_parquet

    rows = 6000
    table = pa.table({
        "event_id": [f"id-{i:08d}" for i in range(rows)],
        "event_time": pa.array([1_795_000_000_000_000 + i for i in range(rows)], pa.timestamp("us", tz="UTC")),
        "reason": ["cross_batch_natural"] * rows, "action": ["dropped"] * rows, "kept_in_batch": ["b1"] * rows,
        "batch_id": ["b2"] * rows, "source_object": [f"landing/src-{i % 7}/o.jsonl" for i in range(rows)],
        "line_number": list(range(rows)), "raw": [f'{{"event_id":"id-{i:08d}","pad":"{hashlib.sha256(str(i).encode()).hexdigest() * 4}"}}'
                for i in range(rows)],
        "producer": [f"app-{i % 13}" for i in range(rows)], "would_supersede": [None] * rows}, schema=AUDIT_SCHEMA)
    store = S3Store(s3_server.client(), bucket)
    body = table_to_parquet(table)
    info = store.put_bytes("audit/a.parquet", body)
    cost = ReadCost()
    got = read_columns(store, "audit/a.parquet", ["source_object", "producer"], etag=info.etag, cost=cost)
    assert got.to_pydict() == {"source_object": table.column("source_object").to_pylist(),
                               "producer": table.column("producer").to_pylist()}
    # Two GETs: the last 16 KiB (footer and the producer chunk, which follows raw), then the
    # source_object chunk, which precedes raw; raw, event ids and the rest are never fetched.
    import io

    import pyarrow.parquet as pq
    chunk = pq.read_metadata(io.BytesIO(body)).row_group(0).column(AUDIT_SCHEMA.names.index("source_object"))
    assert (cost.requests, cost.object_bytes) == (2, len(body))
    assert cost.bytes_read == (16 << 10) + chunk.total_compressed_size < len(body) // 20
    # Many small row groups: a footer longer than the first read's 16 KiB.
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=10)
    store.put_bytes("audit/groups.parquet", sink.getvalue())
    assert pq.read_metadata(io.BytesIO(sink.getvalue())).serialized_size > 16 << 10
    assert read_columns(store, "audit/groups.parquet", ["producer"]).column("producer").to_pylist() == \
        table.column("producer").to_pylist()
    older = table.drop_columns(["producer"])
    store.put_bytes("audit/older.parquet", table_to_parquet(older))
    assert read_columns(store, "audit/older.parquet", ["source_object", "producer"]).column(
        "producer").to_pylist() == [None] * rows


def as_recorded_before_2026_11_26(store: S3Store, layout: Layout, version: int) -> None:
    """Rewrite commit `version` as a release before 2026-11-26 wrote it: without decided_against and
    the duplicates by folder and producer (a test's stand-in for an old store)."""
    key = layout.commit(version)
    doc = json.loads(store.get_bytes(key))
    for name in ("decided_against", "duplicates_by_folder", "duplicates_by_producer", "copies_decided_against",
                 "quarantined_by_reason"):
        doc["change"].pop(name, None)
    store.put_bytes(key, json.dumps(doc).encode())


def test_older_commits_are_reported_from_their_audit_and_a_file_gone_is_named(s3_server, bucket, spark) -> None:  # type: ignore[no-untyped-def]
    config = make_config(s3_server.endpoint_url, bucket, report={"producer_field": "app"})
    by_top_folder = make_config(s3_server.endpoint_url, bucket, report={"producer_field": "app",
                                                                        "source_prefix_depth": 1})
    store, layout = S3Store(s3_server.client(), bucket), Layout(config.layout)
    put_lines(store, "landing/x/1.jsonl", [event("a", "p"), event("a", "p"), event("b", "q"), event("b", "q"), b"{"])
    run_batch(store, config, "one", InputSelector(input_prefix="landing/"), T0, lambda: spark)
    put_lines(store, "landing/y/2.jsonl", [event("a", "p"), event("c", "r")])
    run_batch(store, config, "two", InputSelector(input_prefix="landing/"), T0 + timedelta(hours=1), lambda: spark)
    recorded = build_report(store, config, *EVERYTHING).figures
    recorded_top = build_report(store, by_top_folder, *EVERYTHING).figures
    assert recorded["read"]["requests_for_columns"] == 0
    assert recorded["quarantine_by_reason"] == {"malformed_json": 1}
    assert [(t["name"], t["duplicates"]) for t in recorded_top["top_sources"]] == [("landing/", 3)]
    assert [(t["name"], t["duplicates"]) for t in recorded["top_sources"]] == [("landing/x/", 2), ("landing/y/", 1)]
    assert [(t["name"], t["duplicates"]) for t in recorded["top_producers"]] == [("p", 2), ("q", 1)]
    assert [b["copies"] for b in recorded["copy_lag"]["histogram"][:5]] == [2, 0, 0, 1, 0]  # a's copy an hour on
    for version in (1, 2):
        as_recorded_before_2026_11_26(store, layout, version)
    older = build_report(store, config, *EVERYTHING).figures
    audits = sorted(committed_objects(store, layout, "audit"), key=lambda o: o.key)
    quarantined = list(committed_objects(store, layout, "quarantine"))
    assert older["read"]["requests_for_columns"] == len(audits) + len(quarantined) > 1
    for figure in ("top_sources", "top_producers", "copy_lag", "totals", "quarantine_by_reason"):
        assert older[figure] == recorded[figure], figure
    assert build_report(store, by_top_folder, *EVERYTHING).figures["top_sources"] == recorded_top["top_sources"]
    store.delete_keys([audits[0].key])  # a lifecycle rule, say
    figures = build_report(store, config, *EVERYTHING).figures
    unreadable = figures["read"]["unreadable_files"]
    assert len(unreadable) == 1 and unreadable[0].startswith(store.uri(audits[0].key) + ": ")
    assert figures["totals"]["input_lines"] == 7
    assert sum(t["duplicates"] for t in figures["top_producers"]) == 3 - audits[0].rows


def test_the_command_writes_the_page_or_prints_the_figures(workload: Workload, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from eventdedup.cli import main as cli_main

    config = workload.config
    toml = tmp_path / "c.toml"
    toml.write_text(f'[s3]\nbucket = "{config.s3.bucket}"\nendpoint_url = "{config.s3.endpoint_url}"\n'
                    f'[dedup]\nwindow_hours = {WINDOW_HOURS}\n[report]\nproducer_field = "app"\n')
    assert cli_main(["report", "--config", str(toml), "--json", "--last", "2"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [row["batch_id"] for row in printed["batches"]] == ["b4", "b5"]
    out = tmp_path / "r.html"
    assert cli_main(["report", "--config", str(toml), "--since", EVERYTHING[0].isoformat(),
                     "--until", EVERYTHING[1].isoformat(), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"{out}: 5 batches committed from 2000-01-01T00:00:00+00:00") and "too short" in said
    assert out.read_text().count('<svg class="chart"') == 10
    assert cli_main(["report", "--config", str(toml), "--last", "0"]) == 2


def test_the_latest_report_only_moves_forward_and_a_day_is_named_by_its_date(s3_server, bucket) -> None:  # type: ignore[no-untyped-def]
    from eventdedup.report.build import publish_report, report_name

    config = make_config(s3_server.endpoint_url, bucket)
    store = S3Store(s3_server.client(), bucket)
    day = datetime(2026, 11, 25, tzinfo=timezone.utc)
    assert report_name(day, day + timedelta(days=1)) == "2026-11-25"
    assert report_name(day + timedelta(hours=6), day + timedelta(hours=7)) == "20261125T060000Z-20261125T070000Z"
    berlin = timezone(timedelta(hours=1))
    assert report_name(day.astimezone(berlin), (day + timedelta(days=1)).astimezone(berlin)) == "2026-11-25"
    newer = build_report(store, config, day, day + timedelta(days=1))
    older = build_report(store, config, day - timedelta(days=1), day)
    publish_report(store, config, newer, "2026-11-25")
    assert publish_report(store, config, older, "2026-11-24") == ["reports/2026-11-24.json", "reports/2026-11-24.html"]
    assert store.get_bytes("reports/latest.json") == newer.json  # a rerun of an older day leaves latest alone
    store.put_bytes("reports/latest.json", b"{not json")
    assert "reports/latest.json" in publish_report(store, config, older, "2026-11-24")  # unreadable: replaced


def test_a_holders_time_is_read_whole_when_its_records_head_does_not_hold_it(s3_server, bucket) -> None:  # type: ignore[no-untyped-def]
    from eventdedup.commit.log import commit_as_of
    from eventdedup.commit.records import CommitRecord
    from eventdedup.counts import BatchCounts

    config = make_config(s3_server.endpoint_url, bucket)
    store, layout = S3Store(s3_server.client(), bucket), Layout(config.layout)
    at = "2026-11-20T00:05:00+00:00"
    short = CommitRecord(1, "b1", None, "t", at, BatchCounts(), (), {})
    long = CommitRecord(2, "b2", "b1", "t" * 3000, at, BatchCounts(), (), {})  # as_of past the first 2 KiB
    for record in (short, long):
        store.put_bytes(layout.commit(record.version), record.to_bytes())
    assert commit_as_of(store, layout, 1) == commit_as_of(store, layout, 2) == datetime.fromisoformat(at)
