"""`make bench-reads`: the bytes one batch GETs as its store's history grows (issue 57).

    python -m bench.reads [--partition-times id,event] [--hourly-events 20000] [--batch-hours 3]
        [--probe-events 20000] [--dense-hour-events 200000] [--late-events 20] [--out reads-latest]

Per [dedup] partition_time, on a store of the shipped defaults but for it (168-hour window, 16
buckets, local copies on): a day of history committed by real batches (`run_batch`, the pipeline's
entry point, in this process: `eventdedup run-batch` dates a manual batch by the clock, and this
history must arrive over a week, as each batch's as_of dates it), then the probe batch
(bench.reads_workload) through a counting proxy, warm (the local copies the history's batches
filled) and then cold (a new, empty directory: a new executor), each committed; then six more days,
committed older to newer as a pipeline would, and the probe again. Reported: the GET bytes by kind
of object, the probe's own input aside, the state by part (the Delta table's log apart from the
output), and their growth over the six days against issue 57's targets. Then late events in an old
hour on a cold executor with the default settings: the bytes of that hour's segments read, over the
bytes those segments hold. Writes bench/results/<out>.json and prints a table.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from bench import write_result
from bench.reads_summary import print_reads, summarise_reads
from bench.reads_workload import Probe, ReadsSpec, ReadsWorkload
from bench.stores import BenchSettings, fresh_store, upload_lines
from bench.traffic import state_traffic, traffic
from eventdedup.commit.log import load_committed_state
from eventdedup.config import Config
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.pipeline import run_batch
from eventdedup.ops.timings import PhaseTimes
from eventdedup.s3store import S3Store, make_client
from eventdedup.spark.session import build_spark_context
from eventdedup_dev.local_s3 import use_local_credentials
from eventdedup_dev.s3_fault_proxy import FaultProxy

DAYS = (1, 7)


@dataclass
class ReadsStore:
    """One store, its batches committed through a counting proxy (local copies are named by the
    endpoint read through, so the history fills the copies the warm probe reads)."""

    settings: BenchSettings
    direct: S3Store  # for landing objects: not the batch's reads
    proxy: FaultProxy
    spark: object
    warm: Path

    def config(self, copies: Path | None = None) -> Config:
        return self.settings.with_values("spark", local_cache_dir=str(copies or self.warm)).config(
            self.proxy.endpoint_url)

    def commit(self, batch_id: str, probe: Probe, as_of: datetime, copies: Path | None = None) -> dict:
        """One batch (staging, the job, the promotion), its counts checked; its requests by kind."""
        config = self.config(copies)
        upload_lines(self.direct, f"landing/{batch_id}/", probe.lines)
        self.proxy.arm(None)
        timings = PhaseTimes()
        with timings.phase("total"):
            outcome = run_batch(S3Store(make_client(config.s3), config.s3.bucket), config, batch_id,
                                InputSelector(input_prefix=f"landing/{batch_id}/"), as_of, lambda: self.spark, timings)
        counts = {name: outcome.counts.get(name, 0) for name in probe.expected}
        if counts != probe.expected:
            raise SystemExit(f"{batch_id}: the commit counted {counts}; the workload planted {probe.expected}")
        layout = Layout(config.layout)
        return {"batch_id": batch_id, "as_of": as_of.isoformat(), "seconds": timings.seconds,
                "traffic": traffic(layout, self.proxy), "state_parts": state_traffic(layout, self.proxy),
                "served": dict(self.proxy.bytes_served), "keys": {str(r): r.key for r in self.proxy.requests}}

    def commit_history(self, workload: ReadsWorkload, batches: range) -> dict:
        """History batches, oldest first; how long their landing objects and their batches took."""
        landing = seconds = 0.0
        for i in batches:
            started = time.perf_counter()
            events = workload.history_batch(i)
            probe = Probe(events.lines(), {"input_lines": len(events), "output_rows": len(events)})
            landing += time.perf_counter() - started
            seconds += self.commit(f"history-{i:04d}", probe, workload.spec.as_of(i))["seconds"]["total"]
        return {"batches": len(batches), "events": sum(len(workload.history_batch(i)) for i in batches),
                "seconds": seconds, "landing_seconds": landing}


def measured(run: dict) -> dict:
    """A measured batch's figures, without what only the late-events share needs."""
    return {key: value for key, value in run.items() if key not in ("served", "keys")}


