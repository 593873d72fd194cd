"""The main bench's summary and stdout table, from the result document alone, so that a result file
can be read again: `python -m bench.summary bench/results/latest.json`."""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

LABELS = {
    "eventdedup": "eventdedup (Spark job, S3 store)",
    "spark_batch": "Spark batch: dropDuplicates + left-anti join (local files)",
    "spark_batch_tuned": "Spark batch, tuned for the machine: the same query",
    "streaming": "Structured Streaming: dropDuplicatesWithinWatermark, RocksDB (local files)",
    "streaming_tuned": "Structured Streaming, tuned for the machine: state seeded as a snapshot",
    "redis": "Redis + Lua, Tapjoy design: dedup step only (no parsing, no output)",
    "eventdedup_python_parser": "eventdedup, compiled parse core off (the Python parser, as before issue 43)",
}
PYTHON_PARSER = "eventdedup_python_parser"  # a round's eventdedup run with [events] compiled_parser = false
CONFIGURATIONS = {"as_configured": "as configured", "tuned": "tuned for the machine"}
TARGET_MARGINAL_EVENTS_PER_SECOND, TARGET_PEER_RATIO = 250_000, 3  # issue 43's targets
# Issue 52's, on the real path (new `run-batch` processes on a committed history).
TARGET_REAL_EVENTS_PER_SECOND = {"cold": 200_000, "warm": 250_000}
TARGET_ONE_EVENT_SECONDS = 4.0
REAL_MODES = {"cold": "cold (new process, empty local copies)",
              "warm": "warm (new process, the local copies earlier batches filled)"}
PHASE_ORDER = ("read stage", "dedup stage", "outside stages")  # as a batch runs them


