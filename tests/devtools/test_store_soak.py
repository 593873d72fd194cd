"""Soak of the embedded store (`make soak-store`; a short pipeline soak is in the default suite), as
a single-host deployment lives on it, compressed in time; each long test writes its figures to
bench/results/.

- The churn: STORE_CHURN_GIB (20) GiB put, copied and deleted by 4 writers (1 KiB-20 MiB objects,
  each keeping its last 40 finals, ~300 MiB live), the data directory's allocated bytes sampled
  twice a second: it stays within 3 x the live data plus the slots' reserve (4 volumes), no write
  fails, every kept object reads back after a stop and a restart. store-churn-latest.json.
- The pipeline: STORE_SOAK_BATCHES (300) five-minute interval batches (two landing objects each,
  4,000 events, ~1 MiB, ~5 % of them copies of earlier batches' events), dated through the fault proxy's LIST
  rewriting so no clock is waited on, and every 24 batches (two hours of intervals) the
  maintenance DAG's upkeep: cache expiry, the view's index, the Delta table's compaction and
  vacuum, the consistency check, fsck and the sweep. Every batch commits; the data directory
  stays within 3 x the live data plus the slots' reserve; no write is refused.
  store-soak-latest.json.
"""
from __future__ import annotations

import json
import os
import random
import time
import urllib.error
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest

from eventdedup.cache.expiry import expire_cache
from eventdedup.commit.log import load_committed_state
from eventdedup.commit.view import maintain_view
from eventdedup.delta.upkeep import maintain_table
from eventdedup.layout import Layout
from eventdedup.ops.fsck import fsck_gate
from eventdedup.ops.scheduling import consistency_gate
from eventdedup.ops.sweep import stage_sweep
from eventdedup.s3store import S3Store, make_client
from eventdedup_dev.local_s3 import LocalS3Process, http_json, size_text
from eventdedup_dev.s3_fault_proxy import FaultProxy

from ..support.helpers import make_config, put_lines
from ..support.landing import interval_batch
from .store_churn import GIB, allocated_bytes, churn, unreadable

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
STEP = timedelta(minutes=5)
T0 = datetime(2026, 11, 22, tzinfo=timezone.utc)


def write_result(name: str, figures: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / name).write_text(json.dumps(figures, indent=1) + "\n")


def change_log_bytes(server: LocalS3Process) -> int:
    """What the filer's change log (/topics/.system/log, kept in the store's own volumes) holds."""
    filer = f"http://127.0.0.1:{json.loads((server.stored_in / 'ports.json').read_text())['base'] + 5}"
    total = 0
    try:
        days = (http_json(f"{filer}/topics/.system/log/?limit=1000") or {}).get("Entries") or []
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
        days = []  # nothing flushed yet
    for day in days:
        listing = http_json(f"{filer}{day['FullPath']}/?limit=10000") or {}
        total += sum(int(entry.get("FileSize", 0)) for entry in listing.get("Entries") or [])
    return total


