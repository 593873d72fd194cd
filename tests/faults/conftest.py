"""Shared set-up of the whole-batch fault tests: a bucket where b1 is committed and b2's input has
landed, the fault proxy, and the state a clean run of b2 commits."""
from __future__ import annotations

import itertools
from typing import Any

import pytest

from eventdedup.commit.ledger_reader import LedgerReader
from eventdedup.commit.log import load_committed_state
from eventdedup.config import Config
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.pipeline import run_batch
from eventdedup.s3store import S3Store, make_client
from eventdedup_dev.s3_fault_proxy import FaultProxy

from ..support.helpers import NOW, committed_rows, make_config, put_lines
from ..support.invariants import assert_table_is_the_view_at_its_version
from ..support.s3_faults import clone_bucket

_clones = itertools.count()
E = b'{"event_id":"%s","created_at":"2026-11-22T0%d:10:00Z","v":%d}'
B1 = [E % (b"a%d" % i, 3 + i % 2, 1) for i in range(12)]
# b2: cross-batch natural and synthetic duplicates, an in-batch duplicate, new ids, a bad line.
B2 = [E % (b"a%d" % i, 3 + i % 2, 1 if i < 10 else 2) for i in range(8, 20)] + [E % (b"a15", 4, 1), b"oops"]
B2_SELECTOR = InputSelector(input_prefix="landing/b2/")
SETTINGS: dict[str, dict[str, Any]] = {"dedup": {"buckets": 2, "checkpoint_interval": 2}, "spark": {"partitions": 2}}


def is_injected_crash(exc: BaseException, proxy: FaultProxy) -> bool:
    """Whether a failure is the proxy's injected crash. A HEAD's crash reply has no body to name
    it (boto3 sees a bare 403): such a 403 counts only once the proxy is dead, i.e. answered it."""
    text = str(exc)
    return "InjectedCrash" in text or (proxy.dead and "HeadObject" in text and "(403)" in text)


def config_for(endpoint_url: str, bucket: str) -> Config:
    return make_config(endpoint_url, bucket, **SETTINGS)


def fresh_copy(s3_server: Any, source: str) -> str:
    target = f"faults-{next(_clones)}"
    clone_bucket(s3_server.client(), source, target)
    return target


def committed_state_of(store: S3Store, config: Config) -> dict[str, Any]:
    rows = {kind: sorted(map(repr, committed_rows(store, config, kind))) for kind in ("data", "audit", "quarantine")}
    state = load_committed_state(store, Layout(config.layout))
    # The ingestion ledger: each input object consumed exactly once, by the batch that committed it.
    versions = {version: batch for batch, version in state.batches.items()}
    entries = LedgerReader(store, state.ledger, Layout(config.layout)).entries()
    ledger = sorted((key, entry.etag, versions[entry.version]) for key, entry in entries.items())
    # The Delta table, caught up with the log and holding exactly its view (after recover, a rerun).
    table = assert_table_is_the_view_at_its_version(store, config, caught_up=True)
    return {"batches": dict(state.batches), "ledger": ledger, "table_reflects": table, **rows}


@pytest.fixture(scope="session")
def proxy(s3_server):  # type: ignore[no-untyped-def]
    with FaultProxy(s3_server.endpoint_url) as running:
        yield running


@pytest.fixture(scope="session")
def before_b2(s3_server, spark):  # type: ignore[no-untyped-def]
    bucket = f"faults-src-{next(_clones)}"
    s3_server.client().create_bucket(Bucket=bucket)
    store = S3Store(s3_server.client(), bucket)
    put_lines(store, "landing/b1/1.jsonl", B1)
    put_lines(store, "landing/b2/1.jsonl", B2[:8])
    put_lines(store, "landing/b2/2.jsonl", B2[8:], gz=True)
    run_batch(store, config_for(s3_server.endpoint_url, bucket), "b1", InputSelector(input_prefix="landing/b1/"),
              NOW, lambda: spark)
    return bucket


@pytest.fixture(scope="session")
def clean_run(s3_server, proxy, before_b2, spark):  # type: ignore[no-untyped-def]
    """b2 without faults, through the proxy: the requests it makes and the state it commits."""
    bucket = fresh_copy(s3_server, before_b2)
    proxy.arm(None)
    via_proxy = config_for(proxy.endpoint_url, bucket)
    run_batch(S3Store(make_client(via_proxy.s3), bucket), via_proxy, "b2", B2_SELECTOR, NOW, lambda: spark)
    requests = list(proxy.requests)
    return requests, committed_state_of(S3Store(s3_server.client(), bucket), config_for(s3_server.endpoint_url, bucket))
