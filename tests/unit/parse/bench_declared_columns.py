"""Parse-stage throughput with and without ten declared columns of mixed types (issue 53), for
docs/performance.md ("Declared columns (issue 53)"); not a test (pytest collects test_* only).

    .venv/bin/python -m tests.unit.parse.bench_declared_columns [--lines 200000] [--rounds 5]

Lines are bench.workload's event_line shape plus the fields the columns read. Three variants are
parsed by parse_object (the compiled core where it is built) in the same run, alternating: without
columns, with the ten columns, and with them extracted per line by the reference (what ran before
columns_fast); the median of each is reported, in lines per CPU second of the process."""
from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from eventdedup.column_types import DeclaredColumn
from eventdedup.config import config_from_mapping
from eventdedup.parse import native_core, object_parser
from eventdedup.parse.columns import declared_arrays, event_columns
from eventdedup.parse.columns_fast import line_columns
from eventdedup.parse.event_time import InvalidEvent
from eventdedup.parse.object_parser import parse_object
from eventdedup.parse.rules import ParseRules

NOW = datetime(2026, 11, 22, 6, tzinfo=timezone.utc)
COLUMNS = {"user_id": "string", "n": "long", "ratio": "double", "ok": "boolean", "client_time": "timestamp",
           "amount": "decimal(18,2)", "os": {"path": "context.device.os", "type": "string"},
           "tags": "array<string>", "geo": "struct<lat:double,lon:double>", "props": "json"}
PAD = "x" * 150


def rules(columns: dict[str, object]) -> ParseRules:
    config = config_from_mapping({"s3": {"bucket": "events"}, "table": {"columns": columns}}, source="bench")
    return ParseRules.for_batch(config, NOW, fingerprint_hash="xxh3-64")


def body(count: int, seed: int = 7) -> bytes:
    rng = np.random.default_rng(seed)
    base = int(datetime(2026, 11, 21, tzinfo=timezone.utc).timestamp())
    lines = []
    for i in range(count):
        uid = f"{int(rng.integers(0, 2**62)):032x}{i:04x}"
        created = datetime.fromtimestamp(base + int(rng.integers(0, 86_400)), timezone.utc).isoformat()
        lines.append(
            f'{{"event_id":"{uid[:8]}-{uid[8:12]}-4{uid[13:16]}-8{uid[17:20]}-{uid[20:32]}","created_at":"{created}",'
            f'"user_id":"u{i % 1_000_000}","type":"page_view","props":{{"path":"/p/{i % 1000}","pad":"{PAD}"}},'
            f'"n":{i * 7919},"ratio":{(i % 997) / 8},"ok":{"true" if i % 3 else "false"},'
            f'"client_time":"{created}","amount":{(i % 100_000) / 100},'
            f'"context":{{"device":{{"os":"{("ios", "android", "web")[i % 3]}"}}}},'
            f'"tags":["t{i % 5}","x"],"geo":{{"lat":{(i % 180) - 89.5},"lon":{(i % 360) - 179.25}}}}}')
    return ("\n".join(lines) + "\n").encode()


def per_line(lines: Sequence[Any], columns: Sequence[DeclaredColumn],
             quarantine: bool) -> tuple[dict[str, pa.Array], list[int]]:
    """line_columns by the reference, one line at a time (the path before columns_fast)."""
    values, mismatched, refused = [], [], []
    for row, line in enumerate(lines):
        try:
            declared, misfits = event_columns(orjson.loads(line), columns, quarantine)
        except InvalidEvent:
            refused.append(row)
            continue
        values.append(declared)
        mismatched.append(misfits)
    return declared_arrays(columns, values, mismatched), refused


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    text = body(args.lines)
    plain, declared = rules({}), rules(COLUMNS)
    assert native_core.supports(declared), native_core.why_not()
    check = parse_object(text, 0, declared)
    assert not check.bad_raw and check.table.num_rows == args.lines
    assert check.table.column("mismatched").null_count == args.lines, "the bench's lines should all fit"
    rates: dict[str, list[float]] = {"without": [], "with": [], "per line": []}
    for _ in range(args.rounds):
        for name, chosen, extract in (("without", plain, line_columns), ("with", declared, line_columns),
                                      ("per line", declared, per_line)):
            object_parser.line_columns = extract  # type: ignore[assignment]
            try:
                start = time.process_time()  # CPU seconds: the machine is shared, its wall clock noisy
                parsed = parse_object(text, 0, chosen)
                rates[name].append(args.lines / (time.process_time() - start))
            finally:
                object_parser.line_columns = line_columns  # type: ignore[assignment]
            if name == "per line":
                assert parsed.table.equals(check.table)
    median = {name: statistics.median(values) for name, values in rates.items()}
    without = median["without"]
    print(f"{args.lines} lines of {len(text) // args.lines} bytes, {args.rounds} rounds, median lines per CPU second: "
          f"without columns {without:,.0f}; with ten columns {median['with']:,.0f} "
          f"({median['with'] / without:.1%}); per line, the reference {median['per line']:,.0f} "
          f"({median['per line'] / without:.1%})")


if __name__ == "__main__":
    main()
