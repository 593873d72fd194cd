"""The report plugin as Airflow loads it: its UI link and its FastAPI app, which serves the store's
reports only to users Airflow's auth manager lets read the maintenance DAG."""
from __future__ import annotations

import pytest

from eventdedup.s3store import S3Store


@pytest.fixture
def report_client(airflow_db, airflow_connections, pipeline_config, s3_server, bucket):  # type: ignore[no-untyped-def]
    from airflow.api_fastapi.app import create_app
    from fastapi.testclient import TestClient

    store = S3Store(s3_server.client(), bucket)
    store.put_bytes("reports/2026-11-24.json", b"{}")  # a day's figures without its page: not listed
    store.put_bytes("reports/20261125T060000Z-20261125T070000Z.html", b"<html>an hour</html>")
    store.put_bytes('reports/<script>x.html', b"not a report's name: never listed, never served")
    store.put_bytes("reports/2026-11-23.html", b"<html>the 23rd</html>")
    store.put_bytes("reports/2026-11-25.html", b"<html>the 25th</html>")
    store.put_bytes("reports/latest.html", b"<html>the 25th</html>")
    store.put_bytes("reports/latest.json", b'{"range": {}}')
    # Airflow's own API server app: it mounts every plugin's FastAPI app under its prefix.
    return TestClient(create_app())


def test_airflow_loads_the_plugin_with_its_link_and_its_app(airflow_db) -> None:  # type: ignore[no-untyped-def]
    from airflow import plugins_manager

    names = [plugin.name for plugin in plugins_manager._get_plugins()[0]]
    assert "eventdedup_report" in names, plugins_manager.get_import_errors()
    views, _ = plugins_manager._get_ui_plugins()
    assert {"name": "Dedup report", "href": "/eventdedup/reports/latest.html", "destination": "nav",
            "category": "browse", "url_route": "eventdedup-report"} in views
    apps, _ = plugins_manager.get_fastapi_plugins()
    assert [app["url_prefix"] for app in apps if app["name"] == "eventdedup reports"] == ["/eventdedup"]


def test_the_report_is_refused_without_airflows_login(report_client) -> None:  # type: ignore[no-untyped-def]
    assert report_client.get("/eventdedup/reports/latest.html").status_code in (401, 403)


def test_a_logged_in_user_reads_the_latest_report_and_a_days(report_client) -> None:  # type: ignore[no-untyped-def]
    from airflow.api_fastapi.app import get_auth_manager

    # A token from Airflow's own auth manager (the simple one, where every user is an admin here),
    # sent as the UI sends it: its session cookie.
    manager = get_auth_manager()
    token = manager.generate_jwt(manager.deserialize_user({"sub": "operator", "role": "admin"}))
    report_client.cookies.set("_token", token)
    latest = report_client.get("/eventdedup/reports/latest.html")
    assert latest.status_code == 200, latest.text
    assert latest.text == "<html>the 25th</html>" and latest.headers["content-type"].startswith("text/html")
    # Served as data: sandboxed away from Airflow's origin, its type as sent.
    assert latest.headers["content-security-policy"].startswith("sandbox allow-scripts; default-src 'none'")
    assert latest.headers["x-content-type-options"] == "nosniff"
    assert report_client.get("/eventdedup/reports/latest.json").json() == {"range": {}}
    assert report_client.get("/eventdedup/reports/2026-11-24.html").status_code == 404
    assert report_client.get("/eventdedup/reports/2026-11-23.html").text == "<html>the 23rd</html>"
    assert report_client.get("/eventdedup/reports/..%2Fsecrets.html").status_code == 404
    assert report_client.get("/eventdedup/reports/latest.html%0A").status_code == 404
    assert report_client.get("/eventdedup/reports/20261125T060000Z-20261125T070000Z.html").text == "<html>an hour</html>"
    assert report_client.get("/eventdedup/openapi.json").status_code == 404
    index = report_client.get("/eventdedup/reports/")
    assert index.status_code == 200
    assert [link.split('"')[0] for link in index.text.split('href="')[1:]] == [
        "latest.html", "20261125T060000Z-20261125T070000Z.html", "2026-11-25.html", "2026-11-23.html"]
    assert "script" not in index.text
