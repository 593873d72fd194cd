"""Building and publishing a report: `eventdedup report`'s and the maintenance DAG's entry points."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
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
                 now: datetime | None = None, last: int | None = None) -> Report:
    """The report of the commits made in [since, until), or of the newest `last` commits. `now`:
    also how many landing objects wait for a batch at that time (the ingestion lag), which a report
    of a past range leaves out."""
    def ingestion(state: CommittedState) -> dict[str, Any]:
        assert now is not None
        return ledger_lag(store, config, state, now)

    return Report(report_figures(collect(store, config, since, until, ingestion if now is not None else None,
                                         last), config))


def _is_latest(latest: bytes | None, report: Report) -> bool:
    """Whether `report` ends no earlier than the latest one published (an unreadable latest: yes)."""
    try:
        until = datetime.fromisoformat(orjson.loads(latest or b"")["range"]["until"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return True
    return until <= datetime.fromisoformat(report.figures["range"]["until"])


def report_name(since: datetime, until: datetime) -> str:
    """A report's name under the reports prefix: its day for a whole UTC day (the daily run), else
    its range (an hourly schedule, a manual run), so no report overwrites another's."""
    since, until = since.astimezone(timezone.utc), until.astimezone(timezone.utc)
    if until - since == timedelta(days=1) and since == since.replace(hour=0, minute=0, second=0, microsecond=0):
        return f"{since:%Y-%m-%d}"
    return f"{since:%Y%m%dT%H%M%SZ}-{until:%Y%m%dT%H%M%SZ}"


def publish_report(store: S3Store, config: Config, report: Report, name: str) -> list[str]:
    """The report's page and JSON under the reports prefix as `name`, and as `latest` (what the
    Airflow plugin links) unless a report of a later range is already there (a rerun of an old
    day). Each object is whole when it appears; the page and the JSON are two objects."""
    prefix = config.layout.reports_prefix
    page, figures = report.html.encode(), report.json
    names = [name]
    if _is_latest(store.get_bytes_or_none(f"{prefix}latest.json"), report):
        names.append("latest")
    written = []
    for each in names:
        store.put_bytes(f"{prefix}{each}.json", figures, content_type="application/json")
        store.put_bytes(f"{prefix}{each}.html", page, content_type="text/html; charset=utf-8")
        written += [f"{prefix}{each}.json", f"{prefix}{each}.html"]
    return written
