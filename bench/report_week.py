"""How long `eventdedup report` takes over a week of 5-minute batches (2,016 commits), and what it reads:

    python -m bench.report_week [--batches 2016] [--audit-rows 5000] [--records current,older] [--runs 3]

A bucket gets a week of interval batches written with the library's own records, no Spark: per batch
a commit as large as a production batch's (304 cache heads, 12 data files, 100 inputs), its manifest
and 4 audit files of its duplicates (~300-byte raw lines, 40 producers, 12 source folders; 60 % of
copies in-batch, the rest lagging geometrically, some by days). Records as this release writes them
(duplicates by folder and producer and the copies' holders in the record: no audit read) and, with
`older`, as releases before 2026-11-26 wrote them (the audit's columns read by range). Timed:
`build_report` over the week and over the last day's 288 commits (median of --runs), and once
`eventdedup report --json` in a new process. Writes bench/results/report-week-latest.json.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa

from bench import RESULTS
from bench.commands import run_command
from bench.stores import BenchSettings, commit_directly
from eventdedup.commit.changes import BatchChange
from eventdedup.commit.ledger import LedgerUpdate
from eventdedup.commit.records import CommitRecord, PromotedObject
from eventdedup.commit.state import CommittedState
from eventdedup.config import Config
from eventdedup.counts import BatchCounts, bounded_counts
from eventdedup.keys import hour_index_at
from eventdedup.layout import Layout
from eventdedup.report.build import build_report
from eventdedup.s3store import ObjectInfo, S3Store
from eventdedup.tables import AUDIT_SCHEMA, UTC_MICROS, table_to_parquet
from eventdedup_dev.local_s3 import LocalS3Process, use_local_credentials

T0, STEP = datetime(2026, 11, 16, tzinfo=timezone.utc), timedelta(minutes=5)
AUDIT_FILES, CACHE_HOURS = 4, 19
EVERYTHING = (datetime(2000, 1, 1, tzinfo=timezone.utc), datetime(2100, 1, 1, tzinfo=timezone.utc))


def batch_id(index: int) -> str:
    return f"{T0 + STEP * index:%Y%m%dT%H%M%SZ}"


def audit_table(index: int, rows: int, rng: np.random.Generator) -> pa.Table:
    """A batch's duplicates. The batch holding each kept copy: itself for 60 %, else a geometric lag
    (mean 2 h), a tenth of those stretched by up to 5 days; never before the first batch."""
    same, back = rng.random(rows) < 0.6, rng.geometric(1 / 24, rows)
    back = np.where(rng.random(rows) < 0.1, back * rng.integers(1, 60, rows), back)
    holders = np.where(same, index, np.maximum(index - back, 0))
    apps, folders, as_of = rng.integers(0, 40, rows), rng.integers(0, 12, rows), T0 + STEP * (index + 1)
    ids = [f"{index:06d}-{i:07d}-{rng.integers(1 << 62):016x}" for i in range(rows)]
    # ~300-byte lines that compress as events do (~2x), not as a run of one letter would.
    raw = [json.dumps({"event_id": ids[i], "app_id": f"app-{apps[i]:02d}", "created_at": as_of.isoformat(),
                       "payload": hashlib.blake2b(ids[i].encode(), digest_size=48).hexdigest() * 2}) for i in range(rows)]
    return pa.table({
        "event_id": ids, "event_time": pa.array(np.full(rows, int(as_of.timestamp() * 1e6)), UTC_MICROS),
        "reason": np.where(holders == index, "in_batch_natural", "cross_batch_natural"), "action": ["dropped"] * rows,
        "kept_in_batch": [batch_id(h) for h in holders], "batch_id": [batch_id(index)] * rows,
        "source_object": [f"landing/source-{f:02d}/{as_of:%Y/%m/%d/%H}/part-{index % 7}.jsonl.gz" for f in folders],
        "line_number": np.arange(rows, dtype=np.int64), "raw": raw, "producer": [f"app-{a:02d}" for a in apps],
    }, schema=AUDIT_SCHEMA)


def write_week(store: S3Store, config: Config, batches: int, audit_rows: int, older: bool) -> int:
    """The week's commits; returns the audit bytes written."""
    layout, rng, state, audit_bytes = Layout(config.layout), np.random.default_rng(42), CommittedState(), 0
    with ThreadPoolExecutor(16) as pool:
        for index in range(batches):
            bid, as_of, hour = batch_id(index), T0 + STEP * (index + 1), hour_index_at(T0 + STEP * (index + 1))
            table = audit_table(index, audit_rows, rng)
            parts = [table.slice(p * audit_rows // AUDIT_FILES, audit_rows // AUDIT_FILES) for p in range(AUDIT_FILES)]
            bodies = [table_to_parquet(part) for part in parts]
            infos = list(pool.map(store.put_bytes, [layout.final_audit(bid, p) for p in range(AUDIT_FILES)], bodies))
            audit_bytes += sum(len(body) for body in bodies)
            store.put_bytes(layout.batch_manifest(bid), b"{}")
            held = Counter(table.column("kept_in_batch").to_pylist())
            in_batch, inputs = held.pop(bid, 0), audit_rows * 20
            counts = BatchCounts(input_lines=inputs, in_batch_duplicates=in_batch, cross_batch_duplicates=sum(held.values()),
                                 in_batch_natural=in_batch, cross_batch_natural=sum(held.values()),
                                 output_rows=inputs - audit_rows, cache_keys_written=inputs - audit_rows)
            # As a production batch's record: a head per (hour, bucket) its events fell in (19 event
            # hours x 16 buckets), a data file per touched hour and partition, 100 inputs consumed.
            hours = [as_of - timedelta(hours=h) for h in range(CACHE_HOURS)]
            segments = {f"{at:%Y-%m-%d}/{at:%H}/{b:04d}": f"_eventdedup/cache/{at:%Y-%m-%d/%H}/{b:04d}/{bid}.seg"
                        for at in hours for b in range(16)}
            objects = (*(PromotedObject("audit", info.key, info.size, info.etag, len(part))
                         for info, part in zip(infos, parts, strict=True)),
                       *(PromotedObject("cache", key, 180_000, '"x"') for key in segments.values()),
                       *(PromotedObject("data", f"deduped/date={at:%Y-%m-%d}/hour={at:%H}/{bid}-part-{p:05d}.parquet",
                                        4 << 20, '"d"', 1000) for at in hours[:3] for p in range(AUDIT_FILES)))
            landed = tuple(ObjectInfo(f"landing/{as_of:%Y/%m/%d/%H}/firehose-{bid}-{n:03d}.gz", 3 << 20, f'"{n:032x}"')
                           for n in range(100))
            folders = Counter(key.rpartition("/")[0] + "/" for key in table.column("source_object").to_pylist())
            change = BatchChange(
                window_start_hour=hour - 168, retain_from_hour=hour - 336, partitions=AUDIT_FILES, interval=True,
                arrival_hour=hour, ledger_update=LedgerUpdate(landed, retain_from_hour=hour - 3 - 168 - 1,
                                                               dated_hours=(hour,) * len(landed)),
                decided_against=None if older else dict(sorted(held.items())),
                duplicates_by_folder=None if older else bounded_counts(folders),
                duplicates_by_producer=None if older else bounded_counts(Counter(table.column("producer").to_pylist())))
            state = commit_directly(store, config, state, CommitRecord(
                index + 1, bid, state.last_batch_id, f"bench-{index}", as_of.isoformat(), counts, objects, segments, change))
    return audit_bytes


def measure(server: LocalS3Process, batches: int, audit_rows: int, runs: int, older: bool) -> dict:
    settings = BenchSettings(f"report-week-{audit_rows}-{'older' if older else 'current'}", {
        "dedup": {"buckets": 16, "window_hours": 168, "checkpoint_interval": 10},
        "report": {"producer_field": "app_id", "source_prefix_depth": 2}})
    server.client().create_bucket(Bucket=settings.bucket)
    config = settings.config(server.endpoint_url)
    store = S3Store(server.client(), settings.bucket)
    started = time.perf_counter()
    audit_bytes = write_week(store, config, batches, audit_rows, older)
    seeded, seconds, daily = time.perf_counter() - started, [], []
    for _ in range(runs):
        started = time.perf_counter()
        report = build_report(store, config, *EVERYTHING)
        page = report.html
        seconds.append(time.perf_counter() - started)
    for _ in range(runs):  # the maintenance DAG's daily report: the newest day's 288 commits
        started = time.perf_counter()
        build_report(store, config, *EVERYTHING, last=min(288, batches)).html  # noqa: B018 - rendered, as published
        daily.append(time.perf_counter() - started)
    with tempfile.TemporaryDirectory() as directory:
        cli = run_command([sys.executable, "-m", "eventdedup", "report", "--json", "--config",
                           str(settings.write_file(Path(directory) / "eventdedup.toml", server.endpoint_url)),
                           "--since", EVERYTHING[0].isoformat(), "--until", EVERYTHING[1].isoformat()])
    figures = report.figures
    return {"batches": batches, "audit_rows_per_batch": audit_rows, "records": "older" if older else "current",
            "seed_seconds": round(seeded, 1), "report_seconds": [round(s, 2) for s in seconds],
            "median_seconds": round(statistics.median(seconds), 2), "cli_json_seconds": round(cli.wall_seconds, 2),
            "page_bytes": len(page), "day_of_288_median_seconds": round(statistics.median(daily), 2),
            "reported_batches": figures["log"]["batches"], "copies": figures["copy_lag"]["copies"],
            "column_requests": figures["read"]["requests_for_columns"],
            "column_bytes_read": figures["read"]["column_bytes_read"], "audit_bytes": audit_bytes,
            "share_of_audit_bytes_read": round(figures["read"]["column_bytes_read"] / audit_bytes, 4),
            "verdict": figures["copy_lag"]["verdict"]}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.report_week", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=2016)
    parser.add_argument("--audit-rows", default="5000", help="duplicates per batch, comma-separated")
    parser.add_argument("--records", default="current,older", help="current and/or older (read from the audit)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    use_local_credentials()
    results = []
    with LocalS3Process() as server:
        for rows in (int(r) for r in args.audit_rows.split(",")):
            for kind in args.records.split(","):
                results.append(measure(server, args.batches, rows, args.runs, kind == "older"))
                print(json.dumps(results[-1]), flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "report-week-latest.json").write_text(json.dumps(
        {"measured_at": datetime.now(timezone.utc).isoformat(), "cpus": os.cpu_count(), "results": results}, indent=2))
    print(f"{'duplicates/batch':>16} {'records':>8} {'week s':>7} {'new process s':>13} {'last day s':>10} "
          f"{'column GETs':>11} {'bytes read':>11} {'of audit':>9}")
    for r in results:
        print(f"{r['audit_rows_per_batch']:>16} {r['records']:>8} {r['median_seconds']:>7} {r['cli_json_seconds']:>13} "
              f"{r['day_of_288_median_seconds']:>10} {r['column_requests']:>11} {r['column_bytes_read']:>11} "
              f"{r['share_of_audit_bytes_read']:>9.2%}")


if __name__ == "__main__":
    main()
