"""What the id guard costs and how often it is wrong, measured (no S3, no Spark):

    .venv/bin/python bench/guard_cost.py [--ids 100000,1000000,4000000] [--probes 1000000]

Per guard size (ids of one arrival day in one bucket): bytes per id on S3, the false-positive
rate of a probe of an id it does not hold (each costs one segment load, never a drop), and the
time to probe, to decode and to add a 5-minute batch's ids (the copy-forward every batch pays).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "include"))

from eventdedup.cache.guard import IdGuard, decode_guard, encode_guard  # noqa: E402
from eventdedup.keys import DIGEST_DTYPE  # noqa: E402


def digests(count: int, seed: int) -> np.ndarray:
    return np.frombuffer(np.random.default_rng(seed).bytes(16 * count), DIGEST_DTYPE).copy()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ids", default="100000,1000000,4000000")
    parser.add_argument("--probes", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=20_000, help="ids one batch adds to the guard")
    args = parser.parse_args()
    probes = digests(args.probes, 99)
    print(f"{'ids':>10} {'bytes/id':>9} {'false pos.':>11} {'expected':>9} {'probe ms':>9} {'decode ms':>10} "
          f"{'add batch ms':>13}")
    for count in [int(n) for n in args.ids.split(",")]:
        hours = np.random.default_rng(count).integers(490_000, 490_030, size=count)
        guard = IdGuard.empty().with_ids(digests(count, count), hours)
        data = encode_guard(guard)
        started = time.perf_counter()
        hits, _ = guard.candidate_hours(probes)
        probe_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        decode_guard(data, "g")
        decode_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        guard.with_ids(digests(args.batch, 7), np.full(args.batch, 490_031))
        add_ms = (time.perf_counter() - started) * 1000
        print(f"{count:>10,} {len(data) / count:>9.2f} {len(np.unique(hits)) / args.probes:>11.2e} "
              f"{count / 2**32:>9.2e} {probe_ms:>9.1f} {decode_ms:>10.1f} {add_ms:>13.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