def summarise(result: dict) -> None:
    """Medians, and the medians of the rounds' ratios (a peer's time / eventdedup's in the same round)."""
    rounds, events = result["rounds"], result["workload"]["events"]
    ours = [r["eventdedup"]["seconds"] for r in rounds]
    summary: dict = {}
    for name in rounds[0]:
        times = [r[name]["seconds"] for r in rounds]
        summary[name] = {"median_seconds": statistics.median(times), "output_rows": rounds[0][name]["output_rows"],
                         "events_per_second": events / statistics.median(times)}
        if name != "eventdedup":
            summary[name]["ratio_to_eventdedup"] = statistics.median(t / o for t, o in zip(times, ours, strict=True))
        if "cpu_seconds" in rounds[0][name]:  # the round of median total: its parts add up, medians of parts do not
            chosen = sorted((r[name] for r in rounds), key=lambda run: run["cpu_seconds"]["total"])[(len(rounds) - 1) // 2]
            summary[name].update(cpu_seconds=chosen["cpu_seconds"], cpu_seconds_by_phase=chosen["cpu_seconds_by_phase"])
    fixed = statistics.median(result["one_event"]["seconds"])  # one event through the same job
    marginal = summary["eventdedup"]["median_seconds"] - fixed
    summary["eventdedup"].update(one_event_seconds=fixed, marginal_seconds=marginal,
                                 marginal_events_per_second=events / max(marginal, 1e-9))
    summary["history_scaling"] = summarise_scaling(result["history_scaling"], summary["eventdedup"]["median_seconds"])
    summary["peer_ratios"] = peer_ratios(summary)
    if "real_path" in result:
        summary["real_path"] = summarise_real_path(result["real_path"])
    result["summary"] = summary


def summarise_real_path(real: dict) -> dict:
    """Per mode (cold, warm): the median wall of one event and of the batch, the marginal (the
    batch's median minus one event's) and its events/s, the median phases and, of the run of median
    CPU, its CPU by process group; each against issue 52's targets."""
    out = {}
    for mode in REAL_MODES:
        runs = {size: [r for r in real["runs"] if (r["mode"], r["size"]) == (mode, size)] for size in ("one_event", "batch")}
        if not (runs["one_event"] and runs["batch"]):
            continue
        one, batch = (statistics.median(r["wall_seconds"] for r in runs[size]) for size in ("one_event", "batch"))
        marginal = batch - one
        rate = real["events"] / marginal if marginal > 0 else float("inf")
        out[mode] = {
            "one_event_seconds": one, "batch_seconds": batch, "marginal_seconds": marginal,
            "marginal_events_per_second": rate,
            "phases": {size: median_of_phases([r["phases"] for r in of_size]) for size, of_size in runs.items()},
            "cpu_seconds": {size: median_cpu_run(of_size)["cpu_seconds"] for size, of_size in runs.items()},
            "peak_memory_bytes": max(r["peak_memory"]["total_bytes"] for r in runs["batch"]),
            "output_exact": all(r["output_rows"] == real["expected"][r["size"]]["unique_new"]
                                for of_size in runs.values() for r in of_size),
            "targets": {"marginal_events_per_second": TARGET_REAL_EVENTS_PER_SECOND[mode],
                        "one_event_seconds": TARGET_ONE_EVENT_SECONDS},
            "met": {"marginal": rate >= TARGET_REAL_EVENTS_PER_SECOND[mode], "one_event": one <= TARGET_ONE_EVENT_SECONDS}}
    return out


def median_of_phases(phases: list[dict]) -> dict:
    """Each phase's median over the runs that have it, in the order the first run names them."""
    names = list(dict.fromkeys(name for p in phases for name in p))
    return {name: statistics.median(p[name] for p in phases if name in p) for name in names}


def median_cpu_run(runs: list[dict]) -> dict:
    """The run of median total CPU (its parts add up; medians of parts would not)."""
    return sorted(runs, key=lambda run: run["cpu_seconds"].get("total", 0.0))[(len(runs) - 1) // 2]


def summarise_scaling(measured: list[dict], base: float) -> list[dict]:
    """Per density: its median and its growth over 1x, the median of the rounds' ratios (the densities
    take turns), the ratio of the medians beside it; without a 1x density, against `base`."""
    reference = next(([r["seconds"] for r in h["runs"]] for h in measured if h["scale"] == 1), [])
    rows = []
    for h in measured:
        seconds = [r["seconds"] for r in h["runs"]]
        row = {"scale": h["scale"], "median_seconds": statistics.median(seconds), "cache_bytes_read": h.get("cache_bytes_read"),
               "output_rows": h["runs"][0]["output_rows"],
               "median_growth": statistics.median(seconds) / (statistics.median(reference) if reference else base) - 1}
        row["growth"] = (statistics.median(s / r for s, r in zip(seconds, reference, strict=True)) - 1
                         if len(reference) == len(seconds) else row["median_growth"])
        if h.get("peers"):
            row["peers"] = {key: {"median_seconds": statistics.median(r["seconds"] for r in runs),
                                  "output_rows": runs[0]["output_rows"], "ratio_to_eventdedup": statistics.median(
                                      r["seconds"] / s for r, s in zip(runs, seconds, strict=True))}
                            for key, runs in h["peers"].items()}
        rows.append(row)
    return rows


def peer_configuration(key: str) -> tuple[str, str]:
    """(peer, configuration) of a result key: spark_batch_tuned -> (spark_batch, tuned)."""
    for peer in ("spark_batch", "streaming"):
        if key == peer or key.startswith(peer + "_"):
            return peer, key[len(peer) + 1:] or "as_configured"
    return key, ""


def peer_ratios(summary: dict) -> list[dict]:
    """The Spark peers' ratios to eventdedup, a row per configuration and history density."""
    rows: dict[tuple[int, str], dict] = {}
    for scale, of_scale in [(1, summary)] + [(h["scale"], h.get("peers", {})) for h in summary["history_scaling"]]:
        for key, row in of_scale.items():
            peer, configuration = peer_configuration(key)
            if configuration and "ratio_to_eventdedup" in row:
                rows.setdefault((scale, configuration), {})[peer] = row["ratio_to_eventdedup"]
    return [{"configuration": configuration, "history_scale": scale, **ratios}
            for (scale, configuration), ratios in sorted(rows.items())]


def median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}s"


def print_table(result: dict) -> None:
    summary, workload, expected = result["summary"], result["workload"], result["expected"]["unique_new"]
    events, ours = workload["events"], summary["eventdedup"]
    exact = {True: "exact", False: "WRONG"}
    print(f"\n{events:,} events per batch, {workload['history_batches']} hourly history batches of "
          f"{workload['history_batch_events']:,}; median of {result['settings']['runs']} runs; {result['machine']['cpus']} cores")
    if "main_history" in result:
        print(history_text(result["main_history"]))
    print(f"{'system (in one warm SparkContext; history ' + marked(result, 'rounds') + ')':<80} {'seconds':>8} {'events/s':>10} {'peer/eventdedup':>16} {'output rows':>12}")
    for name, row in ((name, summary[name]) for name in LABELS if name in summary):
        ratio = f"{row['ratio_to_eventdedup']:.2f}x" if "ratio_to_eventdedup" in row else ""
        print(f"{LABELS[name]:<80} {row['median_seconds']:>8.2f} {row['events_per_second']:>10,.0f} {ratio:>16} "
              f"{row['output_rows']:>12,} {exact[row['output_rows'] == expected]}")
    for key, settings in result.get("peer_settings", {}).items():
        print(f"  {key} ({CONFIGURATIONS[settings['configuration']]}): {settings['master']}, shuffle partitions "
              f"{settings['spark.sql.shuffle.partitions']}, adaptive {settings['spark.sql.adaptive.enabled']} (coalescing "
              f"{settings['spark.sql.adaptive.coalescePartitions.enabled']})"
              + ("" if settings.get("state_snapshot") is None else
                 f", state seeded as {'a snapshot' if settings['state_snapshot'] else 'one changelog'}"))
    for row in summary["peer_ratios"]:
        print(f"peer / eventdedup, {CONFIGURATIONS[row['configuration']]}, {row['history_scale']}x history (median of the "
              "rounds' ratios): " + ", ".join(f"{peer} {row[peer]:.2f}x" for peer in ("spark_batch", "streaming") if peer in row))
    print(f"one-event batch (same job): {ours['one_event_seconds']:.2f}s; marginal {events:,}-event batch "
          f"{ours['marginal_seconds']:.2f}s = {ours['marginal_events_per_second']:,.0f} events/s")
    promotion = result["promotion"]
    print(f"promotion of the batch {promotion['commit_seconds']:.2f}s, its Delta projection "
          f"{promotion['delta_projection_seconds']:.2f}s ({promotion['delta_data_files']} data files)")
    print_cpu(ours, summary.get("spark_batch_tuned") or summary.get("spark_batch"), events, result["machine"]["cpus"])
    if PYTHON_PARSER in summary:
        before = summary[PYTHON_PARSER]
        print("  with the compiled parse core off (the same rounds): " + "; ".join(
            f"{phase} {before['cpu_seconds_by_phase'][phase]['total']:.1f}" for phase in by_phase(before))
              + f"; all {before['cpu_seconds']['total']:.1f} core-seconds in {before['median_seconds']:.2f}s wall")
    if "real_path" in summary:
        print_real_path(result["real_path"], summary["real_path"], result.get("history_of", {}).get("real_path", ""))
    cli, batch, submitted = result["cli_one_event"], result["cli_batch"], result["airflow_dedup_step"]["wall_seconds"]
    print(f"`eventdedup run-batch` of one event on an empty store, wall: {median(cli['wall_seconds'])} (Python imports "
          f"{cli['python_imports_seconds']:.2f}s; --timings, median: {phases_text(cli['median_phases'])})")
    peak = max(batch["peak_memory"], key=lambda sample: sample["total_bytes"])
    print(f"`eventdedup run-batch` of the batch, a new process each on a fresh server (history "
          f"{marked(result, 'cli_batch')}), wall: {median(batch['wall_seconds'])}, output "
          f"{exact[all(rows == batch['expected_rows'] for rows in batch['output_rows'])]}; --timings, median: "
          f"{phases_text(batch['median_phases'])}; the process tree's peak memory (resident, summed, sampled every "
          f"50 ms, largest of the runs) {peak['total_bytes'] / 2**30:.2f} GiB = the command's Python "
          f"{peak['command_python_bytes'] / 2**20:,.0f} MiB + JVM {peak['jvm_bytes'] / 2**20:,.0f} MiB + "
          f"{peak['python_workers']} Spark Python processes {peak['python_workers_bytes'] / 2**20:,.0f} MiB")
    print(f"the DAG's dedup task as Airflow's operator submits it (spark-submit, local[*], a new process each; history "
          f"{marked(result, 'airflow_dedup_step')}), wall: "
          f"one event {median(submitted['one_event'])}, the batch {median(submitted['batch'])}, output exact")
    for h in summary["history_scaling"]:
        print(f"history at {h['scale']}x ({marked(result, 'history_scaling')}): {h['median_seconds']:.2f}s ({h['growth']:+.0%} round by round, "
              f"{h['median_growth']:+.0%} of the medians), cache read {(h['cache_bytes_read'] or 0) / 2**20:,.0f} MiB, "
              f"output {exact[h['output_rows'] == expected]}" + "".join(
                  f"; {key} {row['median_seconds']:.2f}s ({row['ratio_to_eventdedup']:.2f}x, output "
                  f"{exact[row['output_rows'] == expected]})" for key, row in h.get("peers", {}).items()))
    requests = result["s3_requests"]
    kinds = ", ".join(f"{kind} {figures['read_requests'] + figures['write_requests'] + figures['other_requests']}"
                      for kind, figures in requests.get("by_kind", {}).items())  # since the bench became a package
    print(f"S3 requests per batch: {requests['total']}{f' ({kinds})' if kinds else ''}, cache read "
          f"{requests['cache_bytes_read'] / 2**20:,.0f} MiB")
    if "parse_floor" in result:
        print_parse_floor(result["parse_floor"], events)


def marked(result: dict, figure: str) -> str:
    """A figure's history as the result marks it; results from before the marks had seeded ones."""
    return result.get("history_of", {}).get(figure, "seeded")


def history_text(history: dict) -> str:
    if history["history"] == "seeded":
        return (f"main store's history: seeded (written directly, bench.history) in {history['seconds']:.1f}s, "
                f"{history['batches']} batches of {history['batch_events']:,}")
    cpu = history["cpu_seconds"]
    return (f"main store's history: committed by `eventdedup run-batch`, {history['batches']} batches of "
            f"{history['batch_events']:,} in {history['seconds']:.1f}s of the commands' wall (median "
            f"{statistics.median(history['wall_seconds']):.2f}s a batch; landing objects written in "
            f"{history['landing_seconds']:.1f}s besides); CPU {cpu.get('total', 0.0):.1f} core-seconds, the S3 store's "
            f"{cpu.get('server', 0.0):.1f}")


def verdict(met: bool) -> str:
    return "met" if met else "NOT MET"


def print_real_path(real: dict, summary: dict, history: str) -> None:
    """The batch as the pipeline runs it: new `run-batch` processes on the store, each committed."""
    events = real["events"]
    print(f"`eventdedup run-batch`, a new process each, on the main store (history {history or 'seeded'}), each run a "
          f"batch of its own committed on top of those before ({len(real['runs'])} runs):")
    for mode, row in summary.items():
        target, batch_cpu = row["targets"], row["cpu_seconds"]["batch"]
        print(f"  {REAL_MODES[mode]}: one event {row['one_event_seconds']:.2f}s (<= {target['one_event_seconds']:.0f} s: "
              f"{verdict(row['met']['one_event'])}), {events:,} events {row['batch_seconds']:.2f}s; marginal "
              f"{row['marginal_seconds']:.2f}s = {row['marginal_events_per_second']:,.0f} events/s (>= "
              f"{target['marginal_events_per_second']:,}: {verdict(row['met']['marginal'])}); output "
              f"{'exact' if row['output_exact'] else 'WRONG'}")
        for size in ("one_event", "batch"):
            print(f"    {size.replace('_', ' ')}, --timings median: {phases_text(row['phases'][size])}")
        print("    the batch's CPU (run of median total): " + ", ".join(
            f"{name} {seconds:.1f}s" for name, seconds in batch_cpu.items() if name not in ("total", "server"))
              + f"; the S3 store {batch_cpu.get('server', 0.0):.1f}s apart; all {batch_cpu.get('total', 0.0):.1f} "
              f"core-seconds; peak memory {row['peak_memory_bytes'] / 2**30:.2f} GiB")


def phases_text(phases: dict) -> str:
    return ", ".join(f"{name} {seconds:.2f}s" for name, seconds in phases.items())


def by_phase(run: dict) -> list[str]:
    return sorted(run["cpu_seconds_by_phase"], key=lambda phase: (PHASE_ORDER + (phase,)).index(phase))


def cpu_text(used: dict) -> str:
    return (f"workers {used['python_workers']:.1f}s, JVM {used['jvm']:.1f}s, S3 store {used['server']:.1f}s, "
            f"driver {used['driver']:.1f}s: {used['total']:.1f} core-seconds")


def print_cpu(ours: dict, spark_batch: dict | None, events: int, cores: int) -> None:
    """Where a batch's CPU goes, beside what the targets allow: the processes share the cores, so a
    wall-time target is a budget of core-seconds (wall x cores: at most, as no batch keeps every core busy)."""
    print(f"CPU per batch (the round of median total): {cpu_text(ours['cpu_seconds'])} in {ours['median_seconds']:.2f}s "
          f"wall on {cores} cores")
    for phase in by_phase(ours):
        print(f"  {phase}: {cpu_text(ours['cpu_seconds_by_phase'][phase])}")
    walls = {f"{TARGET_MARGINAL_EVENTS_PER_SECOND:,} events/s marginal":
             ours["one_event_seconds"] + events / TARGET_MARGINAL_EVENTS_PER_SECOND}
    if spark_batch is not None:  # the peer's median: the target itself is judged round by round
        walls[f"{TARGET_PEER_RATIO}x the Spark batch peer's median"] = spark_batch["median_seconds"] / TARGET_PEER_RATIO
    print("  the targets' budgets: " + "; ".join(
        f"{target}: <= {wall:.2f}s wall, <= {wall * cores:.1f} core-seconds" for target, wall in walls.items()))


def print_parse_floor(floor: dict, events: int = 0) -> None:
    micros, required = floor["microseconds_per_line"], floor["required_microseconds_per_line"]
    print(f"a line's steps in Python ({floor['lines']:,} lines of the main shape, one process, median us a line): "
          f"orjson.loads {micros['loads']:.2f}, canonical dump {micros['canonical_dump']:.2f}, XXH3-64 {micros['xxh3']:.2f} "
          f"(BLAKE2b-64, older caches: {micros['blake2b']:.2f}): {required:.2f} required by the fingerprint's definition; "
          f"the Python fast path's vouching dump {micros['vouching_dump']:.2f}")
    print(f"  parse_lines whole: {micros['parse_lines']:.2f} as shipped" + (
        f" (the compiled core's scan alone {micros['native_scan']:.2f})" if "native_scan" in micros
        else " (the compiled core is not built here)") + f"; {micros['parse_lines_python']:.2f} with the core off")
    if events:
        print(f"  for {events:,} events: {required * events / 1e6:.1f} core-seconds required in Python, "
              f"{micros['parse_lines'] * events / 1e6:.1f} for parse_lines")


if __name__ == "__main__":
    path = Path(sys.argv[1])
    document = json.loads(path.read_text())
    summarise(document)
    path.write_text(json.dumps(document, indent=2) + "\n")
    print_table(document)