def hour_segments(store: S3Store, config: Config, hour: int) -> dict[str, int]:
    """The committed segments of one cache hour (all buckets, whole chains): key -> bytes."""
    layout = Layout(config.layout)
    keys = [key for key in load_committed_state(store, layout).cache_objects()
            if (parsed := layout.segment_owner_and_key(key)) is not None and parsed[1].hour_index == hour]
    return {key: info.size for key in keys if (info := store.head(key)) is not None}


def run_partition_time(partition_time: str, spec: ReadsSpec, spark: object, work: Path) -> dict:
    workload, per_day = ReadsWorkload(spec), spec.batches_per_day
    settings = BenchSettings("reads", {"dedup": {"partition_time": partition_time}})
    with fresh_store(settings) as (server, _, direct), FaultProxy(server.endpoint_url) as proxy:
        store = ReadsStore(settings, direct, proxy, spark, work / "warm")
        result: dict = {"partition_time": partition_time, "history": {}, "probes": {}}
        for days, since in zip(DAYS, (0, *DAYS), strict=False):
            span = f"days {since + 1}-{days}" if days > since + 1 else f"day {days}"
            result["history"][span] = store.commit_history(workload, range(since * per_day, days * per_day))
            print(f"{partition_time}: history of {span} committed ({result['history'][span]})", flush=True)
            for minutes, mode in ((5, "warm"), (10, "cold")):
                as_of = spec.probe_as_of(days, minutes)
                copies = work / f"cold-{days}" if mode == "cold" else None
                run = store.commit(f"probe-{days}d-{mode}", workload.probe(as_of, 2 * days + (mode == "cold")),
                                   as_of, copies)
                result["probes"][f"{days}d {mode}"] = measured(run)
        result["late"] = late_events(store, workload, spec.probe_as_of(DAYS[-1], 15), work / "cold-late")
    return result


def late_events(store: ReadsStore, workload: ReadsWorkload, as_of: datetime, copies: Path) -> dict:
    """The late events on a cold executor (default settings: local copies on, an empty directory):
    the bytes of their hour's committed segments read, against those segments' bytes."""
    config = store.config(copies)
    segments = hour_segments(S3Store(make_client(config.s3), config.s3.bucket), config, workload.spec.dense_hour)
    run = store.commit("late", workload.late(), as_of, copies)
    read = sum(size for request, size in run["served"].items() if run["keys"].get(request) in segments)
    return {**measured(run), "hour": datetime.fromtimestamp(workload.spec.dense_hour * 3600, timezone.utc).isoformat(),
            "hour_segments": len(segments), "hour_segment_bytes": sum(segments.values()), "hour_bytes_read": read}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.reads", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partition-times", default="id,event")
    parser.add_argument("--hourly-events", type=int, default=20_000, help="history events an hour")
    parser.add_argument("--batch-hours", type=int, default=3, help="a history batch every N hours (divides 24)")
    parser.add_argument("--probe-events", type=int, default=20_000)
    parser.add_argument("--dense-hour-events", type=int, default=200_000,
                        help="ids in the old hour the late events fall in")
    parser.add_argument("--late-events", type=int, default=20)
    parser.add_argument("--out", default="reads-latest", help="result name under bench/results/ (.json)")
    args = parser.parse_args()
    if 24 % args.batch_hours:
        raise SystemExit(f"--batch-hours {args.batch_hours} does not divide a day")
    use_local_credentials()
    spec = ReadsSpec(args.hourly_events, args.batch_hours, args.probe_events, args.dense_hour_events, args.late_events)
    started = time.perf_counter()
    spark = build_spark_context(BenchSettings("reads").config("http://127.0.0.1:1").spark, "eventdedup-bench-reads")
    result: dict = {"started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "spec": spec.to_dict(),
                    "days": list(DAYS), "partition_times": {}}
    for partition_time in [p for p in args.partition_times.split(",") if p]:
        with tempfile.TemporaryDirectory(prefix="eventdedup-reads-") as work:
            result["partition_times"][partition_time] = run_partition_time(partition_time, spec, spark, Path(work))
    result["seconds"] = time.perf_counter() - started
    summarise_reads(result)
    write_result(args.out, result)
    print_reads(result)


if __name__ == "__main__":
    main()

