"""What every line costs in Python under the fingerprint's definition, and what the compiled core
costs instead, one process, no Spark:

    .venv/bin/python bench/parse_floor.py [--lines 32768] [--runs 3]

A line is parsed (`orjson.loads`), and its fingerprint is by definition a 64-bit hash of its
canonical JSON (keys sorted at every depth: `orjson.dumps` with OPT_SORT_KEYS): XXH3-64 on a cache
created by this release, BLAKE2b-64 on an older one. The Python fast path also re-serialises each
line to vouch that it holds no repeated key or other spelling the reference would read
differently. Each step runs alone, in a tight loop over the main workload's ~300 B events
(canonical UUIDs, ISO-8601), the garbage collector off as the parser runs it; beside them,
`parse_lines` whole as shipped (the compiled core where it is built), `parse_lines` with the core
switched off ([events] compiled_parser = false: the Python paths alone) and the core's scan alone.
The sum of the required steps is a floor a Python-side parse that keeps this fingerprint cannot go
under on this host; the compiled core is how the product goes under it.
"""
from __future__ import annotations

import argparse
import gc
import hashlib
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

import xxhash  # noqa: E402
from parse_shapes import SHAPES, rules_for, shape_lines  # noqa: E402
from report import print_parse_floor  # noqa: E402

from eventdedup.keys import FINGERPRINT_BYTES  # noqa: E402
from eventdedup.parse import native_core  # noqa: E402
from eventdedup.parse.input_lines import split_input  # noqa: E402
from eventdedup.parse.object_parser import parse_lines  # noqa: E402

# The steps the definitions require of a Python parse on a new cache, in the order a line takes them.
REQUIRED_STEPS = ("loads", "canonical_dump", "xxh3")


def measure_floor(count: int, runs: int, seed: int = 20261122,
                  timer: Callable[[], float] = time.perf_counter) -> dict:
    """Median microseconds a line for each step, and for `parse_lines` whole."""
    shape = SHAPES[0]
    rules = rules_for(shape)
    lines = shape_lines(shape, count, seed)
    events = [orjson.loads(line) for line in lines]
    canonical = [orjson.dumps(event, option=orjson.OPT_SORT_KEYS) for event in events]  # the hashes' input
    split = split_input(b"\n".join(lines) + b"\n", rules.max_object_bytes)
    python_only = replace(rules, compiled=False)
    steps: dict[str, Callable[[], object]] = {
        "loads": lambda: _loads(lines),
        "vouching_dump": lambda: _vouch(events, lines),
        "canonical_dump": lambda: _canonical_dumps(events),
        "blake2b": lambda: _blake2b(canonical),
        "xxh3": lambda: _xxh3(canonical),
        "parse_lines": lambda: parse_lines(split, 0, rules),
        "parse_lines_python": lambda: parse_lines(split, 0, python_only),
    }
    if native_core.supports(rules):
        steps["native_scan"] = lambda: native_core.scan(split.pieces, rules)
    seconds: dict[str, list[float]] = {name: [] for name in steps}
    collecting = gc.isenabled()
    gc.disable()
    try:
        for _ in range(runs):  # the steps take turns, so a slower moment of the host hits each
            for name, step in steps.items():
                started = timer()
                step()
                seconds[name].append(timer() - started)
    finally:
        if collecting:
            gc.enable()
    micros = {name: statistics.median(values) / count * 1e6 for name, values in seconds.items()}
    return {"shape": shape.name, "lines": count, "microseconds_per_line": micros,
            "required_microseconds_per_line": sum(micros[name] for name in REQUIRED_STEPS)}


# Each step is its own tight loop, as the parser runs it, and returns its last output, so a
# test can hold it to what the product computes without the loop keeping every output alive.
def _loads(lines: list[bytes]) -> object:
    loads, event = orjson.loads, None
    for line in lines:
        event = loads(line)
    return event


def _canonical_dumps(events: list[dict]) -> bytes:
    dumps, sort_keys, payload = orjson.dumps, orjson.OPT_SORT_KEYS, b""
    for event in events:
        payload = dumps(event, option=sort_keys)
    return payload


def _vouch(events: list[dict], lines: list[bytes]) -> None:
    dumps = orjson.dumps
    for event, line in zip(events, lines, strict=True):
        if dumps(event) != line:
            raise AssertionError("a bench line is not orjson's compact spelling")


def _blake2b(payloads: list[bytes]) -> bytes:
    blank = hashlib.blake2b(digest_size=FINGERPRINT_BYTES)  # as fingerprints.py hashes: copies of a blank state
    digest = b""
    for payload in payloads:
        hasher = blank.copy()
        hasher.update(payload)
        digest = hasher.digest()
    return digest


def _xxh3(payloads: list[bytes]) -> int:
    digest, hash_of = 0, xxhash.xxh3_64_intdigest
    for payload in payloads:
        digest = hash_of(payload)
    return digest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=32_768)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print_parse_floor(measure_floor(args.lines, args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
