"""`make bench-scale`: what one batch reads and writes at production density, by kind of object.

    python -m bench.scale [--rates 100000,1000000,10000000] [--windows 24,168] [--fills 1,10,100]
        [--partition-times event,id] [--max-seed-ids 40000000] [--out FILE] [--before FILE]

Per cell, the store years of batches leave is written for one sampled bucket (bench.scale_history),
then one real batch runs on it through a counting proxy, its output rows checked. Reported per kind
of object: requests and bytes read and written (times 16 for the kinds that grow with the buckets),
cold (no executor-local copies: an ephemeral executor), cold with local copies on as shipped (an
empty directory: a new executor that keeps copies) and warm (every cache object of the window
already copied locally, as a persistent executor holds them after a few batches); a cell whose bucket would hold more than --max-seed-ids entries is skipped. Also the chain
policy played over an hour's batches ("merges"). Writes --out (.json; the growth chart as .png,
dotted: the run --before) and a table.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from bench import RESULTS
from bench.scale_history import BUCKETS, Composition, ScaleSpec, SeededStore, measured_as_of, measured_lines
from bench.stores import BenchSettings, fresh_store, upload_lines
from bench.traffic import added, requests, traffic
from eventdedup.cache.heads import ChainPolicy
from eventdedup.cache.local_copies import LocalCopies, LocalCopySettings
from eventdedup.commit.log import load_committed_state
from eventdedup.inputs.manifest import freeze_batch_inputs
from eventdedup.inputs.selector import InputSelector
from eventdedup.job.driver import run_dedup_job
from eventdedup.layout import Layout
from eventdedup.promotion.promote import promote_batch
from eventdedup.s3store import S3Store, make_client
from eventdedup.spark.session import build_spark_context
from eventdedup_dev.local_s3 import use_local_credentials
from eventdedup_dev.s3_fault_proxy import FaultProxy

PER_BUCKET_KINDS = ("input", "segments", "guards", "output")
INPUT_OBJECTS = 8


def scale_settings(spec: ScaleSpec, local_copies: Path | None = None, copy_bytes: int = 0) -> BenchSettings:
    return BenchSettings("scale", {"dedup": {"window_hours": spec.window, "partition_time": spec.partition_time},
                                   "spark": {"local_cache_dir": str(local_copies or ""), "local_cache_bytes": copy_bytes}})


def run_spec(spec: ScaleSpec, spark: object, work: Path) -> dict:
    """Seed, then the measured batch's job cold (no local copies), cold with copies on (an empty
    directory), warm (local copies of all but what the last commit wrote, as a persistent executor
    holds them once earlier batches read the window), and its promotion."""
    rng = np.random.default_rng([spec.rate, spec.window, spec.fill, int(spec.partition_time == "id")])
    composition = Composition.of(spec.per_bucket)
    with fresh_store(scale_settings(spec)) as (server, config, store):
        started = time.perf_counter()
        seeded = SeededStore(store, config, spec, rng)
        plants = seeded.write(composition)
        seed_seconds = time.perf_counter() - started
        input_bytes = upload_lines(store, "landing/scale/", measured_lines(composition, plants, seeded.ids, rng),
                                   INPUT_OBJECTS)
        with FaultProxy(server.endpoint_url) as proxy:
            cold = scale_settings(spec, work / "cold").config(proxy.endpoint_url)
            warm = scale_settings(spec, work / "warm", 8 << 30).config(proxy.endpoint_url)
            layout, batch_id = Layout(cold.layout), "scale-measured"
            freeze_batch_inputs(S3Store(make_client(cold.s3), "scale"), cold, batch_id,
                                InputSelector(input_prefix="landing/scale/"), measured_as_of())
            proxy.arm(None)
            job_started = time.perf_counter()
            job = run_dedup_job(spark, cold, batch_id)
            job_seconds = time.perf_counter() - job_started
            cold_traffic = traffic(layout, proxy)
            proxy.arm(None)
            shipped_job = run_dedup_job(spark, scale_settings(spec, work / "shipped", 4 << 30).config(
                proxy.endpoint_url), batch_id)
            shipped_traffic = traffic(layout, proxy)
            copies = LocalCopies(LocalCopySettings(str(work / "warm"), 8 << 30))
            last = set(seeded.last_commit_objects)  # its own writes: not read by any batch yet
            via_proxy = S3Store(make_client(warm.s3), "scale")  # copies are named by the endpoint read through
            for key in load_committed_state(store, layout).cache_objects() - last:
                copies.get_or_none(via_proxy, key)
            proxy.arm(None)
            warm_job = run_dedup_job(spark, warm, batch_id)
            warm_traffic = traffic(layout, proxy)
            proxy.arm(None)
            promote_started = time.perf_counter()
            promote_batch(S3Store(make_client(warm.s3), "scale"), warm, batch_id)
            promote_seconds = time.perf_counter() - promote_started
            promotion = traffic(layout, proxy)
    counts = dict(job.counts)
    if (counts["output_rows"] != composition.expected_output or dict(warm_job.counts) != counts
            or dict(shipped_job.counts) != counts):
        raise SystemExit(f"{spec.label}: the batch emitted {counts['output_rows']:,} rows (warm: "
                         f"{warm_job.counts['output_rows']:,}); its composition {asdict(composition)} makes "
                         f"{composition.expected_output:,}")
    return {"spec": asdict(spec), "label": spec.label, "seeded_ids": spec.seeded_ids,
            "seed_seconds": round(seed_seconds, 1), "composition": asdict(composition), "input_bytes": input_bytes,
            "traffic": added(cold_traffic, promotion), "traffic_warm": added(warm_traffic, promotion),
            "traffic_cold_copies": added(shipped_traffic, promotion),
            "job_seconds": round(job_seconds, 2), "promote_seconds": round(promote_seconds, 2), "counts": counts}


def all_buckets(result: dict, which: str = "traffic") -> dict[str, dict[str, float]]:
    """The sampled bucket's traffic as a whole batch's: per-bucket kinds times the buckets."""
    return {kind: {name: value * (BUCKETS if kind in PER_BUCKET_KINDS else 1) for name, value in figures.items()}
            for kind, figures in result[which].items()}


def cache_figures(result: dict, which: str = "traffic") -> tuple[float, float]:
    """(cache bytes read, cache bytes written) per batch, all buckets."""
    whole = all_buckets(result, which)
    return (whole["segments"]["read_bytes"] + whole["guards"]["read_bytes"],
            whole["segments"]["write_bytes"] + whole["guards"]["write_bytes"])


def merge_costs(rate: int, policy: ChainPolicy | None = None) -> dict:
    """What merging costs over time, which one batch does not show: the chain policy played over the
    12 batches of an hour (each adding 99 % of its ids to the current hour) and over the 288 batches
    an old hour receives stragglers for (1 % of each batch's ids over 24 hours), beside copy-forward
    (each batch rewriting the key whole). Segment bytes per (hour, bucket), 24 per entry."""
    policy = policy or ChainPolicy()

    def play(sizes: list[int]) -> tuple[int, int, int]:
        chain: list[int] = []
        written = merged_read = longest = 0
        for own in sizes:
            merge = policy.objects_to_merge(chain, own)
            merged = sum(chain[len(chain) - merge:])
            chain = [*chain[:len(chain) - merge], merged + own]
            written, merged_read, longest = written + merged + own, merged_read + merged, max(longest, len(chain))
        return written, merged_read, longest

    own, late = int(rate * 0.99 / BUCKETS * 24), int(rate * 0.01 / 24 / BUCKETS * 24)
    written, merged_read, longest = play([own] * 12)
    late_written, late_read, late_longest = play([own * 12] + [late] * 288)
    return {"rate": rate,
            "current_hour": {"own_bytes": own, "written_per_batch": written // 12,
                             "merged_read_per_batch": merged_read // 12, "longest_chain": longest,
                             "copy_forward_written_per_batch": sum(own * n for n in range(1, 13)) // 12},
            "old_hour": {"base_bytes": own * 12, "tail_bytes": late, "written_per_batch": (late_written - own * 12) // 288,
                         "merged_read_per_batch": late_read // 288, "longest_chain": late_longest,
                         "copy_forward_written_per_batch": own * 12 + late * 144}}


def mib(value: float) -> str:
    return f"{value / 2**20:,.1f}"


def table(results: list[dict]) -> str:
    rows = ["| stream, window, partition_time, fill | seeded ids (1 bucket) | segments read MiB | guards read MiB | "
            "cache read cold, copies on MiB | cache read warm MiB | state read MiB | cache and state read / input "
            "(cold; copies on; warm) | cache written MiB | requests | job s |",
            "|" + " --- |" * 11]
    for result in results:
        whole, (read, written), (warm, _) = all_buckets(result), cache_figures(result), cache_figures(result, "traffic_warm")
        shipped = cache_figures(result, "traffic_cold_copies")[0] if "traffic_cold_copies" in result else float("nan")
        state, input_bytes = whole["state"]["read_bytes"], result["input_bytes"] * BUCKETS
        ratios = "; ".join(f"{(cache + state) / input_bytes:.2f}" for cache in (read, shipped, warm))
        rows.append(f"| {result['label']} | {result['seeded_ids']:,} | {mib(whole['segments']['read_bytes'])} | "
                    f"{mib(whole['guards']['read_bytes'])} | {mib(shipped)} | {mib(warm)} | {mib(state)} | "
                    f"{ratios} | {mib(written)} | {requests(whole):,.0f} | {result['job_seconds']} |")
    return "\n".join(rows)


def growth_chart(results: list[dict], before: list[dict], path: Path) -> None:
    """Cache bytes a batch reads as the window fills: per window, a line per stream and partitioning,
    now cold (solid), now warm (dashed), before (dotted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    windows = sorted({result["spec"]["window"] for result in results})
    fig, axes = plt.subplots(1, len(windows), figsize=(6.5 * len(windows), 4.8), squeeze=False)
    for axis, window in zip(axes[0], windows, strict=True):
        series = sorted({(r["spec"]["rate"], r["spec"]["partition_time"]) for r in results if r["spec"]["window"] == window})
        for number, (rate, partition_time) in enumerate(series):
            for source, which, style in ((results, "traffic", "-"), (results, "traffic_warm", "--"), (before, "traffic", ":")):
                points = sorted((r["spec"]["fill"], cache_figures(r, which)[0] / 2**30) for r in source
                                if (r["spec"]["rate"], r["spec"]["window"], r["spec"]["partition_time"])
                                == (rate, window, partition_time) and which in r)
                if points:
                    axis.plot(*zip(*points, strict=True), style, color=f"C{number}", marker="o",
                              label=f"{rate / 1e6:g}M/5min {partition_time}" if style == "-" else None)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("window fill (%)")
        axis.set_ylabel("cache GiB read per batch, all buckets")
        axis.set_title(f"{window}-hour window: now cold (solid), warm (dashed), before (dotted)")
        axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="100000,1000000,10000000")
    parser.add_argument("--windows", default="24,168")
    parser.add_argument("--fills", default="1,10,100")
    parser.add_argument("--partition-times", default="event,id")
    parser.add_argument("--max-seed-ids", type=int, default=40_000_000,
                        help="largest store (entries of the sampled bucket) built here; bigger cells are skipped")
    parser.add_argument("--out", type=Path, default=RESULTS / "scale-latest.json")
    parser.add_argument("--before", type=Path, default=RESULTS / "scale-before-39.json",
                        help="a run to draw beside this one (dotted); none if missing")
    args = parser.parse_args()
    use_local_credentials()
    specs = [ScaleSpec(int(rate), int(window), int(fill), pt) for rate in args.rates.split(",")
             for window in args.windows.split(",") for pt in args.partition_times.split(",")
             for fill in sorted(int(f) for f in args.fills.split(","))]
    spark = build_spark_context(scale_settings(specs[0]).config("http://127.0.0.1:1").spark, "eventdedup-bench-scale")
    results: list[dict] = []
    for spec in specs:
        if spec.seeded_ids > args.max_seed_ids:
            print(f"{spec.label}: {spec.seeded_ids:,} entries, beyond --max-seed-ids: skipped")
            continue
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="eventdedup-scale-") as work:
            results.append(run_spec(spec, spark, Path(work)))
        whole = all_buckets(results[-1])
        print(f"{spec.label}: seeded {spec.seeded_ids:,} ids in {results[-1]['seed_seconds']}s; batch: segments "
              f"{mib(whole['segments']['read_bytes'])} MiB, guards {mib(whole['guards']['read_bytes'])} MiB, state "
              f"{mib(whole['state']['read_bytes'])} MiB read; job {results[-1]['job_seconds']}s "
              f"({time.perf_counter() - started:.0f}s in all)", flush=True)
    merges = [merge_costs(int(rate)) for rate in args.rates.split(",")]
    for merge in merges:
        current, old = merge["current_hour"], merge["old_hour"]
        print(f"merges at {merge['rate']:,}/5min, per (hour, bucket): current hour {mib(current['written_per_batch'])} "
              f"MiB written a batch (copy-forward {mib(current['copy_forward_written_per_batch'])}), chain <= "
              f"{current['longest_chain']}; an old hour {old['written_per_batch'] / 1024:.1f} KiB a batch "
              f"(copy-forward {mib(old['copy_forward_written_per_batch'])} MiB), chain <= {old['longest_chain']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"buckets": BUCKETS, "results": results, "merges": merges}, indent=1))
    before = json.loads(args.before.read_text())["results"] if args.before.exists() else []
    growth_chart(results, before, args.out.with_suffix(".png"))
    print(table(results))


if __name__ == "__main__":
    main()
