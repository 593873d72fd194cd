"""`make bench-columns`: what ten declared columns cost a batch (issue 53), against the same batch
without them, in the same run; and `eventdedup infer-columns` on the same workload.

    python -m bench.columns [--events 500000] [--history 2] [--runs 4] [--parse-lines 200000]

Two stores on their own embedded S3 servers with the shipped defaults, one with `[table.columns]`
declaring ten columns of mixed types (COLUMNS: string, long, double, boolean, timestamp,
decimal(18,2), a nested path, array<string>, struct<lat:double,lon:double>, json), one without.
Both get the same lines (LINES: bench.workload's event_line shape plus the fields the columns
read, ~500 bytes). Every batch of both is an `eventdedup run-batch` process on the history the
earlier ones committed (the real path, warm local copies), the two stores taking turns so that
drift falls on both alike: --history batches first, then per round a one-event batch and a
batch of --events, the order of the stores flipping each round and within it (A one, B one, B
batch, A batch; then B, A, A, B), so that each store's one-event batch follows a big batch in
as many rounds (a process right after a big batch runs slower). The marginal throughput is
--events over (the batch's wall time - the one event's), per round; reported are the medians,
the median of the rounds' ratios (with / without: the issue's target is >= 0.8), and the ratio
of the marginals of each store's median walls. And the marginal CPU (every process of the
run-batch and the store's, medians of the batch less the one event), which a machine shared
with other work disturbs far less than wall time: without / with is the throughput ratio on
cores the batches have to themselves. Then `infer-columns` over one batch's landing object:
its block, which must declare every field the lines carry. And the stages alone, in this process,
lines per CPU second (column_stages): the parse without columns (as a batch parses under
on_mismatch = "null": the values are read after the dedup, for the output rows only), the parse
under on_mismatch = "quarantine" (it checks every value), and reading the ten columns from the
output rows' raw lines (columns_of_raw) by the compiled core and by the reference one line at a
time (the path before the core extracted them). Writes bench/results/columns.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from bench import write_result
from bench.commands import BIN, run_batch
from bench.stores import BenchSettings, fresh_store, upload_lines
from eventdedup.config import config_from_mapping
from eventdedup.parse import native_core
from eventdedup.parse.columns_fast import columns_of_raw
from eventdedup.parse.object_parser import parse_object
from eventdedup.parse.rules import ParseRules
from eventdedup_dev.local_s3 import use_local_credentials

COLUMNS: dict[str, object] = {
    "user_id": "string", "n": "long", "ratio": "double", "ok": "boolean", "client_time": "timestamp",
    "amount": "decimal(18,2)", "os": {"path": "context.device.os", "type": "string"}, "tags": "array<string>",
    "geo": "struct<lat:double,lon:double>", "props": "json"}
PAD = "x" * 150


def lines_of(count: int, start: datetime, seed: int = 7, first: int = 0) -> list[bytes]:
    """`count` events from `start` on (within an hour), numbered from `first`: each carries the
    fields COLUMNS read, every value fitting its column."""
    rng = np.random.default_rng(seed)
    base = int(start.timestamp())
    lines = []
    for i in range(first, first + count):
        uid = f"{int(rng.integers(0, 2**62)):032x}{i:04x}"
        created = datetime.fromtimestamp(base + int(rng.integers(0, 3_000)), timezone.utc).isoformat()
        lines.append((
            f'{{"event_id":"{uid[:8]}-{uid[8:12]}-4{uid[13:16]}-8{uid[17:20]}-{uid[20:32]}","created_at":"{created}",'
            f'"user_id":"u{i % 1_000_000}","type":"page_view","props":{{"path":"/p/{i % 1000}","pad":"{PAD}"}},'
            f'"n":{i * 7919},"ratio":{(i % 997) / 8},"ok":{"true" if i % 3 else "false"},'
            f'"client_time":"{created}","amount":{(i % 100_000) / 100},'
            f'"context":{{"device":{{"os":"{("ios", "android", "web")[i % 3]}"}}}},'
            f'"tags":["t{i % 5}","x"],"geo":{{"lat":{(i % 180) - 89.5},"lon":{(i % 360) - 179.25}}}}}').encode())
    return lines


def columns_block(columns: dict[str, object]) -> str:
    """COLUMNS as a configuration file's [table.columns] block."""
    lines = ["[table.columns]"]
    for name, spec in columns.items():
        if isinstance(spec, dict):
            lines.append(f"{name} = {{ " + ", ".join(f"{key} = {json.dumps(value)}" for key, value in spec.items())
                         + " }")
        else:
            lines.append(f"{name} = {json.dumps(spec)}")
    return "\n".join(lines) + "\n"


