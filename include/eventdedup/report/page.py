"""The report as one self-contained HTML page, drawn from the figures document alone.

No script, style sheet or font is fetched: the charts are inline SVG and the style is inline. The
one inline script measures what the browser drew (each chart's size, its marks) into `data-`
attributes, so a headless browser's DOM says whether the charts rendered. Names from the data
(producers, folders, keys) are shown with their control and bidi characters escaped
(`charts.escaped`), and wrap where they must: no name widens the page.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from eventdedup.report import charts
from eventdedup.report.charts import escaped
from eventdedup.report.figures import DUPLICATE_KINDS, duration_text

MAX_COLUMNS = 288  # a day of 5-minute batches; longer ranges add neighbouring batches together
# A column's label is its first batch's as_of in the first of these under which no two columns
# share a label (batches staged by hand may fall in one minute), else the last with its log version.
LABEL_FORMATS = ("%m-%d %H:%M", "%m-%d %H:%M:%S", "%Y-%m-%d %H:%M:%S")

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:800px;color:#222;
overflow-wrap:anywhere}
h1{font-size:22px;margin-bottom:4px}h2{font-size:17px;margin:28px 0 6px;border-bottom:1px solid #ddd}
.sub{color:#666}.verdict{background:#f4f6fb;border-left:4px solid #4269d0;padding:8px 12px}
.warn{border-left-color:#ff725c}table{border-collapse:collapse;margin:8px 0;max-width:100%}
td,th{padding:3px 10px;text-align:right;border-bottom:1px solid #eee}th{color:#555;font-weight:600}
td:first-child,th:first-child{text-align:left}svg.chart text{font-size:11px;fill:#555}
svg.chart .grid{stroke:#eee}svg.chart .empty{font-size:14px;fill:#999}
.legend{font-size:12px;color:#444;margin:-2px 0 10px}.key{margin-right:14px}
.key i{display:inline-block;width:10px;height:10px;margin-right:4px}
figure{margin:10px 0 18px}figcaption{font-size:12px;color:#666}
"""

_CHECK = """
addEventListener('load',function(){var n=0;document.querySelectorAll('svg.chart').forEach(function(s){
var r=s.getBoundingClientRect(),m=0;s.querySelectorAll('.mark').forEach(function(e){var b=e.getBBox();
if(b.width>0||b.height>0)m++});s.setAttribute('data-rendered',Math.round(r.width)+'x'+Math.round(r.height));
s.setAttribute('data-marks',m);n++});document.body.setAttribute('data-charts-checked',n)});
"""


def render_page(figures: Mapping[str, Any]) -> str:
    batches = [b for b in figures["batches"] if not b["retracted"]]
    labels, columns = _columns(batches)
    sections = [
        _header(figures, batches),
        _section("Duplicates by kind, per batch", charts.stacked_bars(
            "duplicates", labels, {kind.replace("_", " "): [c["counts"][kind] for c in columns]
                                   for kind in DUPLICATE_KINDS}, "No duplicates in this range.",
            caption="Duplicates found in each batch, by kind (stacked)")
                 + _what_became_of_them(figures["totals"])),
        _versions_section(labels, columns),
        _section("Input lines and output rows, per batch", charts.lines(
            "volume", labels, {"input lines": [c["counts"]["input_lines"] for c in columns],
                               "output rows": [c["counts"]["output_rows"] for c in columns]}, "No batches.",
            caption="Input lines read and output rows written by each batch")),
        # An excluded input is one quarantine row (counted in malformed too): lines and objects apart.
        _section("Quarantined lines and excluded inputs, per batch", charts.stacked_bars(
            "quarantine", labels, {"quarantined lines": [c["counts"]["malformed"] - c["counts"]["inputs_excluded"]
                                                         for c in columns],
                                   "excluded inputs (whole objects)": [c["counts"]["inputs_excluded"]
                                                                       for c in columns]},
            "Nothing was quarantined.", caption="Quarantined lines and excluded inputs of each batch (stacked)")
                 + charts.horizontal_bars("quarantine_reasons", list(figures["quarantine_by_reason"].items()),
                                          "No quarantined lines.",
                                          caption="Quarantined lines of the range by reason class")),
        _lag_section(figures["copy_lag"]),
        _sources_section(figures),
        _health_section(figures["health"], labels, columns),
        _columns_section(figures.get("columns", [])),
    ]
    return ("<!doctype html><html lang=en><head><meta charset=utf-8><title>eventdedup report</title>"
            f"<style>{_STYLE}</style></head><body>{''.join(sections)}<script>{_CHECK}</script></body></html>")


