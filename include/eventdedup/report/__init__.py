"""`eventdedup report`: what the pipeline did over a range of commits, for people (a self-contained
HTML page with charts) and for machines (the same figures as JSON). docs/report.md says how each
figure is computed and what a report reads.

- `collect`: what the store holds for the range, read by range and column, never whole;
- `figures`: every figure, computed from that alone (pure);
- `page` and `charts`: the HTML and its inline SVG;
- `build_report` / `publish_report`: the command's and the maintenance DAG's entry points.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from eventdedup.commit.state import CommittedState
from eventdedup.config import Config
from eventdedup.ops.status import ledger_lag
from eventdedup.report.collect import collect
from eventdedup.report.figures import report_figures
from eventdedup.report.page import render_page
from eventdedup.s3store import S3Store


@dataclass(frozen=True)
class Report:
    figures: dict[str, Any]

    @property
    def html(self) -> str:
        return render_page(self.figures)

    @property
    def json(self) -> bytes:
        return orjson.dumps(self.figures, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)


def build_report(store: S3Store, config: Config, since: datetime, until: datetime,
                 now: datetime | None = None) -> Report:
    """The report of the commits made in [since, until). `now`: also how many landing objects wait
    for a batch at that time (the ingestion lag), which a report of a past range leaves out."""
    def ingestion(state: CommittedState) -> dict[str, Any]:
        assert now is not None
        return ledger_lag(store, config, state, now)

    return Report(report_figures(collect(store, config, since, until, ingestion if now is not None else None),
                                 config))


def publish_report(store: S3Store, config: Config, report: Report, day: str) -> list[str]:
    """The report's page and JSON under the reports prefix, for `day` and as `latest` (what the
    Airflow plugin links). Written after the figures are whole: a reader sees one report or the other."""
    prefix = config.layout.reports_prefix
    written = []
    for name in (day, "latest"):
        store.put_bytes(f"{prefix}{name}.json", report.json, content_type="application/json")
        store.put_bytes(f"{prefix}{name}.html", report.html.encode(), content_type="text/html; charset=utf-8")
        written += [f"{prefix}{name}.json", f"{prefix}{name}.html"]
    return written
