"""What one projection's table costs as the Delta table's live files grow (docs/delta-table.md).

For each count of live files, a table at the output prefix of a fresh bucket on the embedded
store is given that many add actions (as eventdedup's projection writes them, with statistics;
the files themselves are not needed to open or commit), checkpointed as delta-rs does every 100
commits, and then the steps every batch's projection takes are timed, median of --runs: open the
table (`_last_checkpoint`, the checkpoint, the commits after it), read its eventdedup version,
and commit one batch's 16 add actions at exactly the next version. Footer reads are the batch's
own cost, measured by `make bench` (its promotion).

    .venv/bin/python bench/delta_growth.py [--files 1000,10000,100000] [--runs 5]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "include"))

from deltalake import DeltaTable  # noqa: E402
from deltalake.transaction import AddAction, CommitProperties, Transaction  # noqa: E402

from eventdedup.config import config_from_mapping  # noqa: E402
from eventdedup.delta.files import PARTITION_COLUMNS, TABLE_SCHEMA  # noqa: E402
from eventdedup.delta.projection import APP_ID, create_table, projected_version  # noqa: E402
from eventdedup.delta.storage import storage_options, table_location  # noqa: E402
from eventdedup.s3store import S3Store  # noqa: E402
from eventdedup_dev.local_s3 import LocalS3Process, use_local_credentials  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
STATS = ('{"numRecords":62500,"nullCount":{"event_id":0,"original_event_id":62500,"duplicate_of":62500,'
         '"op":0,"supersedes_batch":62500,"event_time":0,"batch_id":0,"raw":0},'
         '"minValues":{"event_time":"2026-11-22T05:00:00.000Z","batch_id":"20261122T050000Z"},'
         '"maxValues":{"event_time":"2026-11-22T05:59:59.999Z","batch_id":"20261122T050000Z"}}')
CHUNK = 20_000


def actions(first: int, count: int) -> list[AddAction]:
    out = []
    for number in range(first, first + count):
        batch, part = divmod(number, 16)
        hour = batch // 12
        day, hour_of_day = divmod(hour, 24)
        date = f"2026-{1 + day // 28 % 12:02d}-{1 + day % 28:02d}"
        path = f"date={date}/hour={hour_of_day:02d}/b{batch:08d}-part-{part:05d}.parquet"
        out.append(AddAction(path, 150 << 20, {"date": date, "hour": str(hour_of_day)}, 1795000000000, True, STATS))
    return out


def commit(table: DeltaTable, adds: list[AddAction], version: int) -> None:
    table.create_write_transaction(adds, "append", TABLE_SCHEMA, partition_by=list(PARTITION_COLUMNS),
                                   commit_properties=CommitProperties(max_commit_retries=0,
                                                                      app_transactions=[Transaction(APP_ID, version)]))


def measure(server: LocalS3Process, files: int, runs: int) -> dict:
    bucket = f"delta-growth-{files}"
    server.client().create_bucket(Bucket=bucket)
    config = config_from_mapping({"s3": {"endpoint_url": server.endpoint_url, "bucket": bucket}})
    store = S3Store(server.client(), bucket)
    table = create_table(store, config, 0)
    version = 0
    for first in range(0, files, CHUNK):
        version += 1
        commit(table, actions(first, min(CHUNK, files - first)), version)
        table.update_incremental()
    table.create_checkpoint()
    checkpoint = sum(info.size for info in store.list(config.layout.output_prefix + "_delta_log/")
                     if ".checkpoint." in info.key)
    opens, commits = [], []
    for run in range(runs):
        started = time.perf_counter()
        table = DeltaTable(table_location(store, config), storage_options=storage_options(store, config.s3))
        assert projected_version(table) == version
        opened = time.perf_counter()
        version += 1
        commit(table, actions(files + run * 16, 16), version)
        done = time.perf_counter()
        opens.append(opened - started)
        commits.append(done - opened)
    return {"live_files": files, "checkpoint_bytes": checkpoint, "open_seconds": statistics.median(opens),
            "commit_seconds": statistics.median(commits), "runs": runs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", default="1000,10000,100000")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    use_local_credentials()
    rows = []
    with LocalS3Process() as server:
        for files in [int(n) for n in args.files.split(",")]:
            rows.append(measure(server, files, args.runs))
            row = rows[-1]
            print(f"{row['live_files']:>9,} live files: checkpoint {row['checkpoint_bytes'] / 1e6:8.1f} MB, open "
                  f"{row['open_seconds']:6.3f} s, one batch's commit {row['commit_seconds']:6.3f} s", flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "delta-growth.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
