"""bench.reads' figures from its result document alone, so that a result can be read again:
`python -m bench.reads_summary bench/results/reads-latest.json`."""
from __future__ import annotations

import json
import sys
from pathlib import Path

# Issue 57's targets: a batch's GET bytes (its input aside) after six more days of history, over
# those after one; late events' share of their hour's segment bytes.
TARGET_GROWTH = {"id": 1.3, "event": 2.0}
TARGET_LATE_SHARE = 0.10
READ_KINDS = ("segments", "guards", "state", "delta log", "output")
MODES = ("cold", "warm")


def read_bytes(run: dict) -> dict[str, int]:
    """GET (and listing) bytes by kind, the Delta table's log apart from the rest of the output, and
    the total but for the batch's own input."""
    kinds, log = run["traffic"], run["state_parts"]["delta log"]["read_bytes"]
    out = {kind: kinds[kind]["read_bytes"] for kind in ("segments", "guards", "state")}
    out.update({"delta log": log, "output": kinds["output"]["read_bytes"] - log})
    return {**out, "total": sum(out.values()), "input": kinds["input"]["read_bytes"]}


def state_bytes(run: dict) -> dict[str, int]:
    return {part: figures["read_bytes"] for part, figures in run["state_parts"].items()
            if part != "not state" and figures["read_bytes"]}


def summarise_reads(result: dict) -> None:
    """Per partition_time: each probe's bytes, the growth from the first day to the last per mode, the
    late events' share; each against its target."""
    first, last = (f"{days}d" for days in (result["days"][0], result["days"][-1]))
    for partition_time, measured in result["partition_times"].items():
        probes = {name: {"read_bytes": read_bytes(run), "state_bytes": state_bytes(run)}
                  for name, run in measured["probes"].items()}
        growth = {mode: probes[f"{last} {mode}"]["read_bytes"]["total"]
                  / max(probes[f"{first} {mode}"]["read_bytes"]["total"], 1) for mode in MODES}
        target = TARGET_GROWTH.get(partition_time)
        late = measured["late"]
        share = late["hour_bytes_read"] / max(late["hour_segment_bytes"], 1)
        measured["summary"] = {
            "probes": probes, "growth": growth, "growth_target": target,
            "growth_met": {mode: target is not None and value <= target for mode, value in growth.items()},
            "late_share": share, "late_share_target": TARGET_LATE_SHARE, "late_met": share <= TARGET_LATE_SHARE,
            "late_read_bytes": read_bytes(late)}


def mib(value: float) -> str:
    return f"{value / 2**20:,.2f}"


def verdict(met: bool) -> str:
    return "met" if met else "NOT MET"


def print_reads(result: dict) -> None:
    spec = result["spec"]
    print(f"\nhistory: {spec['hourly_events']:,} events an hour, a batch every {spec['batch_hours']} h, 1 % stragglers; "
          f"a dense old hour of {spec['dense_hour_events']:,}; probe {spec['probe_events']:,} events; "
          f"{result['seconds'] / 60:.1f} min in all")
    for partition_time, measured in result["partition_times"].items():
        summary = measured["summary"]
        history = "; ".join(f"{span}: {h['batches']} batches, {h['events']:,} events committed in {h['seconds']:.0f}s"
                            for span, h in measured["history"].items())
        print(f"\npartition_time = {partition_time!r} ({history})")
        print(f"  {'probe, GET MiB':<16}" + "".join(f"{kind:>11}" for kind in (*READ_KINDS, "total")) + f"{'input':>11}"
              + "   state by part")
        for name, probe in summary["probes"].items():
            figures = probe["read_bytes"]
            print(f"  {name:<16}" + "".join(f"{mib(figures[kind]):>11}" for kind in (*READ_KINDS, "total"))
                  + f"{mib(figures['input']):>11}   "
                  + ", ".join(f"{part} {mib(size)}" for part, size in probe["state_bytes"].items()))
        target = summary["growth_target"]
        print("  after the last day over the first (input aside): " + "; ".join(
            f"{mode} {summary['growth'][mode]:.2f}x" + (f" (<= {target}x: {verdict(summary['growth_met'][mode])})"
                                                         if target else "") for mode in MODES))
        late = measured["late"]
        print(f"  {spec['late_events']} late events in {late['hour']} on a cold executor: read "
              f"{mib(late['hour_bytes_read'])} MiB of the hour's {late['hour_segments']} segment objects' "
              f"{mib(late['hour_segment_bytes'])} MiB = {summary['late_share']:.1%} (<= "
              f"{summary['late_share_target']:.0%}: {verdict(summary['late_met'])}); all its GETs "
              f"{mib(summary['late_read_bytes']['total'])} MiB (guards {mib(summary['late_read_bytes']['guards'])})")


if __name__ == "__main__":
    path = Path(sys.argv[1])
    document = json.loads(path.read_text())
    summarise_reads(document)
    path.write_text(json.dumps(document, indent=1) + "\n")
    print_reads(document)
