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
heavy = sorted(m for m in ("pyspark", "eventdedup.job", "eventdedup.commit") if m in sys.modules)
print(json.dumps({"seconds": seconds, "errors": {k: str(v) for k, v in bag.import_errors.items()},
                  "connects": attempts, "dags": dags, "heavy_imports": heavy}))
"""


@pytest.mark.parametrize("dag_file, dag_id", [("eventdedup_pipeline.py", "eventdedup_pipeline"),
                                              ("eventdedup_maintenance.py", "eventdedup_maintenance"),
                                              ("eventdedup_operations.py", "eventdedup_populate"),
                                              ("eventdedup_operations.py", "eventdedup_retract"),
                                              ("eventdedup_operations.py", "eventdedup_reshard")])
def test_dag_file_parses_fast_without_network_or_heavy_imports(airflow_db, dag_file, dag_id) -> None:
    import os

    env = {k: v for k, v in os.environ.items()  # the shipped defaults
           if k not in ("EVENTDEDUP_TASK_RETRIES", "EVENTDEDUP_WAIT_RETRIES")}
    done = subprocess.run([sys.executable, "-c", PROBE, str(PROJECT / "dags" / dag_file)], capture_output=True,
                          text=True, timeout=120, env=env, cwd=PROJECT)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["errors"] == {} and result["connects"] == []
    # What makes parsing slow is work at module level: Spark or the library's job and commit code
    # imported outside a task body. That is checked exactly; the time (0.8 s alone on 2 cores) is
    # only bounded by a tenth of Airflow's own 30 s import timeout, so a loaded CI machine cannot
    # fail it by being slow.
    assert result["heavy_imports"] == []
    print(f"{dag_file} parsed in {result['seconds']:.2f} s")
    assert result["seconds"] < 3.0, result["seconds"]
    dag = result["dags"][dag_id]
    assert "eventdedup" in dag["tags"] and dag["max_active_runs"] == 1
    assert dag["retries"] and all(retries >= 1 for retries in dag["retries"].values()), dag["retries"]
