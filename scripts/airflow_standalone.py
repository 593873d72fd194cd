"""`make airflow`: `airflow standalone` (SQLite) with the project's DAGs and plugins, plus the
embedded S3 server on loopback holding the streams' buckets. Prints the URL and login.

    python scripts/airflow_standalone.py [--port 8080] [--no-login]

Two demo streams run, each with its own DAGs, id and time fields, window, schedule, pool and bucket:
the folder .demo/standalone/streams/ (EVENTDEDUP_STREAMS_DIR), made from conf/demo-streams/ at the
first start. Drop another `<stream>.toml` there and its DAGs appear at the next parse (its bucket and
pool are made at the next start; `airflow pools set eventdedup_store_<stream> 1 ...` makes the pool now).

State lives in .demo/standalone (Airflow) and .demo/s3 (the S3 snapshot, restored next start).
--no-login makes every user an admin (for scripted screenshots; the server binds 127.0.0.1).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from eventdedup.streams import read_stream_folder
from eventdedup_dev.stack import STORE_POOL, first_start_date, store_pools

PROJECT = Path(__file__).resolve().parents[1]
HOME = PROJECT / ".demo" / "standalone"
STREAMS = HOME / "streams"
DEMO_STREAMS = PROJECT / "conf" / "demo-streams"


def airflow_env(port: int, no_login: bool, s3_endpoint: str, credentials: dict[str, str]) -> dict[str, str]:
    env = {
        "EVENTDEDUP_START_DATE": first_start_date(HOME), **os.environ, **credentials,
        "AIRFLOW_HOME": str(HOME), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{HOME}/airflow.db",
        "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT / "dags"), "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT / "plugins"),
        "AIRFLOW__API__HOST": "127.0.0.1", "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW_CONN_AWS_DEFAULT": json.dumps({
            "conn_type": "aws", "login": credentials["AWS_ACCESS_KEY_ID"],
            "password": credentials["AWS_SECRET_ACCESS_KEY"],
            "extra": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"}}),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "EVENTDEDUP_STREAMS_DIR": str(STREAMS), "EVENTDEDUP_STORE_POOL": STORE_POOL,
        "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    if no_login:
        env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"] = "True"
    return env


def create_buckets(client: object, env: dict[str, str]) -> list[str]:
    """Every stream's bucket on the embedded store (a stream file that cannot run is skipped: the UI shows why)."""
    buckets = sorted({stream.config.s3.bucket for stream in read_stream_folder(STREAMS, env).streams})
    existing = {b["Name"] for b in client.list_buckets()["Buckets"]}  # type: ignore[attr-defined]
    for bucket in sorted(set(buckets) - existing):
        client.create_bucket(Bucket=bucket)  # type: ignore[attr-defined]
    return buckets


def create_pools(env: dict[str, str]) -> None:
    """Airflow's database, then each stream's one-slot store pool (eventdedup_dev.stack.store_pools)."""
    pools = HOME / "pools.json"
    pools.write_text(json.dumps(store_pools(env)))
    for command in (["db", "migrate"], ["pools", "import", str(pools)]):
        done = subprocess.run([sys.executable, "-m", "airflow", *command], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"airflow {' '.join(command)} failed:\n{done.stderr[-3000:]}")


def wait_for_health(url: str, process: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"airflow standalone exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(2)
    sys.exit(f"Airflow did not become healthy at {url} within {timeout:.0f} s")


def login_text(no_login: bool) -> str:
    if no_login:
        return "no login needed (every user is admin; bound to 127.0.0.1)"
    passwords = HOME / "simple_auth_manager_passwords.json.generated"
    for _ in range(30):
        if passwords.exists():
            return f"user admin, password {json.loads(passwords.read_text()).get('admin')}"
        time.sleep(1)
    return f"user admin, password in {passwords}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--no-login", action="store_true")
    args = parser.parse_args()
    from eventdedup_dev.local_s3 import LOCAL_CREDENTIALS, LocalS3Process

    HOME.mkdir(parents=True, exist_ok=True)
    if not STREAMS.exists():
        shutil.copytree(DEMO_STREAMS, STREAMS)
    with LocalS3Process(data_dir=str(PROJECT / ".demo" / "s3")) as s3:
        env = airflow_env(args.port, args.no_login, s3.endpoint_url, LOCAL_CREDENTIALS)
        buckets = create_buckets(s3.client(), env)
        create_pools(env)
        process = subprocess.Popen([sys.executable, "-m", "airflow", "standalone"], env=env,
                                   stdout=open(HOME / "standalone.log", "ab"), stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{args.port}"
            wait_for_health(f"{url}/api/v2/monitor/health", process)
            print(f"Airflow UI: {url}  ({login_text(args.no_login)})", flush=True)
            print(f"S3 server: {s3.endpoint_url}, buckets {', '.join(buckets)}; streams: {STREAMS}; "
                  f"logs: {HOME / 'standalone.log'}; Ctrl-C stops", flush=True)
            return process.wait()
        except KeyboardInterrupt:
            return 0
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()


if __name__ == "__main__":
    sys.exit(main())
