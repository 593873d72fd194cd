"""`make demo`: the three planted demo batches through the real Airflow DAG with dag.test().

Airflow on SQLite in .demo/airflow, the embedded S3 server on loopback (reached through the
aws_default connection), Spark in local mode through SparkSubmitOperator. Each batch is a manual
run with params batch_id and input_prefix. The committed counts are compared with the sample
generator's ledger of what it planted.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
HOME = PROJECT / ".demo" / "airflow"


def prepare_airflow() -> None:
    HOME.mkdir(parents=True, exist_ok=True)
    os.environ.update({
        "AIRFLOW_HOME": str(HOME), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{HOME}/airflow.db",
        "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT / "dags"), "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT / "plugins"),
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING", "EVENTDEDUP_TASK_RETRIES": "0", "EVENTDEDUP_WAIT_RETRIES": "0",
        "EVENTDEDUP_START_DATE": "2026-11-01T00:00:00+00:00",
        "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
    })
    for folder in ("plugins", "dags"):
        sys.path.insert(0, str(PROJECT / folder))
    done = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"airflow db migrate failed:\n{done.stderr[-3000:]}")


def main() -> int:
    prepare_airflow()
    from eventdedup.ops.status import format_batch_table
    from eventdedup.s3store import S3Store
    from eventdedup_dev.local_s3 import LOCAL_CREDENTIALS, LocalS3Process, use_local_credentials
    from eventdedup_dev.planted_demo import DEMO_BUCKET, committed_rows, demo_config, planted_batches

    use_local_credentials()
    now = datetime.now(timezone.utc)
    with LocalS3Process() as server:
        server.client().create_bucket(Bucket=DEMO_BUCKET)
        os.environ["AIRFLOW_CONN_AWS_DEFAULT"] = json.dumps({
            "conn_type": "aws", "login": LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            "password": LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            "extra": {"endpoint_url": server.endpoint_url, "region_name": "us-east-1"}})
        os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps({"conn_type": "spark", "host": "local[2]"})
        config_file = PROJECT / ".demo" / "eventdedup.toml"
        config_file.write_text(f'[s3]\nbucket = "{DEMO_BUCKET}"\n[dedup]\nbuckets = 8\n[spark]\npartitions = 8\n')
        os.environ["EVENTDEDUP_CONFIG"] = str(config_file)
        print(f"embedded S3 server on {server.endpoint_url}, bucket {DEMO_BUCKET}; Airflow home {HOME}", flush=True)

        from airflow.dag_processing.dagbag import DagBag

        dag = DagBag(dag_folder=str(PROJECT / "dags" / "eventdedup_pipeline.py")).get_dag("eventdedup_pipeline")
        store = S3Store(server.client(), DEMO_BUCKET)
        config = demo_config(server.endpoint_url)
        batches = planted_batches(now)
        for batch in batches:
            for name, body in batch.objects.items():
                store.put_bytes(f"landing/{batch.name}/{name}", body)
            run = dag.test(run_conf={"batch_id": batch.name, "input_prefix": f"landing/{batch.name}/"})
            states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
            print(f"dag run {run.run_id}: {states}", flush=True)
            if set(states.values()) != {"success"}:
                print(f"batch {batch.name} failed in Airflow; see the task logs above")
                return 1
        rows, mismatches = committed_rows(store, config, batches)
        table_line, table_problem = delta_table_summary(store, config)
        report_line = write_report(store, config)
    print(format_batch_table(rows))
    for problem in mismatches + table_problem:
        print(f"MISMATCH: {problem}")
    print("all counts match the planted duplicates" if not mismatches else "counts do NOT match")
    print(report_line)
    print(table_line)  # last: the output as readers of the table see it
    mismatches += table_problem
    return 0 if not mismatches else 1


def write_report(store, config) -> str:  # type: ignore[no-untyped-def]
    """The demo's report (every commit it made), as `eventdedup report` writes it: .demo/report.html."""
    from datetime import timedelta

    from eventdedup.report.build import build_report

    report = build_report(store, config, datetime(2000, 1, 1, tzinfo=timezone.utc),
                          datetime.now(timezone.utc) + timedelta(days=1))
    page = PROJECT / ".demo" / "report.html"
    page.write_text(report.html, encoding="utf-8")
    figures = report.figures
    return (f"report {page.relative_to(PROJECT)}: {figures['log']['batches']} batches, "
            f"{figures['copy_lag']['copies']} copies; {figures['copy_lag']['verdict']}")


def delta_table_summary(store, config) -> tuple[str, list[str]]:  # type: ignore[no-untyped-def]
    """The output's Delta table read with deltalake: its version and rows, against the committed view's."""
    from deltalake import DeltaTable

    from eventdedup.commit.view import committed_objects
    from eventdedup.delta.projection import APP_ID
    from eventdedup.delta.storage import storage_options, table_location
    from eventdedup.layout import Layout

    table = DeltaTable(table_location(store, config), storage_options=storage_options(store, config.s3))
    rows = table.count()
    committed = sum(obj.rows for obj in committed_objects(store, Layout(config.layout), "data"))
    line = (f"Delta table {table_location(store, config)}: version {table.version()}, {rows} rows (read with "
            f"deltalake), reflecting log version {table.transaction_version(APP_ID)}")
    return line, [] if rows == committed else [f"the Delta table holds {rows} rows, the committed view {committed}"]


if __name__ == "__main__":
    sys.exit(main())
