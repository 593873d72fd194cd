"""`make bench-ordering`: what an ordered store costs (issue 54), against the default in the same run.

    python -m bench.ordering [--events 200000] [--history 4] [--runs 3]

Two stores on their own embedded S3 servers, one with the shipped defaults (survivor "first", no
changelog: 24-byte entries, format-2 segments), one ordered (survivor "max:updated_at",
changelog = true: each entry keeps its order key, format-3 segments). Every batch of both is an
`eventdedup run-batch` process on the history the earlier ones committed (the real path, warm
local copies), the two stores taking turns so that drift falls on both alike. Each batch carries
new events and, from the second on, re-sent versions of a tenth of the batch before's (a newer
`updated_at` for half of them, an older one for the other half): the default renames them, the
ordered store updates or drops them as stale. Reported: the median wall time of the measured
batches and their ratio, and the bytes per cache entry each store's segments hold.
Writes bench/results/ordering.json.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from bench import write_result
from bench.commands import run_batch
from bench.stores import BenchSettings, fresh_store, upload_lines
from eventdedup_dev.local_s3 import use_local_credentials

STORES = {"default": {}, "ordered": {"survivor": "max:updated_at", "changelog": True}}


def batch_lines(number: int, events: int, now: datetime) -> list[bytes]:
    """Batch `number`'s lines: `events` new ids, then re-sent versions of a tenth of batch
    `number - 1`'s ids (none in the first): newer for the even ones, older for the odd."""
    rng = np.random.default_rng(number)
    base = now - timedelta(minutes=30)
    lines = []
    for i in range(events):
        at = base + timedelta(microseconds=int(rng.integers(0, 10**9)))
        lines.append(b'{"event_id":"e%d-%d","created_at":"%s","updated_at":%d,"v":%d}'
                     % (number, i, at.strftime("%Y-%m-%dT%H:%M:%S.%fZ").encode(), 1000 + number, i))
    if number > 1:
        for i in range(0, events // 10):
            newer = i % 2 == 0
            lines.append(b'{"event_id":"e%d-%d","created_at":"%s","updated_at":%d,"v":%d}'
                         % (number - 1, i, base.strftime("%Y-%m-%dT%H:%M:%S.%fZ").encode(),
                            1000 + number if newer else 1, -i))
    return lines


def cache_bytes(store, config) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """(bytes, objects) of the store's cache segments."""
    sizes = [info.size for info in store.list(config.layout.cache_prefix) if info.key.endswith(".seg")]
    return sum(sizes), len(sizes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000, help="new events per batch")
    parser.add_argument("--history", type=int, default=4, help="batches committed before the measured ones")
    parser.add_argument("--runs", type=int, default=3, help="measured batches per store")
    parser.add_argument("--out", default="ordering")
    args = parser.parse_args()
    use_local_credentials()
    now = datetime.now(timezone.utc)
    results: dict[str, dict] = {name: {"walls": [], "entries": 0, "counts": []} for name in STORES}
    with tempfile.TemporaryDirectory() as work, \
            fresh_store(BenchSettings("bench-default", {"dedup": STORES["default"],
                                                        "spark": {"local_cache_dir": f"{work}/default"}})) as default, \
            fresh_store(BenchSettings("bench-ordered", {"dedup": STORES["ordered"],
                                                        "spark": {"local_cache_dir": f"{work}/ordered"}})) as ordered:
        places = {"default": default, "ordered": ordered}
        files = {}
        for name, (server, _, _) in places.items():
            settings = BenchSettings(f"bench-{name}", {"dedup": STORES[name],
                                                       "spark": {"local_cache_dir": f"{work}/{name}"}})
            files[name] = settings.write_file(Path(work) / f"{name}.toml", server.endpoint_url)
        for number in range(1, args.history + args.runs + 1):
            lines = batch_lines(number, args.events, now)
            for name in (STORES if number % 2 else reversed(STORES)):
                server, config, store = places[name]
                prefix = f"landing/b{number:03d}/"
                upload_lines(store, prefix, lines)
                done, _, counts = run_batch(files[name], f"b{number:03d}", prefix, server.pid)
                results[name]["entries"] += counts["cache_keys_written"]
                if number > args.history:
                    results[name]["walls"].append(done.wall_seconds)
                    results[name]["counts"].append(counts)
                print(f"{name} b{number:03d}: {done.wall_seconds:.2f}s; {counts}", flush=True)
        for name, (_, config, store) in places.items():
            size, objects = cache_bytes(store, config)
            results[name].update(cache_bytes=size, cache_objects=objects,
                                 bytes_per_entry=round(size / max(1, results[name]["entries"]), 2),
                                 median_wall_seconds=statistics.median(results[name]["walls"]))
    ratios = [o / d for d, o in zip(results["default"]["walls"], results["ordered"]["walls"], strict=True)]
    summary = {"events": args.events, "history": args.history, "runs": args.runs, "stores": STORES,
               "results": results, "wall_ratio_ordered_to_default": round(statistics.median(ratios), 3)}
    out = write_result(args.out, summary)
    for name in STORES:
        r = results[name]
        print(f"{name:>8}: median {r['median_wall_seconds']:.2f}s a batch; {r['bytes_per_entry']} bytes a cache "
              f"entry ({r['cache_bytes']:,} bytes in {r['cache_objects']} segments for {r['entries']:,} entries)")
    print(f"ordered / default wall time, median of the rounds' ratios: {summary['wall_ratio_ordered_to_default']}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