def infer_columns(config_file: Path, prefix: str) -> dict[str, object]:
    """`eventdedup infer-columns` over a landing prefix: its block, loaded back."""
    run = subprocess.run([str(BIN / "eventdedup"), "infer-columns", "--config", str(config_file), "--input-prefix",
                          prefix], capture_output=True, text=True, check=True)
    block = run.stdout
    return {"block": block, "columns": tomllib.loads(block)["table"]["columns"]}


def parse_rules(columns: dict[str, object], now: datetime, on_mismatch: str = "null") -> ParseRules:
    config = config_from_mapping({"s3": {"bucket": "events"}, "table": {"columns": columns, "on_mismatch": on_mismatch}},
                                 source="bench")
    return ParseRules.for_batch(config, now, fingerprint_hash="xxh3-64")


def column_stages(count: int, rounds: int) -> dict[str, float]:
    """Median lines per CPU second (this process's: a shared machine's wall clock is noise here) of
    parse_object over `count` lines without columns and under on_mismatch = "quarantine" with
    COLUMNS, and of columns_of_raw over the parsed rows' raw lines by the core and by the
    reference; the four alternate."""
    start = datetime(2026, 11, 22, 5, tzinfo=timezone.utc)
    text = b"\n".join(lines_of(count, start)) + b"\n"
    plain = parse_rules({}, start + timedelta(hours=1))
    checked = parse_rules(COLUMNS, start + timedelta(hours=1), "quarantine")
    assert native_core.supports(checked), native_core.why_not()
    parsed = parse_object(text, 0, plain)
    assert not parsed.bad_raw and parsed.table.num_rows == count
    raw = parsed.table.column("raw").combine_chunks()
    expected = columns_of_raw(raw, checked.columns)
    assert expected["mismatched"].null_count == count, "the bench's lines should all fit"
    steps: dict[str, Callable[[], Any]] = {
        "parse": lambda: parse_object(text, 0, plain),
        "parse, on_mismatch = quarantine": lambda: parse_object(text, 0, checked),
        "columns by the core": lambda: columns_of_raw(raw, checked.columns),
        "columns by the reference per line": lambda: columns_of_raw(raw, checked.columns, compiled=False),
    }
    rates: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            began = time.process_time()
            done = step()
            rates[name].append(count / (time.process_time() - began))
            if name.startswith("parse"):
                assert done.table.equals(parsed.table), name
            else:
                assert all(done[column].equals(array) for column, array in expected.items()), name
    return {name: round(statistics.median(values)) for name, values in rates.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=500_000, help="events in each measured batch")
    parser.add_argument("--history", type=int, default=2, help="batches committed before the measured ones")
    parser.add_argument("--runs", type=int, default=4, help="measured rounds per store (even: the order is ABBA)")
    parser.add_argument("--parse-lines", type=int, default=200_000, help="lines of the parse stage's figure (0: none)")
    parser.add_argument("--out", default="columns")
    args = parser.parse_args()
    use_local_credentials()
    start = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    stores = ("without", "with")
    walls: dict[str, dict[str, list[float]]] = {name: {"one": [], "batch": []} for name in stores}
    cpus: dict[str, dict[str, list[float]]] = {name: {"one": [], "batch": []} for name in stores}
    counts: dict[str, list[dict]] = {name: [] for name in stores}
    with tempfile.TemporaryDirectory() as work, \
            fresh_store(BenchSettings("bench-without")) as without, fresh_store(BenchSettings("bench-with")) as with_:
        places = {"without": without, "with": with_}
        files = {}
        for name, (server, _, _) in places.items():
            settings = BenchSettings(f"bench-{name}", {"spark": {"local_cache_dir": f"{work}/{name}"}})
            path = settings.write_file(Path(work) / f"{name}.toml", server.endpoint_url)
            if name == "with":
                path.write_text(path.read_text() + columns_block(COLUMNS))
            files[name] = path
        batches = [("history", args.events, stores)] * args.history
        for round_number in range(args.runs):  # ABBA: each store's one event follows a big batch as often
            first_store, second_store = stores if round_number % 2 == 0 else stores[::-1]
            batches += [("one", 1, (first_store, second_store)), ("batch", args.events, (second_store, first_store))]
        first = 0
        for number, (kind, events, order) in enumerate(batches, start=1):
            lines = lines_of(events, start, seed=number, first=first)
            first += events
            for name in order:
                server, _, store = places[name]
                prefix = f"landing/b{number:03d}/"
                upload_lines(store, prefix, lines)
                done, _, batch_counts = run_batch(files[name], f"b{number:03d}", prefix, server.pid)
                assert batch_counts["output_rows"] == events, batch_counts  # every event new, every one output
                if kind != "history":
                    walls[name][kind].append(done.wall_seconds)
                    cpus[name][kind].append(done.cpu_seconds["total"])
                    counts[name].append(batch_counts)
                print(f"{name} b{number:03d} ({kind}, {events:,} events): {done.wall_seconds:.2f}s", flush=True)
        inferred = infer_columns(files["without"], "landing/b001/")
    results = {}
    for name in stores:
        marginal_cpu = statistics.median(cpus[name]["batch"]) - statistics.median(cpus[name]["one"])
        marginal = [args.events / (batch - one) for one, batch in zip(walls[name]["one"], walls[name]["batch"],
                                                                       strict=True)]
        results[name] = {"one_event_walls": walls[name]["one"], "batch_walls": walls[name]["batch"],
                         "marginal_events_per_second": marginal,
                         "median_marginal_events_per_second": round(statistics.median(marginal)),
                         "one_event_cpu_seconds": cpus[name]["one"], "batch_cpu_seconds": cpus[name]["batch"],
                         "marginal_cpu_seconds_per_million": round(marginal_cpu * 1_000_000 / args.events, 2),
                         "counts": counts[name]}
    ratios = [w / o for o, w in zip(results["without"]["marginal_events_per_second"],
                                    results["with"]["marginal_events_per_second"], strict=True)]
    of_medians = {name: args.events / (statistics.median(walls[name]["batch"]) - statistics.median(walls[name]["one"]))
                  for name in stores}
    summary = {"events": args.events, "history": args.history, "runs": args.runs, "columns": COLUMNS,
               "results": results, "marginal_ratio_with_to_without": round(statistics.median(ratios), 3),
               "marginal_ratio_of_median_walls": round(of_medians["with"] / of_medians["without"], 3),
               "marginal_cpu_ratio_without_to_with": round(results["without"]["marginal_cpu_seconds_per_million"]
                                                           / results["with"]["marginal_cpu_seconds_per_million"], 3),
               "target_ratio": 0.8, "infer_columns": inferred}
    if args.parse_lines:
        summary["stage_lines_per_cpu_second"] = column_stages(args.parse_lines, args.runs)
    out = write_result(args.out, summary)
    for name in stores:
        r = results[name]
        print(f"{name:>8} columns: one event {statistics.median(r['one_event_walls']):.2f}s, {args.events:,} events "
              f"{statistics.median(r['batch_walls']):.2f}s; marginal {r['median_marginal_events_per_second']:,} events/s")
    print(f"with / without, median of the rounds' marginal ratios: {summary['marginal_ratio_with_to_without']} "
          f"(target >= 0.8); of the stores' median walls: {summary['marginal_ratio_of_median_walls']}")
    print(f"marginal CPU (every process of run-batch and the store), core-seconds a million events: without "
          f"{results['without']['marginal_cpu_seconds_per_million']}, with {results['with']['marginal_cpu_seconds_per_million']}"
          f": throughput at equal CPU {summary['marginal_cpu_ratio_without_to_with']}")
    if args.parse_lines:
        stage = summary["stage_lines_per_cpu_second"]
        parse = stage["parse"]
        print(f"lines per CPU second: the parse {parse:,}; under on_mismatch = quarantine "
              f"{stage['parse, on_mismatch = quarantine']:,}; the ten columns of output rows by the core "
              f"{stage['columns by the core']:,} (parse and columns: "
              f"{1 / (1 + parse / stage['columns by the core']):.1%} of the parse's rate), by the reference per line "
              f"{stage['columns by the reference per line']:,}")
    print(f"infer-columns over b001:\n{inferred['block']}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
