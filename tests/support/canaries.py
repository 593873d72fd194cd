"""Recognisable credentials the tests search for where they must never appear (command lines,
logs, written objects). The tests' S3 store knows them as identities of its own, beside the
local credentials: SeaweedFS, unlike moto, refuses a request signed with a key it does not know."""
from __future__ import annotations

# The Airflow S3 connection's (tests/dags): searched on every process's command line and in the
# task logs while the DAG runs.
DAG_ACCESS_KEY = "AKIAEVENTDEDUPDAGCANARY"
DAG_SECRET_KEY = "canary-secret/dag-run+Vb71Qx"
# The CLI's environment (tests/integration/test_secrets.py).
CLI_ACCESS_KEY = "AKIAEVENTDEDUPCANARY7"
CLI_SECRET_KEY = "canary-secret/eventdedup+Zq81xKw0pL3"

S3_IDENTITIES = {DAG_ACCESS_KEY: DAG_SECRET_KEY, CLI_ACCESS_KEY: CLI_SECRET_KEY}
