"""The eventdedup report in Airflow's UI: a "Dedup report" entry in the navigation that shows the
maintenance DAG's latest daily report (eventdedup.report), served from the store by a small FastAPI
app Airflow's API server mounts at /eventdedup.

Only users Airflow lets read the eventdedup_maintenance DAG see it: the app asks Airflow's own auth
manager (the UI's session cookie or a bearer token). Nothing here opens a connection when Airflow
loads the plugin; each request reads one object.
"""
from __future__ import annotations

import re
from html import escape
from typing import Any

from airflow.api_fastapi.core_api.security import requires_access_dag
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import HTMLResponse, Response

URL_PREFIX = "/eventdedup"
REPORT_DAG_ID = "eventdedup_maintenance"
# The latest report, a day's, or a range's, as the maintenance DAG names them (eventdedup.report.report_name).
_REPORT_NAME = re.compile(r"(latest|\d{4}-\d{2}-\d{2}|\d{8}T\d{6}Z-\d{8}T\d{6}Z)\.(html|json)", re.ASCII)
_MEDIA_TYPES = {"html": "text/html; charset=utf-8", "json": "application/json"}
# The page is data, not an app: no request leaves it, nothing it holds can reach Airflow's origin
# (a sandbox without same-origin), and browsers take its type as sent.
_HEADERS = {"Content-Security-Policy": "sandbox allow-scripts; default-src 'none'; style-src 'unsafe-inline'; "
                                       "script-src 'unsafe-inline'; img-src data:",
            "X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}


def report_app() -> FastAPI:
    # No /docs or /openapi.json: every route is behind the app's access check, and those are not routes.
    app = FastAPI(title="eventdedup reports", docs_url=None, redoc_url=None, openapi_url=None,
                  dependencies=[Depends(requires_access_dag("GET", param_dag_id=REPORT_DAG_ID))])

    @app.get("/reports/", response_class=HTMLResponse)
    def report_index() -> HTMLResponse:
        """Every report on the store: the latest, then the others, newest first (only names a report
        can have: anything else under the prefix is not listed)."""
        found = sorted((n for n in _report_names() if _REPORT_NAME.fullmatch(n) and n.endswith(".html")
                        and n != "latest.html"), key=_range_start, reverse=True)
        links = "".join(f'<li><a href="{escape(name)}">{escape(name[:-5])}</a></li>'
                        for name in ["latest.html", *found])
        return HTMLResponse(f"<!doctype html><title>eventdedup reports</title><h1>eventdedup reports</h1><ul>{links}"
                            "</ul>", headers=_HEADERS)

    @app.get("/reports/{name}")
    def report(name: str) -> Response:
        matched = _REPORT_NAME.fullmatch(name)
        if matched is None:
            raise HTTPException(404, "not a report's name (latest.html, YYYY-MM-DD.html, a range's, or .json)")
        body = _read_report(name)
        if body is None:
            raise HTTPException(404, f"no report {name} yet: the eventdedup_maintenance DAG writes one a day")
        return Response(body, media_type=_MEDIA_TYPES[matched.group(2)], headers=_HEADERS)

    return app


def _range_start(name: str) -> str:
    """A report name's start, sortable: a day's 2026-11-25 is 20261125T000000Z."""
    stem = name.split(".")[0]
    return f"{stem.replace('-', '')}T000000Z" if len(stem) == 10 else stem.split("-")[0]


def _store_and_prefix() -> tuple[Any, str]:
    from eventdedup_airflow import load_pipeline_config, s3_store

    config = load_pipeline_config()
    return s3_store(config), config.layout.reports_prefix


def _read_report(name: str) -> bytes | None:
    store, prefix = _store_and_prefix()
    data: bytes | None = store.get_bytes_or_none(f"{prefix}{name}")
    return data


def _report_names() -> list[str]:
    store, prefix = _store_and_prefix()
    return [info.key[len(prefix):] for info in store.list(prefix)]


class EventDedupReportPlugin(AirflowPlugin):
    name = "eventdedup_report"
    fastapi_apps = [{"app": report_app(), "url_prefix": URL_PREFIX, "name": "eventdedup reports"}]
    external_views = [{"name": "Dedup report", "href": f"{URL_PREFIX}/reports/latest.html", "destination": "nav",
                       "category": "browse", "url_route": "eventdedup-report"}]
