"""Stream files that cannot run, as this file's import error in Airflow's UI ("DAG Import Errors").

The DAG files (eventdedup_pipeline.py, eventdedup_maintenance.py, eventdedup_operations.py) build the
DAGs of every stream that can run and leave the others out; this file builds no DAG and raises what
kept them out: a configuration file the loader refuses, a file whose name is no stream's, two streams
that would write the same objects (both named, with the prefixes), a schedule Airflow refuses.
Airflow takes every DAG of a file that raises away, so the error is raised here, in a file of its
own, and no other stream's DAGs go with it. Fixed, the error clears at the next parse.
"""
from __future__ import annotations

from eventdedup_streams import StreamConfigurationError, deployment

_deployment = deployment()
if _deployment.errors:
    raise StreamConfigurationError(
        f"{len(_deployment.errors)} problem(s) in {_deployment.source}; the streams named below get no DAGs "
        "until fixed, every other stream runs:\n" + "\n".join(f"- {error}" for error in _deployment.errors))
