"""The eventdedup report in Airflow's UI: a "Dedup report" entry in the navigation that shows the
maintenance DAG's latest daily report (eventdedup.report), served from the store by a small FastAPI
app Airflow's API server mounts at /eventdedup.

With one configuration, /eventdedup/reports/ lists its reports; with a folder of streams
(plugins/eventdedup_streams.py), /eventdedup/reports/ lists the streams and
/eventdedup/reports/<stream>/ each stream's reports, read from the stream's own reports prefix. A
stream's reports are shown only to users Airflow lets read that stream's maintenance DAG (the
single configuration's: eventdedup_maintenance): the app asks Airflow's own auth manager (the UI's
session cookie or a bearer token). Nothing here opens a connection when Airflow loads the plugin;
each request reads one object or one listing.
"""
from __future__ import annotations

import os
import re
from html import escape
from typing import TYPE_CHECKING, Any

from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from airflow.plugins_manager import AirflowPlugin
from eventdedup_airflow import ONE_STREAM, StreamTarget
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, Response

if TYPE_CHECKING:
    from eventdedup_streams import DeployedStream

URL_PREFIX = "/eventdedup"
REPORT_DAG_ID = "eventdedup_maintenance"
_STREAM = re.compile(r"[a-z0-9][a-z0-9_-]{0,47}", re.ASCII)  # eventdedup.streams' names
# The latest report, a day's, or a range's, as the maintenance DAG names them (eventdedup.report.report_name).
_REPORT_NAME = re.compile(r"(latest|\d{4}-\d{2}-\d{2}|\d{8}T\d{6}Z-\d{8}T\d{6}Z)\.(html|json)", re.ASCII)
_MEDIA_TYPES = {"html": "text/html; charset=utf-8", "json": "application/json"}
# The page is data, not an app: no request leaves it, nothing it holds can reach Airflow's origin
# (a sandbox without same-origin), and browsers take its type as sent.
_HEADERS = {"Content-Security-Policy": "sandbox allow-scripts; default-src 'none'; style-src 'unsafe-inline'; "
                                       "script-src 'unsafe-inline'; img-src data:",
            "X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}


def report_app() -> FastAPI:
    # No /docs or /openapi.json: every route is behind an access check, and those are not routes.
    app = FastAPI(title="eventdedup reports", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/reports/", response_class=HTMLResponse)
    def report_index(request: Request, user: GetUserDep) -> HTMLResponse:
        """The one configuration's reports, or (a folder of streams) the streams this user may read."""
        streams = _deployed_streams()
        if streams is None:
            requires_access_dag("GET", param_dag_id=REPORT_DAG_ID)(request, user)
            return _report_list("eventdedup reports", ONE_STREAM)
        readable = [name for name, stream in streams.items() if _may_read(request, user, stream.dag_id("maintenance"))]
        links = "".join(f'<li><a href="{escape(name)}/">{escape(name)}</a></li>' for name in readable)
        return HTMLResponse(f"<!doctype html><title>eventdedup reports</title><h1>eventdedup reports by stream</h1>"
                            f"<ul>{links}</ul>", headers=_HEADERS)

    @app.get("/reports/{name}", dependencies=[Depends(requires_access_dag("GET", param_dag_id=REPORT_DAG_ID))])
    def report(name: str) -> Response:
        if _deployed_streams() is not None:
            raise HTTPException(404, "with a folder of streams, each stream's reports are under /eventdedup/reports/"
                                     "<stream>/")
        return _report(ONE_STREAM, name, REPORT_DAG_ID)

    @app.get("/reports/{stream}/", response_class=HTMLResponse)
    def stream_report_index(stream: str, request: Request, user: GetUserDep) -> HTMLResponse:
        return _report_list(f"eventdedup reports: {stream}", _stream_access(stream, request, user).target)

    @app.get("/reports/{stream}/{name}")
    def stream_report(stream: str, name: str, request: Request, user: GetUserDep) -> Response:
        deployed = _stream_access(stream, request, user)
        return _report(deployed.target, name, deployed.dag_id("maintenance"))

    return app


def _report_list(title: str, target: StreamTarget) -> HTMLResponse:
    """Every report on the stream's store: the latest, then the others, newest first (only names a
    report can have: anything else under the prefix is not listed)."""
    found = sorted((n for n in _report_names(target) if _REPORT_NAME.fullmatch(n) and n.endswith(".html")
                    and n != "latest.html"), key=_range_start, reverse=True)
    links = "".join(f'<li><a href="{escape(name)}">{escape(name[:-5])}</a></li>' for name in ["latest.html", *found])
    return HTMLResponse(f"<!doctype html><title>{escape(title)}</title><h1>{escape(title)}</h1><ul>{links}</ul>",
                        headers=_HEADERS)


def _report(target: StreamTarget, name: str, dag_id: str) -> Response:
    matched = _REPORT_NAME.fullmatch(name)
    if matched is None:
        raise HTTPException(404, "not a report's name (latest.html, YYYY-MM-DD.html, a range's, or .json)")
    body = _read_report(target, name)
    if body is None:
        raise HTTPException(404, f"no report {name} yet: the {dag_id} DAG writes one a day")
    return Response(body, media_type=_MEDIA_TYPES[matched.group(2)], headers=_HEADERS)


def _deployed_streams() -> dict[str, DeployedStream] | None:
    """Each stream that runs, by name; None for the one-configuration deployment. Read at each
    request: a stream file dropped in the folder is listed without a restart."""
    from eventdedup_streams import deployment, streams_folder

    if streams_folder(os.environ) is None:
        return None
    return {str(stream.name): stream for stream in deployment().streams}


def _stream_access(stream: str, request: Request, user: Any) -> DeployedStream:
    """The stream, once Airflow lets this user read its maintenance DAG; 404 for no stream."""
    streams = _deployed_streams() or {}
    if not _STREAM.fullmatch(stream) or stream not in streams:
        raise HTTPException(404, f"no stream {stream!r} runs here")
    requires_access_dag("GET", param_dag_id=streams[stream].dag_id("maintenance"))(request, user)
    return streams[stream]


def _may_read(request: Request, user: Any, dag_id: str) -> bool:
    try:
        requires_access_dag("GET", param_dag_id=dag_id)(request, user)
    except HTTPException:
        return False
    return True


def _range_start(name: str) -> str:
    """A report name's start, sortable: a day's 2026-11-25 is 20261125T000000Z."""
    stem = name.split(".")[0]
    return f"{stem.replace('-', '')}T000000Z" if len(stem) == 10 else stem.split("-")[0]


def _store_and_prefix(target: StreamTarget) -> tuple[Any, str]:
    from eventdedup_airflow import load_pipeline_config, s3_store

    config = load_pipeline_config(target)
    return s3_store(config), config.layout.reports_prefix


def _read_report(target: StreamTarget, name: str) -> bytes | None:
    store, prefix = _store_and_prefix(target)
    data: bytes | None = store.get_bytes_or_none(f"{prefix}{name}")
    return data


def _report_names(target: StreamTarget) -> list[str]:
    store, prefix = _store_and_prefix(target)
    return [info.key[len(prefix):] for info in store.list(prefix)]


def _navigation_href() -> str:
    """The one configuration's latest report, or the list of streams."""
    from eventdedup_streams import streams_folder

    return f"{URL_PREFIX}/reports/latest.html" if streams_folder(os.environ) is None else f"{URL_PREFIX}/reports/"


class EventDedupReportPlugin(AirflowPlugin):
    name = "eventdedup_report"
    fastapi_apps = [{"app": report_app(), "url_prefix": URL_PREFIX, "name": "eventdedup reports"}]
    external_views = [{"name": "Dedup report", "href": _navigation_href(), "destination": "nav",
                       "category": "browse", "url_route": "eventdedup-report"}]