def vacuum_summary(record: dict[str, Any]) -> dict[str, Any]:
    passes = record.get("vacuums", [])
    reasons: dict[str, int] = {}
    for one in passes:
        reasons[one["reason"]] = reasons.get(one["reason"], 0) + 1
    seconds = sorted(one["seconds"] for one in passes)
    return {"passes": record.get("vacuum_passes", 0), "reclaimed_bytes": record.get("reclaimed_bytes", 0),
            "reasons_of_the_last_50": reasons, "median_seconds": seconds[len(seconds) // 2] if seconds else None,
            "max_seconds": seconds[-1] if seconds else None, "refused_writes": record.get("refused_writes", {})}


@pytest.mark.soak
def test_twenty_gibibytes_of_churn_stay_within_the_disk_bound_with_no_failed_write(tmp_path) -> None:
    total = int(float(os.environ.get("STORE_CHURN_GIB", "20")) * GIB)
    with LocalS3Process(data_dir=tmp_path / "data") as server:
        server.client().create_bucket(Bucket="churn")
        run = churn(server, "churn", total=total, keep=40)
        budget = server.budget
        assert budget is not None
        reserve = budget.reserve_bytes
        record = server.upkeep()
        change_log = change_log_bytes(server)
        stopping = time.monotonic()
        server.stop()
        stopped_in = round(time.monotonic() - stopping, 1)
        server.start()
        lost = unreadable(server, "churn", run.kept)
    at, disk, live = run.worst(reserve)
    peak = max(run.samples, key=lambda sample: sample[1])
    figures = {
        "date": time.strftime("%Y-%m-%d"), "bytes_put": run.bytes_put, "bytes_copied": run.bytes_copied,
        "objects": run.objects, "seconds": run.seconds, "failed_writes": len(run.failures),
        "live_bytes_at_end": run.live_bytes, "peak_disk_bytes": peak[1], "live_bytes_at_peak": peak[2],
        "closest_to_bound": {"at_seconds": at, "disk_bytes": disk, "live_bytes": live,
                             "bound_bytes": 3 * live + reserve},
        "disk_at_end": run.samples[-1][1], "vacuum": vacuum_summary(record), "held_writes": record.get("held_writes", 0),
        "held_seconds": record.get("held_seconds", 0.0), "change_log_bytes": change_log,
        "stop_seconds": stopped_in, "kept_objects_unreadable_after_restart": len(lost),
        "samples_every_5s": [{"seconds": s, "disk_bytes": d, "live_bytes": live_bytes}
                             for s, d, live_bytes in run.samples[::10]],
    }
    write_result("store-churn-latest.json", figures)
    print(f"{size_text(run.bytes_put)} put and copied in {run.seconds} s; peak {size_text(peak[1])} on disk "
          f"for {size_text(peak[2])} live; {figures['vacuum']['passes']} vacuum passes; stop {stopped_in} s")
    assert run.failures == [] and lost == []
    assert run.bytes_put >= total
    assert disk <= 3 * live + reserve, figures["closest_to_bound"]


def batch_lines(rng: random.Random, number: int, start: datetime, count: int) -> list[bytes]:
    """`count` events of the interval: new ids, and ~5 % copies of earlier batches' events."""
    lines = []
    for n in range(count):
        if number and rng.random() < 0.05:
            earlier = rng.randrange(number)
            event_id, minute = f"b{earlier}-{rng.randrange(count)}", 0
            at = T0 + STEP * earlier
        else:
            event_id, minute, at = f"b{number}-{n}", rng.randrange(5), start
        lines.append(orjson.dumps({"event_id": event_id, "created_at": (at + timedelta(minutes=minute)).isoformat(),
                                   "payload": "x" * rng.randrange(50, 250)}))
    return lines


def maintain(store: S3Store, config: Any) -> dict[str, Any]:
    """The maintenance DAG's upkeep, in its order (dags/eventdedup_maintenance.py)."""
    expired = expire_cache(store, config)
    maintain_view(store, Layout(config.layout))
    table = maintain_table(store, config).to_json()
    consistency_gate(store, config)
    fsck = fsck_gate(store, config, 2016)
    swept = stage_sweep(store, config)
    return {"cache_segments_deleted": len(expired.superseded) + len(expired.expired), "table": table,
            "fsck_objects": fsck.objects_checked, "swept": swept is not None}


def bucket_bytes(store: S3Store) -> int:
    return sum(item.size for item in store.list(""))


def soak_pipeline(tmp_path: Path, spark: Any, batches: int, maintain_every: int) -> dict[str, Any]:
    """`batches` five-minute interval batches on the embedded store, the maintenance DAG's upkeep
    every `maintain_every` of them; the store's disk sampled every 5 batches beside what the
    bucket holds. Its figures, asserted by the callers."""
    rng = random.Random(55)
    dates: dict[str, datetime] = {}
    samples, maintenance = [], []
    started = time.monotonic()
    with LocalS3Process(data_dir=tmp_path / "data") as server, FaultProxy(server.endpoint_url) as proxy:
        server.client().create_bucket(Bucket="soak")
        proxy.redate(dates.get)
        config = make_config(proxy.endpoint_url, "soak", dedup={"buckets": 4}, spark={"partitions": 2})
        store = S3Store(make_client(config.s3), "soak")
        assert server.budget is not None
        reserve = server.budget.reserve_bytes
        for number in range(batches):
            start = T0 + STEP * number
            for part in range(2):
                key = f"landing/{start:%Y/%m/%d/%H%M}/part-{part}.jsonl"
                put_lines(store, key, batch_lines(rng, number, start, 2000))
                dates[key] = start + timedelta(minutes=1 + part)
            interval_batch(store, config, start, start + STEP, spark)
            if (number + 1) % maintain_every == 0:
                maintenance.append({"after_batch": number + 1, **maintain(store, config)})
            if (number + 1) % 5 == 0 or number == batches - 1:
                state = server.upkeep().get("state", {})
                samples.append({"batches": number + 1, "seconds": round(time.monotonic() - started, 1),
                                "disk_bytes": allocated_bytes(server.stored_in), "bucket_bytes": bucket_bytes(store),
                                "store_live_bytes": state.get("live_bytes"),
                                "garbage_bytes": state.get("garbage_bytes"), "volumes": state.get("volumes")})
        committed = load_committed_state(store, Layout(config.layout)).batches
        record = server.upkeep()
        change_log = change_log_bytes(server)
    worst = min(samples, key=lambda s: 3 * s["bucket_bytes"] + reserve - s["disk_bytes"])
    return {
        "date": time.strftime("%Y-%m-%d"), "batches": batches, "seconds": round(time.monotonic() - started, 1),
        "committed_interval_batches": sum(1 for batch in committed if batch.startswith("2026")),
        "maintenance_runs": len(maintenance), "last_maintenance": maintenance[-1] if maintenance else None,
        "disk_at_end": samples[-1]["disk_bytes"], "bucket_bytes_at_end": samples[-1]["bucket_bytes"],
        "peak_disk_bytes": max(s["disk_bytes"] for s in samples),
        "closest_to_bound": {**worst, "bound_bytes": 3 * worst["bucket_bytes"] + reserve},
        "vacuum": vacuum_summary(record), "held_writes": record.get("held_writes", 0),
        "held_seconds": record.get("held_seconds", 0.0), "change_log_bytes": change_log,
        "samples_every_5_batches": samples,
    }


def assert_soak_held(figures: dict[str, Any]) -> None:
    """Every batch committed, no write refused, the disk within 3 x what the bucket holds plus the
    slots' reserve."""
    assert figures["committed_interval_batches"] == figures["batches"], figures
    assert figures["vacuum"]["refused_writes"] == {}, figures["vacuum"]
    worst = figures["closest_to_bound"]
    assert worst["disk_bytes"] <= worst["bound_bytes"], worst


def test_a_day_of_batches_with_maintenance_commits_every_batch_within_the_disk_bound(tmp_path, spark) -> None:
    """The soak below, short (in the default suite): 4 batches, the upkeep after the 2nd and the 4th."""
    figures = soak_pipeline(tmp_path, spark, batches=4, maintain_every=2)
    assert figures["maintenance_runs"] == 2
    assert_soak_held(figures)


@pytest.mark.soak
def test_three_hundred_five_minute_batches_with_maintenance_keep_the_disk_bounded(tmp_path, spark) -> None:
    batches = int(os.environ.get("STORE_SOAK_BATCHES", "300"))
    figures = soak_pipeline(tmp_path, spark, batches, maintain_every=24)
    write_result("store-soak-latest.json", figures)
    print(f"{batches} batches in {figures['seconds']} s; disk at end {size_text(figures['disk_at_end'])} "
          f"(peak {size_text(figures['peak_disk_bytes'])}) for {size_text(figures['bucket_bytes_at_end'])} in the "
          f"bucket; {figures['vacuum']['passes']} vacuum passes; {figures['held_writes']} writes held")
    assert_soak_held(figures)
