"""What every line costs in Python under the fingerprint's definition, and what the compiled core
costs instead, one process, no Spark:

    python -m bench.parse_floor [--lines 32768] [--runs 3]

A line is parsed (`orjson.loads`) and fingerprinted by a 64-bit hash of its canonical JSON (keys
sorted at every depth): XXH3-64 on a cache created by this release, BLAKE2b-64 on an older one. The
Python fast path also re-serialises each line to vouch that it holds nothing the reference would
read differently. Each step runs alone in a tight loop over the main workload's events, the garbage
collector off as the parser runs it, the steps taking turns; beside them `parse_lines` whole as
shipped, with the compiled core off ([events] compiled_parser = false), and the core's scan alone.
The required steps' sum is a floor no Python-side parse keeping this fingerprint goes under.
"""
from __future__ import annotations

import argparse
import gc
import hashlib
import statistics
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import orjson
import xxhash

from bench.summary import print_parse_floor
from bench.workload import HOUR_US, WorkloadSpec, event_line, id_bytes, random_ids
from eventdedup.config import NEW_STORE_FINGERPRINT, config_from_mapping
from eventdedup.keys import FINGERPRINT_BYTES
from eventdedup.parse import native_core
from eventdedup.parse.input_lines import split_input
from eventdedup.parse.object_parser import parse_lines
from eventdedup.parse.rules import ParseRules

REQUIRED_STEPS = ("loads", "canonical_dump", "xxh3")  # a new cache's definition, in the order a line takes them
SPEC = WorkloadSpec()


def new_cache_rules() -> ParseRules:
    config = config_from_mapping({"s3": {"bucket": "bench"}})
    return ParseRules.for_batch(config, SPEC.anchor, fingerprint_hash=NEW_STORE_FINGERPRINT)


def main_shape_lines(count: int, seed: int) -> list[bytes]:
    """The main workload's events (canonical UUIDs, ISO-8601 times, ~300 B) over its last two hours."""
    rng = np.random.default_rng(seed)
    ids, times = random_ids(rng, count), rng.integers(SPEC.anchor_us - 2 * HOUR_US, SPEC.anchor_us, count)
    return [event_line(id_bytes(ids, i), int(times[i])) for i in range(count)]


def measure_floor(count: int, runs: int, seed: int = 20261122, timer: Callable[[], float] = time.perf_counter) -> dict:
    """Median microseconds a line for each step, and for `parse_lines` whole."""
    rules = new_cache_rules()
    lines = main_shape_lines(count, seed)
    events = [orjson.loads(line) for line in lines]
    canonical = [orjson.dumps(event, option=orjson.OPT_SORT_KEYS) for event in events]  # the hashes' input
    split = split_input(b"\n".join(lines) + b"\n", rules.max_object_bytes)
    steps: dict[str, Callable[[], object]] = {
        "loads": lambda: _loads(lines), "vouching_dump": lambda: _vouch(events, lines),
        "canonical_dump": lambda: _canonical_dumps(events), "blake2b": lambda: _blake2b(canonical),
        "xxh3": lambda: _xxh3(canonical), "parse_lines": lambda: parse_lines(split, 0, rules),
        "parse_lines_python": lambda: parse_lines(split, 0, replace(rules, compiled=False))}
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
    return {"shape": "canonical UUID, ISO-8601 +00:00 (the main workload)", "lines": count,
            "microseconds_per_line": micros, "required_microseconds_per_line": sum(micros[s] for s in REQUIRED_STEPS)}


# Each step is its own tight loop, as the parser runs it, and returns its last output, so a test can
# hold it to what the product computes without the loop keeping every output alive.
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
    blank, digest = hashlib.blake2b(digest_size=FINGERPRINT_BYTES), b""  # copies of a blank state, as the parser
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


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=32_768)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print_parse_floor(measure_floor(args.lines, args.runs))
