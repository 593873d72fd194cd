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


def test_with_a_folder_of_streams_each_streams_reports_are_listed_and_served_from_its_own_prefix(
        airflow_db, airflow_connections, s3_server, bucket, tmp_path, monkeypatch) -> None:
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from fastapi.testclient import TestClient

    store = S3Store(s3_server.client(), bucket)
    folder = tmp_path / "streams"
    folder.mkdir()
    for name in ("web", "mobile"):
        (folder / f"{name}.toml").write_text(
            f'[s3]\nbucket = "{bucket}"\n[layout]\n' + "".join(
                f'{p}_prefix = "{name}/{p}/"\n' for p in ("landing", "output", "cache", "staging", "audit", "quarantine",
                                                          "commit_log", "state", "manifest", "alerts", "reports")))
        store.put_bytes(f"{name}/reports/latest.html", f"<html>{name}'s latest</html>".encode())
        store.put_bytes(f"{name}/reports/2026-11-25.html", f"<html>{name}'s 25th</html>".encode())
    monkeypatch.setenv("EVENTDEDUP_STREAMS_DIR", str(folder))
    client = TestClient(create_app())
    assert client.get("/eventdedup/reports/web/latest.html").status_code in (401, 403)  # Airflow's login first
    manager = get_auth_manager()
    client.cookies.set("_token", manager.generate_jwt(manager.deserialize_user({"sub": "operator", "role": "admin"})))

    index = client.get("/eventdedup/reports/")
    assert index.status_code == 200 and "by stream" in index.text
    assert [link.split('"')[0] for link in index.text.split('href="')[1:]] == ["mobile/", "web/"]
    assert client.get("/eventdedup/reports/web/latest.html").text == "<html>web's latest</html>"
    assert client.get("/eventdedup/reports/mobile/2026-11-25.html").text == "<html>mobile's 25th</html>"
    mobile = client.get("/eventdedup/reports/mobile/")
    assert [link.split('"')[0] for link in mobile.text.split('href="')[1:]] == ["latest.html", "2026-11-25.html"]
    assert client.get("/eventdedup/reports/latest.html").status_code == 404  # the one configuration's path
    assert client.get("/eventdedup/reports/tablet/latest.html").status_code == 404
    assert client.get("/eventdedup/reports/web/..%2F..%2Fmobile%2Freports%2Flatest.html").status_code == 404
