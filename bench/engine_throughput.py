"""Throughput of one eventdedup batch on the embedded S3 server, Spark local mode.

    .venv/bin/python bench/engine_throughput.py --events 1000000 --runs 3

Generates a seeded workload (UUID ids, ~300-byte JSON events over the last two hours, 2 %
in-batch duplicates), runs it as batch 2 on top of a committed history batch, and prints the
median job time with and without Spark start-up, plus S3 bytes per cached key.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone

import orjson

from eventdedup.commit_log import load_committed_state, read_commit
from eventdedup.config import config_from_mapping
from eventdedup.job import run_dedup_job
from eventdedup.layout import Layout
from eventdedup.local_s3 import LOCAL_CREDENTIALS, LocalS3Process
from eventdedup.pipeline import run_batch
from eventdedup.s3store import S3Store, make_client
from eventdedup.spark_session import build_spark_session
from eventdedup.staging import InputSelector, stage_batch


def events(rng: random.Random, count: int, now: datetime, dup_rate: float) -> list[bytes]:
    padding = "x" * 150
    fresh = []
    for _ in range(int(count * (1 - dup_rate))):
        at = now - timedelta(seconds=rng.uniform(0, 7200))
        fresh.append(orjson.dumps({
            "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "created_at": at.isoformat(), "user_id": f"u{rng.randrange(10**6)}", "type": "page_view",
            "props": {"path": "/p/%d" % rng.randrange(1000), "pad": padding},
        }))
    lines = fresh + [rng.choice(fresh) for _ in range(count - len(fresh))]
    rng.shuffle(lines)
    return lines


def upload(store: S3Store, prefix: str, lines: list[bytes], objects: int) -> None:
    per = -(-len(lines) // objects)
    for i in range(objects):
        store.put_bytes(f"{prefix}part-{i:03d}.jsonl", b"\n".join(lines[i * per:(i + 1) * per]) + b"\n")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--objects", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--buckets", type=int, default=64)
    args = parser.parse_args()
    os.environ.update(LOCAL_CREDENTIALS)
    now = datetime.now(timezone.utc)
    rng = random.Random(42)
    with LocalS3Process() as server:
        server.client().create_bucket(Bucket="bench")
        config = config_from_mapping({"s3": {"endpoint_url": server.endpoint_url, "bucket": "bench"},
                                      "dedup": {"buckets": args.buckets}, "spark": {"master": "local[2]"}})
        store = S3Store(make_client(config.s3), "bench")
        t0 = time.perf_counter()
        spark = build_spark_session(config.spark, "eventdedup-bench")
        startup = time.perf_counter() - t0
        upload(store, "landing/history/", events(rng, args.events, now, 0.02), args.objects)
        run_batch(store, config, "history", InputSelector(input_prefix="landing/history/"), now, lambda: spark)
        upload(store, "landing/batch/", events(rng, args.events, now, 0.02), args.objects)
        timings = []
        for run in range(args.runs):
            batch_id = f"batch-{run}"
            stage_batch(store, config, batch_id, InputSelector(input_prefix="landing/batch/"), now)
            t0 = time.perf_counter()
            result = run_dedup_job(spark, config, batch_id)
            job = time.perf_counter() - t0
            store.delete_prefix(Layout(config.layout).staging_root(batch_id))  # every run computes on history only
            timings.append(job)
            print(f"run {run}: job {job:.2f}s, {args.events / job:,.0f} events/s, counts {dict(result.counts)}", flush=True)
        layout = Layout(config.layout)
        state = load_committed_state(store, layout)
        history = read_commit(store, layout, state.batches["history"])
        assert history is not None
        # Only the history batch is committed, so every cache segment and entry is its own.
        seg_bytes = sum(item["Size"] for item in store.list(config.layout.cache_prefix))
        keys = history.counts["cache_keys_written"]
        median = statistics.median(timings)
        print(f"spark start-up {startup:.2f}s; median job {median:.2f}s over {args.runs} runs")
        print(f"throughput: {args.events / median:,.0f} events/s excluding start-up, "
              f"{args.events / (median + startup):,.0f} events/s including it")
        print(f"cache: {seg_bytes:,} bytes for {keys:,} keys = {seg_bytes / keys:.2f} bytes/key "
              f"({len(state.cache_heads)} cache keys)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
