"""Every DAG file parses fast, with no network connection attempted, no cycles, tags and retries set."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import PROJECT

# Runs in a fresh interpreter: Airflow is imported first (its own start-up is not the DAG's
# cost), then every socket connect raises, then the DAG file is parsed and timed.
PROBE = r"""
import json, socket, sys, time
import airflow.sdk  # noqa: F401
from airflow.dag_processing.dagbag import DagBag
attempts = []
def refuse(self, address, *a, **k):
    attempts.append(repr(address))
    raise OSError("network access during DAG parsing")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
started = time.perf_counter()
bag = DagBag(dag_folder=sys.argv[1])
seconds = time.perf_counter() - started
dags = {}
for dag_id, dag in bag.dags.items():
    dag.topological_sort()  # raises on a cycle
    dags[dag_id] = {"tags": sorted(dag.tags), "max_active_runs": dag.max_active_runs,
                    "retries": {t.task_id: t.retries for t in dag.tasks}}
print(json.dumps({"seconds": seconds, "errors": {k: str(v) for k, v in bag.import_errors.items()},
                  "connects": attempts, "dags": dags}))
"""


@pytest.mark.parametrize("dag_file, dag_id", [("eventdedup_pipeline.py", "eventdedup_pipeline"),
                                              ("eventdedup_maintenance.py", "eventdedup_maintenance")])
def test_dag_file_parses_under_two_seconds_without_network(airflow_db, dag_file, dag_id) -> None:
    import os

    env = {k: v for k, v in os.environ.items() if k != "EVENTDEDUP_TASK_RETRIES"}  # the shipped defaults
    done = subprocess.run([sys.executable, "-c", PROBE, str(PROJECT / "dags" / dag_file)], capture_output=True,
                          text=True, timeout=120, env=env, cwd=PROJECT)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["errors"] == {} and result["connects"] == []
    assert result["seconds"] < 2.0, result["seconds"]
    dag = result["dags"][dag_id]
    assert "eventdedup" in dag["tags"] and dag["max_active_runs"] == 1
    assert dag["retries"] and all(retries >= 1 for retries in dag["retries"].values()), dag["retries"]
