"""Screenshot of the pipeline DAG's grid view after a successful run, for the README.

Starts `make airflow`'s standalone stack (no login, port 8089), lands a demo batch, triggers a
manual run, waits for it to succeed, then photographs the grid with Debian's Chromium:
    chromium --headless --no-sandbox --disable-gpu --screenshot=...

    python scripts/grid_screenshot.py [--out docs/images/airflow-grid.png]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
PORT = 8089


def airflow_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "airflow", *args], env=env, capture_output=True, text=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(PROJECT / "docs" / "images" / "airflow-grid.png"))
    args = parser.parse_args()
    chromium = shutil.which("chromium") or sys.exit("Debian's chromium is needed: apt-get install chromium")
    stack = subprocess.Popen([sys.executable, str(PROJECT / "scripts" / "airflow_standalone.py"), "--no-login",
                              "--port", str(PORT)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        lines = []
        while not any(line.startswith("S3 server:") for line in lines):
            line = stack.stdout.readline()  # type: ignore[union-attr]
            if not line:
                sys.exit("the standalone stack stopped before it was ready")
            lines.append(line)
            print(line, end="")
        endpoint = re.search(r"S3 server: (\S+),", "".join(lines)).group(1)  # type: ignore[union-attr]
        env = standalone_env(endpoint)
        land_demo_batch(endpoint)
        run_id = trigger_when_parsed(env)
        wait_for_success(env, run_id)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--window-size=1600,900", "--virtual-time-budget=25000", f"--screenshot={args.out}",
                        f"http://127.0.0.1:{PORT}/dags/eventdedup_pipeline"], check=True, timeout=180,
                       stderr=subprocess.DEVNULL)  # headless Chromium complains about the missing D-Bus
        print(f"grid view of run {run_id} saved to {args.out}")
        return 0
    finally:
        os.killpg(stack.pid, signal.SIGINT)
        try:
            stack.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(stack.pid, signal.SIGKILL)


def standalone_env(endpoint: str) -> dict[str, str]:
    sys.path.insert(0, str(PROJECT / "scripts"))
    from airflow_standalone import airflow_env

    from eventdedup_dev.local_s3 import LOCAL_CREDENTIALS

    return airflow_env(PORT, True, endpoint, LOCAL_CREDENTIALS)


def land_demo_batch(endpoint: str) -> None:
    from eventdedup.s3store import S3Store
    from eventdedup_dev.local_s3 import LOCAL_CREDENTIALS
    from eventdedup_dev.planted_demo import planted_batches

    os.environ.update(LOCAL_CREDENTIALS)
    import boto3

    store = S3Store(boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1"), "eventdedup")
    batch = planted_batches(datetime.now(timezone.utc))[0]
    for name, body in batch.objects.items():
        store.put_bytes(f"landing/screenshot/{name}", body)


def trigger_when_parsed(env: dict[str, str]) -> str:
    batch = f"screenshot-{int(time.time())}"
    conf = json.dumps({"batch_id": batch, "input_prefix": "landing/screenshot/"})
    for _ in range(60):
        if airflow_cli(env, "dags", "unpause", "eventdedup_pipeline").returncode == 0:
            if airflow_cli(env, "dags", "trigger", "eventdedup_pipeline", "--run-id", batch, "--conf", conf).returncode == 0:
                return batch
        time.sleep(5)
    sys.exit("the DAG never appeared in Airflow")


def wait_for_success(env: dict[str, str], run_id: str) -> None:
    for _ in range(120):
        done = airflow_cli(env, "dags", "list-runs", "eventdedup_pipeline", "-o", "json")
        listed = [line for line in done.stdout.splitlines() if line.startswith("[{")]  # skip warnings
        runs = {r["run_id"]: r["state"] for r in json.loads(listed[-1])} if listed else {}
        if runs.get(run_id) == "success":
            return
        if runs.get(run_id) == "failed":
            sys.exit(f"run {run_id} failed; see .demo/standalone/standalone.log and the task logs")
        time.sleep(5)
    sys.exit(f"run {run_id} did not finish")


if __name__ == "__main__":
    sys.exit(main())
