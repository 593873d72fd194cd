"""`make airflow`: `airflow standalone` (SQLite) with the project's DAGs and plugins, plus the
embedded S3 server on loopback holding the bucket the DAGs use. Prints the URL and login.

    python scripts/airflow_standalone.py [--port 8080] [--no-login]

State lives in .demo/standalone (Airflow) and .demo/s3 (the S3 snapshot, restored next start).
--no-login makes every user an admin (for scripted screenshots; the server binds 127.0.0.1).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from eventdedup_dev.stack import first_start_date

PROJECT = Path(__file__).resolve().parents[1]
HOME = PROJECT / ".demo" / "standalone"
BUCKET = "eventdedup"


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
        "EVENTDEDUP_CONFIG": str(PROJECT / "conf" / "eventdedup.airflow.toml"),
        "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    if no_login:
        env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"] = "True"
    return env


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
    with LocalS3Process(data_dir=str(PROJECT / ".demo" / "s3")) as s3:
        if BUCKET not in [b["Name"] for b in s3.client().list_buckets()["Buckets"]]:
            s3.client().create_bucket(Bucket=BUCKET)
        env = airflow_env(args.port, args.no_login, s3.endpoint_url, LOCAL_CREDENTIALS)
        process = subprocess.Popen([sys.executable, "-m", "airflow", "standalone"], env=env,
                                   stdout=open(HOME / "standalone.log", "ab"), stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{args.port}"
            wait_for_health(f"{url}/api/v2/monitor/health", process)
            print(f"Airflow UI: {url}  ({login_text(args.no_login)})", flush=True)
            print(f"S3 server: {s3.endpoint_url}, bucket {BUCKET}; logs: {HOME / 'standalone.log'}; Ctrl-C stops",
                  flush=True)
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
