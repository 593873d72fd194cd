"""Three micro-batches with planted duplicates, run through the library (`run_batch`) on the
embedded S3 server: `eventdedup-dev planted-batches`. (`make demo` runs the same batches through
the Airflow DAG: scripts/airflow_demo.py.)"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

import orjson

from eventdedup.commit.log import batch_record, load_committed_state
from eventdedup.config import Config, config_from_mapping
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.pipeline import run_batch
from eventdedup.ops.status import format_batch_table
from eventdedup.s3store import S3Store, make_client
from eventdedup_dev.local_s3 import LocalS3Process, use_local_credentials
from eventdedup_dev.sample_events import PlantedBatch, SampleStream

if TYPE_CHECKING:
    from pyspark import SparkContext

DEMO_BUCKET = "eventdedup-demo"
DEMO_SEED = 20261122


def demo_config(endpoint_url: str) -> Config:
    return config_from_mapping({
        "s3": {"endpoint_url": endpoint_url, "bucket": DEMO_BUCKET},
        "dedup": {"buckets": 8},
        "spark": {"master": "local[2]", "partitions": 8, "driver_memory": "2g"},
    }, source="demo")


def planted_batches(now: datetime) -> list[PlantedBatch]:
    stream = SampleStream(DEMO_SEED, start=now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=3))
    return [
        stream.batch("demo-001", new=400, in_batch_dups=25, cross_batch_dups=0, malformed=4),
        stream.batch("demo-002", new=300, in_batch_dups=15, cross_batch_dups=20, malformed=2),
        stream.batch("demo-003", new=300, in_batch_dups=10, cross_batch_dups=30, malformed=3),
    ]


def run_planted_batches(print_json: bool = False) -> int:
    from eventdedup.spark.session import build_spark_context

    use_local_credentials()
    now = datetime.now(timezone.utc)
    with LocalS3Process() as server:
        server.client().create_bucket(Bucket=DEMO_BUCKET)
        config = demo_config(server.endpoint_url)
        store = S3Store(make_client(config.s3), DEMO_BUCKET)
        print(f"embedded S3 server on {server.endpoint_url}, bucket {DEMO_BUCKET}", flush=True)
        contexts: list[SparkContext] = []

        def spark() -> SparkContext:
            if not contexts:
                contexts.append(build_spark_context(config.spark, "eventdedup-demo"))
            return contexts[0]

        batches = planted_batches(now)
        for batch in batches:
            for name, body in batch.objects.items():
                store.put_bytes(f"{config.layout.landing_prefix}{batch.name}/{name}", body)
            run_batch(store, config, batch.name, InputSelector(input_prefix=f"{config.layout.landing_prefix}{batch.name}/"),
                      now, spark)
        rows, mismatches = committed_rows(store, config, batches)
    print(format_batch_table(rows))
    if print_json:
        print(orjson.dumps({b: counts for _, b, counts in rows}).decode())
    for problem in mismatches:
        print(f"MISMATCH: {problem}")
    print("all counts match the planted duplicates" if not mismatches else "counts do NOT match")
    return 0 if not mismatches else 1


def committed_rows(store: S3Store, config: Config,
                   batches: list[PlantedBatch]) -> tuple[list[tuple[int, str, dict[str, int]]], list[str]]:
    """Each planted batch's committed counts, and every count that differs from what was planted."""
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    rows: list[tuple[int, str, dict[str, int]]] = []
    mismatches: list[str] = []
    for batch in batches:
        record = batch_record(store, layout, state, batch.name)
        rows.append((record.version, batch.name, dict(record.counts)))
        for name, expected in batch.expected_counts().items():
            if record.counts.get(name) != expected:
                mismatches.append(f"{batch.name} {name}: committed {record.counts.get(name)}, planted {expected}")
    return rows, mismatches
