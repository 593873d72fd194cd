"""The parse of the id and time shapes real streams send, one process, no Spark:

    .venv/bin/python bench/parse_shapes.py [--lines 32768] [--runs 3]

The main workload's events all have canonical UUID ids and strict ISO-8601 times, the shapes the
batch parser converts natively from the start; a stream of integer ids and epoch milliseconds,
or upper-case ids under `normalize`, takes other paths, and a shape the fast path does not know
costs ~4x a line on the per-line reference (`parse_event`). Each shape here is the workload's
~300 B event with only the id and time changed, parsed by `parse_lines` (what a read task runs)
and by the reference line by line, the peer of the same run; both outputs are compared.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import print_parse_shapes  # noqa: E402

from eventdedup.config import NEW_STORE_FINGERPRINT, config_from_mapping  # noqa: E402
from eventdedup.parse.event_parser import InvalidEvent, parse_event  # noqa: E402
from eventdedup.parse.input_lines import split_input  # noqa: E402
from eventdedup.parse.object_parser import parse_lines  # noqa: E402
from eventdedup.parse.rules import ParseRules  # noqa: E402
from eventdedup.tables import make_seq  # noqa: E402

AS_OF = datetime(2026, 11, 22, 12, tzinfo=timezone.utc)
PAD = "x" * 150  # as the main workload's events: ~300 bytes


@dataclass(frozen=True)
class Shape:
    name: str
    event_id: Callable[[int, np.random.Generator], object]
    created_at: Callable[[int, datetime], object]
    dedup: dict


def _uuid(n: int, rng: np.random.Generator) -> str:
    return str(uuid.UUID(bytes=rng.bytes(16), version=4))


def _ulid(n: int, rng: np.random.Generator) -> str:
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    return "".join(alphabet[i] for i in rng.integers(0, 32, 26))


SHAPES = [
    Shape("canonical UUID, ISO-8601 +00:00 (the main workload)", _uuid, lambda n, t: t.isoformat(), {}),
    Shape("integer id, epoch milliseconds", lambda n, rng: 10**12 + n,
          lambda n, t: int(t.timestamp() * 1000), {}),
    Shape("ULID, epoch seconds with a fraction", _ulid, lambda n, t: t.timestamp(), {}),
    Shape("upper-case UUID, ISO-8601 nanoseconds", lambda n, rng: _uuid(n, rng).upper(),
          lambda n, t: t.strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z", {}),
    Shape("padded mixed-case id under normalize trim+lower, offset +0000", lambda n, rng: f" Evt-{n:X} ",
          lambda n, t: t.strftime("%Y-%m-%dT%H:%M:%S+0000"), {"normalize": ["trim", "lower"]}),
    Shape("canonical UUID, ISO-8601 with a space for the T", _uuid,
          lambda n, t: t.isoformat(sep=" "), {}),
    Shape("composite key (id, user)", _uuid, lambda n, t: t.isoformat(), {"key_fields": ["event_id", "user_id"]}),
    # Keys still derived per event in Python (README, Performance): the cliff left, measured so it
    # stays seen.
    Shape("non-ASCII id under normalize lower: key per event", lambda n, rng: f"Évt-{n}",
          lambda n, t: t.isoformat(), {"normalize": ["lower"]}),
]


def shape_lines(shape: Shape, count: int, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    start = AS_OF - timedelta(hours=2)
    lines = []
    for n in range(count):
        moment = start + timedelta(microseconds=int(rng.integers(0, 7_200_000_000)))
        event = {"event_id": shape.event_id(n, rng), "created_at": shape.created_at(n, moment),
                 "user_id": f"u{n % 977}", "type": "page_view", "props": {"path": f"/p/{n % 1000}", "pad": PAD}}
        lines.append(json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode())
    return lines


def rules_for(shape: Shape) -> ParseRules:
    config = config_from_mapping({"s3": {"bucket": "bench"}, "dedup": shape.dedup})
    return ParseRules.for_batch(config, AS_OF, fingerprint_hash=NEW_STORE_FINGERPRINT)


def measure_shape(shape: Shape, count: int, runs: int, seed: int) -> dict:
    rules = rules_for(shape)
    lines = shape_lines(shape, count, seed)
    split = split_input(b"\n".join(lines) + b"\n", rules.max_object_bytes)
    parse_lines(split_input(b"\n".join(lines[:1000]), rules.max_object_bytes), 0, rules)  # warm: regexes, imports
    fast_seconds, reference_seconds = [], []
    for _ in range(runs):  # the two take turns, so a slower moment of the host hits both
        started = time.perf_counter()
        parsed = parse_lines(split, 0, rules)
        fast_seconds.append(time.perf_counter() - started)
        started = time.perf_counter()
        expected = [_reference_row(number, line, rules) for number, line in enumerate(lines, 1)]
        reference_seconds.append(time.perf_counter() - started)
    table = parsed.table
    got = list(zip(*(table.column(name).to_pylist() for name in ("seq", "event_id", "key_digest", "fingerprint")),
                   table.column("event_time").cast("int64").to_pylist(),
                   *(table.column(name).to_pylist() for name in ("raw", "order_key")), strict=True))
    fast_us, reference_us = (statistics.median(s) / count * 1e6 for s in (fast_seconds, reference_seconds))
    return {"shape": shape.name, "lines": count, "quarantined": len(parsed.bad_raw),
            "microseconds_per_line": fast_us, "reference_microseconds_per_line": reference_us,
            "reference_ratio": reference_us / fast_us, "exact": got == expected and not parsed.bad_raw}


def _reference_row(number: int, line: bytes, rules: ParseRules) -> tuple | None:
    """The row parse_lines must produce for this line (input 0), whole."""
    try:
        event = parse_event(line, rules)
    except InvalidEvent:
        return None
    return (make_seq(0, number), event.event_id, event.digest, event.fingerprint, event.time_us, event.raw,
            event.order_key)


def parse_shapes(count: int, runs: int, seed: int = 20261122) -> list[dict]:
    return [measure_shape(shape, count, runs, seed) for shape in SHAPES]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=32_768)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    rows = parse_shapes(args.lines, args.runs)
    print_parse_shapes(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(row["exact"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