def _columns(batches: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """At most MAX_COLUMNS columns: neighbouring batches summed, their durations' maximum kept."""
    per = max(1, -(-len(batches) // MAX_COLUMNS))
    groups = [batches[start:start + per] for start in range(0, len(batches), per)]
    columns = [{"counts": {name: sum(b["counts"][name] for b in group) for name in group[0]["counts"]},
                "seconds": {name: max((b["seconds"][name] for b in group if b["seconds"][name] is not None),
                                      default=None) for name in group[0]["seconds"]}} for group in groups]
    return _column_labels([group[0] for group in groups]), columns


def _column_labels(firsts: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each column's label from its first batch (LABEL_FORMATS): no two columns share one."""
    starts = [datetime.fromisoformat(b["as_of"]) for b in firsts]
    labels: list[str] = []
    for form in LABEL_FORMATS:
        labels = [start.strftime(form) for start in starts]
        if len(set(labels)) == len(labels):
            return labels
    return [f"{label} v{b['version']}" for label, b in zip(labels, firsts, strict=True)]


# A changelog's versions per batch: the updates emitted and the stale versions dropped (an ordered
# store), and what observe mode or an append-only ordered store says of them.
VERSION_SERIES = (("updates", "updates"), ("stale versions", "stale_version"), ("would update", "would_update"),
                  ("would update under changelog", "changelog_would_update"))


def _versions_section(labels: Sequence[str], columns: Sequence[Mapping[str, Any]]) -> str:
    series = {label: [c["counts"][name] for c in columns] for label, name in VERSION_SERIES}
    series = {label: values for label, values in series.items() if any(values)}
    if not series:
        return ""  # no changelog and no ordered store in the range
    return _section("Versions, per batch", charts.lines(
        "versions", labels, series, "No versions.",
        caption="Updates emitted and stale versions dropped by each batch (an ordered store's older "
                "versions arriving after newer ones)"))


def _section(title: str, body: str) -> str:
    return f"<h2>{escaped(title)}</h2>{body}"


def _header(figures: Mapping[str, Any], batches: Sequence[Mapping[str, Any]]) -> str:
    log, totals = figures["log"], figures["totals"]
    modes = figures["settings"]["modes_in_range"]
    mode = ", ".join(f"{name} ({n} batches)" for name, n in modes.items()) if modes else figures["settings"]["mode"]
    rows = [("batches", log["batches"]), ("input lines", totals["input_lines"]),
            ("output rows", totals["output_rows"]),
            ("duplicates dropped", totals["in_batch_duplicates"] + totals["cross_batch_duplicates"]),
            ("duplicates observed (would drop)", totals["would_drop_in_batch"] + totals["would_drop_cross_batch"]),
            *([("stale versions dropped (or observed)", totals["stale_version"])] if totals["stale_version"] else []),
            ("quarantined lines", totals["malformed"] - totals["inputs_excluded"]),
            ("excluded inputs (whole objects)", totals["inputs_excluded"])]
    extra = "".join(f"<p class=sub>Retracted (left out of every figure): {escaped(', '.join(log['retracted_batches']))}"
                    "</p>" for _ in [0] if log["retracted_batches"])
    unreadable = figures["read"]["unreadable_files"]
    if unreadable:
        extra += (f'<p class="verdict warn">{len(unreadable)} committed audit file(s) could not be read; their '
                  "duplicates are missing from the sources and producers below. Run <code>eventdedup fsck</code>."
                  "</p><ul>" + "".join(f"<li>{escaped(u)}</li>" for u in unreadable[:20]) + "</ul>")
    return (f"<h1>eventdedup report</h1><p class=sub>Commits made from {escaped(figures['range']['since'])} to "
            f"{escaped(figures['range']['until'])}: {log['commits_in_range']} (log at version {log['head_version']}); "
            f"mode <b>{escaped(mode)}</b>, window {figures['settings']['window_hours']} h.</p>{extra}"
            + _table(("", "in range"), [(name, f"{value:,}") for name, value in rows]) + _modes(batches))


def _modes(batches: Sequence[Mapping[str, Any]]) -> str:
    """Each batch's mode (its commit's `change.mode`): runs of batches, in commit order, that ran
    under one mode, by their first and last batch."""
    runs: list[list[Any]] = []
    for b in batches:
        if runs and runs[-1][0] == b["mode"]:
            runs[-1][2] = b["batch_id"]
            runs[-1][3] += 1
        else:
            runs.append([b["mode"], b["batch_id"], b["batch_id"], 1])
    return ("<p class=sub>Each batch's mode, in commit order:</p>"
            + _table(("mode", "first batch", "last batch", "batches"), [(m, a, z, f"{n:,}") for m, a, z, n in runs])
            if runs else "")


def _what_became_of_them(totals: Mapping[str, int]) -> str:
    rows = [(name.replace("_", " "), f"{totals[name]:,}") for name in
            ("in_batch_duplicates", "cross_batch_duplicates", "cross_hour_duplicates", "renamed", "kept_synthetic",
             "updates", "stale_dropped", "changelog_would_update", "would_drop_in_batch", "would_drop_cross_batch",
             "would_drop_stale", "would_rename", "would_keep", "would_update")
            if totals.get(name)]
    return _table(("what became of them", "copies"), rows) if rows else ""


def _lag_section(lag: Mapping[str, Any]) -> str:
    warn = " warn" if "too short" in lag["verdict"] else ""
    percentiles = [(f"p{p}", "" if v is None else duration_text(v)) for p, v in lag["percentiles_seconds"].items()]
    beyond = [(f"beyond {name.replace('_', ' ')}", f"{v['copies']:,} ({v['share']:.1%})")
              for name, v in lag["beyond"].items()]
    body = (f'<p class="verdict{warn}">{escaped(lag["verdict"])}</p>'
            + charts.histogram("copy_lag", [(b["label"], b["copies"]) for b in lag["histogram"]], "No copies.",
                               caption="Copies by how long after their original's batch they arrived")
            + _table(("copies", f"{lag['copies']:,}"), percentiles + beyond
                     + ([("copies whose original's batch could not be timed", f"{lag['unknown_holder']:,}")]
                        if lag["unknown_holder"] else [])))
    return _section("Copy lag: how long after its original each copy arrived", body)


def _sources_section(figures: Mapping[str, Any]) -> str:
    producer_field = figures["settings"]["producer_field"]
    return _section("Where duplicates come from", _top_table("Input source", figures["top_sources"])
                    + charts.horizontal_bars("sources", [(t["name"] or "(top level)", t["duplicates"])
                                                         for t in figures["top_sources"]], "No duplicates.",
                                             caption="Duplicates by input source (folder), most first")
                    + (charts.horizontal_bars("producers", [(t["name"], t["duplicates"])
                                                            for t in figures["top_producers"]], "No duplicates.",
                                              caption=f"Duplicates by producer ({producer_field}), most first")
                       + _top_table(producer_field, figures["top_producers"])
                       if producer_field else
                       '<p class="sub">Set [report] producer_field to rank producers by a field of the event.</p>'))


def _top_table(title: str, top: Sequence[Mapping[str, Any]]) -> str:
    return _table((title, "duplicates", "share"), [(t["name"] or "(top level)", f"{t['duplicates']:,}",
                                                    f"{t['share']:.1%}") for t in top]) if top else ""


def _health_section(health: Mapping[str, Any], labels: Sequence[str], columns: Sequence[Mapping[str, Any]]) -> str:
    stages = [(name.replace("_", " "), duration_text(v["median"]), duration_text(v["max"]))
              for name, v in health["seconds"].items()]
    written = health["cache_written_by_day"]
    ingestion = health.get("ingestion")
    waiting = ""
    if ingestion:
        oldest = ingestion["oldest_unconsumed"]
        waiting = (f"<p>Ingestion: {ingestion['unconsumed']} landing object(s) of the last "
                   f"{ingestion['lookback_hours']} h wait for a batch"
                   + (f", the oldest {escaped(str(oldest))}" if oldest else "")
                   + f"; the ingestion ledger holds {ingestion['ledger_entries']:,} entries.</p>")
    return _section("Pipeline health", (
        charts.lines("latency", labels, {"behind the clock (s)": [c["seconds"]["latency"] for c in columns]},
                     "No batches.", caption="Seconds from each batch's as_of to its commit", whole=False)
        + _table(("stage", "median", "max"), stages) + waiting
        + charts.stacked_bars("cache_written", list(written), {"cache bytes written": [d["bytes"] for d in
                                                                                       written.values()]},
                              "No cache written.", caption="Cache bytes written per day of commit")
        + charts.horizontal_bars("live_cache", list(health["live_cache_objects_by_day"].items()),
                                 "No live cache objects.",
                                 caption="Live cache objects by the day of the hour they hold")))


def _columns_section(columns: Sequence[Mapping[str, Any]]) -> str:
    """The declared columns ([table.columns]): how often each value did not fit, and how often null."""
    if not columns:
        return ""
    rows = [(c["name"], c["type"], f"{c['output_rows']:,}", f"{c['mismatched']:,}", _percent(c["mismatch_rate"]),
             f"{c['nulls']:,}", _percent(c["null_rate"])) for c in columns]
    return _section("Declared columns", _table(("column", "type", "output rows", "mismatched", "mismatch rate",
                                                "null", "null rate"), rows))


def _percent(rate: float | None) -> str:
    return "-" if rate is None else f"{rate * 100:.2f}%"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{escaped(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escaped(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"
