"""The benchmark's stdout table and PNG chart, both from the result document alone."""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

LABELS = {
    "eventdedup": "eventdedup (Spark job, S3 emulator)",
    "spark_batch": "Spark batch: dropDuplicates + left-anti join (local files)",
    "spark_batch_tuned": "Spark batch, tuned for the machine: the same query",
    "streaming": "Structured Streaming: dropDuplicatesWithinWatermark, RocksDB (local files)",
    "streaming_tuned": "Structured Streaming, tuned for the machine: state seeded as a snapshot",
    "redis": "Redis + Lua, Tapjoy design: dedup step only (no parsing, no output)",
    "eventdedup_python_parser": "eventdedup, compiled parse core off (the Python parser, as before issue 43)",
}
PYTHON_PARSER = "eventdedup_python_parser"  # a round's eventdedup run with [events] compiled_parser = false


def summarise(result: dict) -> None:
    """Medians and per-round ratios, from the raw rounds alone (so a result file can be re-read)."""
    rounds = result["rounds"]
    events = result["workload"]["events"]
    startup = result["spark_startup_seconds"]
    ours = [r["eventdedup"]["seconds"] for r in rounds]
    summary: dict = {"eventdedup": {
        "median_seconds": statistics.median(ours),
        "events_per_second": events / statistics.median(ours),
        "events_per_second_with_startup": events / (statistics.median(ours) + startup),
        "server_cpu_seconds": statistics.median(r["eventdedup"]["server_cpu_seconds"] for r in rounds),
        "output_rows": rounds[0]["eventdedup"]["output_rows"],
        # Promotion (copies + the commit) runs once, after the last round: the peers' times
        # include their own final writes, so this is the like-for-like end-to-end figure.
        "with_promotion_seconds": statistics.median(ours) + result["promotion"]["seconds"],
    }}
    for name in rounds[0]:
        if name == "eventdedup":
            continue
        times = [r[name]["seconds"] for r in rounds]
        summary[name] = {
            "median_seconds": statistics.median(times), "events_per_second": events / statistics.median(times),
            "output_rows": rounds[0][name]["output_rows"],
            "ratio_to_eventdedup": statistics.median(r[name]["seconds"] / r["eventdedup"]["seconds"] for r in rounds),
        }
    for name in ("eventdedup", PYTHON_PARSER):
        if name in rounds[0] and all("cpu_seconds" in r[name] for r in rounds):
            # The parts of the round whose total is the median, so they add up (medians part by
            # part come from different rounds and do not).
            by_total = sorted((r[name] for r in rounds), key=lambda ours: ours["cpu_seconds"]["total"])
            median_round = by_total[(len(by_total) - 1) // 2]
            summary[name]["cpu_seconds"] = median_round["cpu_seconds"]
            if "cpu_seconds_by_phase" in median_round:
                summary[name]["cpu_seconds_by_phase"] = median_round["cpu_seconds_by_phase"]
    base = summary["eventdedup"]["median_seconds"]
    if result.get("one_event"):
        # Marginal: the batch minus a one-event batch through the same job (the fixed cost).
        fixed = statistics.median(result["one_event"]["seconds"])
        summary["eventdedup"].update(one_event_seconds=fixed, marginal_seconds=base - fixed,
                                     marginal_events_per_second=events / max(base - fixed, 1e-9))
        for name in summary:
            if name != "eventdedup":
                summary[name]["marginal_ratio_to_eventdedup"] = summary[name]["median_seconds"] / max(base - fixed,
                                                                                                       1e-9)
    summary["object_counts"] = [
        {"objects": o["objects"], "gzip": o.get("gzip", False),
         "median_seconds": statistics.median(r["seconds"] for r in o["runs"]),
         "output_rows": o["runs"][0]["output_rows"]} for o in result.get("object_counts", [])]
    summary["history_scaling"] = summarise_scaling(result["history_scaling"], base)
    summary["peer_ratios"] = peer_ratios(summary)
    sizes = [{"events": events, "median_seconds": base}] + [
        {"events": s["events"], "median_seconds": statistics.median(r["seconds"] for r in s["runs"])}
        for s in result["batch_sizes"]]
    for size in sizes:
        size["microseconds_per_event"] = size["median_seconds"] / size["events"] * 1e6
    summary["batch_sizes"] = sorted(sizes, key=lambda s: s["events"])
    if "shifted_copies" in result:
        summary["shifted_copies"] = summarise_shifted(result["shifted_copies"])
    result["summary"] = summary


def summarise_scaling(measured: list[dict], base: float) -> list[dict]:
    """Per density: the median time and its growth over the 1x window measured the same way
    (a fresh server, the peers done). The densities take turns round by round, so growth is the
    median of the rounds' ratios, as for the peers; the ratio of the medians is kept beside it."""
    reference = next((h for h in measured if h["scale"] == 1), None)
    reference_seconds = [r["seconds"] for r in reference["runs"]] if reference else []
    reference_median = statistics.median(reference_seconds) if reference else base
    rows = []
    for h in measured:
        seconds = [r["seconds"] for r in h["runs"]]
        median = statistics.median(seconds)
        row = {"scale": h["scale"], "median_seconds": median, "cache_bytes_read": h.get("cache_bytes_read"),
               "output_rows": h["runs"][0]["output_rows"]}
        row["median_growth"] = median / reference_median - 1
        row["growth"] = (statistics.median(s / r for s, r in zip(seconds, reference_seconds, strict=True)) - 1
                         if len(reference_seconds) == len(seconds) else row["median_growth"])
        if h.get("peers"):
            row["peers"] = {name: summarise_peer(runs, seconds) for name, runs in h["peers"].items()}
        rows.append(row)
    return rows


def summarise_peer(runs: list[dict], ours: list[float]) -> dict:
    """A peer's runs beside eventdedup's of the same rounds: the median of the rounds' ratios."""
    times = [r["seconds"] for r in runs]
    return {"median_seconds": statistics.median(times), "output_rows": runs[0]["output_rows"],
            "ratio_to_eventdedup": statistics.median(t / o for t, o in zip(times, ours, strict=True))}


def peer_configuration(key: str) -> tuple[str, str]:
    """(peer, configuration) of a result key: spark_batch_tuned -> (spark_batch, tuned)."""
    for peer in ("spark_batch", "streaming"):
        if key == peer:
            return peer, "as_configured"
        if key.startswith(peer + "_"):
            return peer, key[len(peer) + 1:]
    return key, ""


def peer_ratios(summary: dict) -> list[dict]:
    """The Spark peers' ratios to eventdedup (medians of the rounds' ratios), one row per
    configuration and history density: what the issue's targets are read against."""
    rows: dict[tuple[str, int], dict] = {}
    for key, row in summary.items():
        peer, configuration = peer_configuration(key)
        if configuration and isinstance(row, dict) and "ratio_to_eventdedup" in row:
            rows.setdefault((configuration, 1), {})[peer] = row["ratio_to_eventdedup"]
    for density in summary["history_scaling"]:
        for key, row in density.get("peers", {}).items():
            peer, configuration = peer_configuration(key)
            rows.setdefault((configuration, density["scale"]), {})[peer] = row["ratio_to_eventdedup"]
    return [{"configuration": configuration, "history_scale": scale, **ratios}
            for (configuration, scale), ratios in sorted(rows.items(), key=lambda item: (item[0][1], item[0][0]))]


def summarise_shifted(measured: list[dict]) -> list[dict]:
    """Per shift: medians, whether both systems output exactly the unique events, and the growth
    of eventdedup's time over the unshifted batch."""
    rows = []
    for item in measured:
        ours = statistics.median(r["eventdedup"]["seconds"] for r in item["rounds"])
        peer = statistics.median(r["spark_batch"]["seconds"] for r in item["rounds"])
        expected = item["expected"]["unique_new"]
        rows.append({
            "shift_hours": item["shift_hours"], "eventdedup_seconds": ours, "spark_batch_seconds": peer,
            "ratio_spark_batch_to_eventdedup": statistics.median(
                r["spark_batch"]["seconds"] / r["eventdedup"]["seconds"] for r in item["rounds"]),
            "eventdedup_exact": all(r["eventdedup"]["output_rows"] == expected for r in item["rounds"]),
            "spark_batch_exact": all(r["spark_batch"]["output_rows"] == expected for r in item["rounds"]),
            "cross_hour_duplicates": item["rounds"][0]["eventdedup"]["counts"].get("cross_hour_duplicates"),
            "guard_hours_loaded": item["rounds"][0]["eventdedup"]["counts"].get("guard_hours_loaded"),
            "expected_cross_batch": item["expected"]["cross_batch_duplicates"],
        })
    base = rows[0]["eventdedup_seconds"]
    for row in rows:
        row["growth"] = row["eventdedup_seconds"] / base - 1
    return rows


def print_shifted(rows: list[dict]) -> None:
    for row in rows:
        print(f"copies shifted up to {row['shift_hours']} h: eventdedup {row['eventdedup_seconds']:.2f}s "
              f"({row['growth']:+.0%} vs unshifted, exact: {row['eventdedup_exact']}, cross-hour duplicates found "
              f"{row['cross_hour_duplicates']:,} of {row['expected_cross_batch']:,} copies, guard-named hours loaded "
              f"{row['guard_hours_loaded']}); Spark batch {row['spark_batch_seconds']:.2f}s "
              f"({row['ratio_spark_batch_to_eventdedup']:.2f}x, exact: {row['spark_batch_exact']})")


def print_table(result: dict) -> None:
    summary = result["summary"]
    events = result["workload"]["events"]
    runs = result["settings"]["runs"]
    print()
    print(f"{events:,} events per batch, {result['workload']['history_batches']} hourly history batches of "
          f"{result['workload']['history_batch_events']:,}; median of {runs} runs; {result['machine']['cpus']} cores")
    expected = result["expected"]["unique_new"]
    print(f"{'system':<80} {'seconds':>8} {'events/s':>10} {'peer/eventdedup':>16} {'output rows':>12} {'correct':>8}")
    for name, row in summary.items():
        if name not in LABELS:
            continue
        ratio = f"{row['ratio_to_eventdedup']:.2f}x" if "ratio_to_eventdedup" in row else ""
        print(f"{LABELS[name]:<80} {row['median_seconds']:>8.2f} {row['events_per_second']:>10,.0f} "
              f"{ratio:>16} {row['output_rows']:>12,} {'yes' if row['output_rows'] == expected else 'NO':>8}")
    print_peer_configurations(result)
    ours = summary["eventdedup"]
    print(f"eventdedup job + promotion ({result['promotion']['seconds']:.1f}s): "
          f"{events / ours['with_promotion_seconds']:,.0f} events/s")
    if "delta_projection_seconds" in result["promotion"]:
        print(f"  of which the Delta table's projection of the batch's commit: "
              f"{result['promotion']['delta_projection_seconds']:.2f}s ({result['promotion']['delta_data_files']} "
              f"data files; the commit itself {result['promotion']['commit_seconds']:.2f}s)")
    print(f"eventdedup including Spark start-up ({result['spark_startup_seconds']:.1f}s): "
          f"{ours['events_per_second_with_startup']:,.0f} events/s; S3 emulator CPU during the job "
          f"{ours['server_cpu_seconds']:.1f}s")
    print(f"expected output rows: {result['expected']['unique_new']:,}")
    if "one_event_seconds" in ours:
        print(f"one-event batch (same job): {ours['one_event_seconds']:.2f}s; marginal {events:,}-event batch "
              f"{ours['marginal_seconds']:.2f}s = {ours['marginal_events_per_second']:,.0f} events/s; peers over "
              "eventdedup's marginal time: " + ", ".join(
                  f"{name} {row['marginal_ratio_to_eventdedup']:.2f}x" for name, row in summary.items()
                  if "marginal_ratio_to_eventdedup" in row))
    if "cpu_seconds" in ours:
        print_cpu_budget(ours, summary.get("spark_batch_tuned") or summary.get("spark_batch"), events,
                         result["machine"]["cpus"])
    if "cpu_seconds" in summary.get(PYTHON_PARSER, {}):
        print_cpu_before_after(summary[PYTHON_PARSER], ours)
    for counted in summary.get("object_counts", []):
        what = "1 gzip object" if counted.get("gzip") else f"{counted['objects']} objects"
        print(f"the batch as {what}: {counted['median_seconds']:.2f}s "
              f"({events / counted['median_seconds']:,.0f} events/s), output rows {counted['output_rows']:,}")
    if "cli_one_event" in result:
        cli = result["cli_one_event"]
        print(f"`eventdedup run-batch` of one event, wall: {statistics.median(cli['wall_seconds']):.2f}s "
              f"(Python imports {cli['python_imports_seconds']:.2f}s, Spark start-up {result['spark_startup_seconds']:.2f}s, "
              f"the job {ours.get('one_event_seconds', 0):.2f}s, promotion "
              f"{statistics.median(result['one_event']['promotion_seconds']):.2f}s)")
        if "median_phases" in cli:
            print("  its own breakdown (median, --timings): " + ", ".join(
                f"{name} {seconds:.2f}s" for name, seconds in cli["median_phases"].items()))
    if "cli_batch" in result:
        cli = result["cli_batch"]
        exact = all(rows == cli["expected_rows"] for rows in cli["output_rows"])
        print(f"`eventdedup run-batch` of the {events:,}-event batch, a new process each (its JVM's and workers' "
              f"first batch), wall: {statistics.median(cli['wall_seconds']):.2f}s, output "
              f"{'exact' if exact else 'WRONG'}; its own breakdown (median, --timings): " + ", ".join(
                  f"{name} {seconds:.2f}s" for name, seconds in cli["median_phases"].items()))
        if cli.get("peak_memory"):
            peak = max(cli["peak_memory"], key=lambda sample: sample["total_bytes"])
            print(f"  its process tree's peak memory (resident, summed, sampled every 50 ms; the largest of "
                  f"{len(cli['peak_memory'])} runs): {peak['total_bytes'] / 2**30:.2f} GiB = the command's Python "
                  f"{peak['command_python_bytes'] / 2**20:,.0f} MiB + JVM {peak['jvm_bytes'] / 2**20:,.0f} MiB + "
                  f"{peak['python_workers']} Spark Python processes {peak['python_workers_bytes'] / 2**20:,.0f} MiB")
    if "airflow_dedup_step" in result:
        walls = result["airflow_dedup_step"]["wall_seconds"]
        print(f"the DAG's dedup task as Airflow's operator submits it (spark-submit, local[*], a new process each), "
              f"wall: one event {statistics.median(walls['one_event']):.2f}s, the {events:,}-event batch "
              f"{statistics.median(walls['batch']):.2f}s, output exact")
    if "peak_memory" in result:
        memory = result["peak_memory"]
        total = memory["driver_python_bytes"] + memory["jvm_bytes"] + memory["python_workers_bytes"]
        print(f"peak memory: driver Python {memory['driver_python_bytes'] / 2**20:,.0f} MiB, JVM "
              f"{memory['jvm_bytes'] / 2**20:,.0f} MiB, {memory['python_workers']} Python workers "
              f"{memory['python_workers_bytes'] / 2**20:,.0f} MiB; {total / 2**30:.2f} GiB in all")
    print("history density (events per hour x): " + ", ".join(
        f"{h['scale']}x {h['median_seconds']:.2f}s ({h['growth']:+.0%} round by round, {h['median_growth']:+.0%} "
        f"of the medians, cache read "
        f"{(h['cache_bytes_read'] or 0) / 2**20:,.0f} MiB, output {'exact' if h['output_rows'] == expected else 'WRONG'})"
        for h in summary["history_scaling"]))
    for h in summary["history_scaling"]:
        if h.get("peers"):
            print(f"  peers on the {h['scale']}x history, after eventdedup's run on it: " + ", ".join(
                f"{name} {row['median_seconds']:.2f}s ({row['ratio_to_eventdedup']:.2f}x, output "
                f"{'exact' if row['output_rows'] == expected else 'WRONG'})" for name, row in h["peers"].items()))
    print("batch size: " + ", ".join(
        f"{s['events']:,} {s['median_seconds']:.2f}s ({s['microseconds_per_event']:.2f} us/event)"
        for s in summary["batch_sizes"]))
    requests = result["s3_requests"]
    print(f"S3 requests per batch: {requests['total']} for {requests['touched_cache_keys']} touched cache keys "
          f"({requests['per_touched_key']:.2f} per key) {requests['by_method']}")
    print(f"cache: {result['cache_bytes_per_key']['bytes_per_key']:.2f} bytes per key on S3")
    if "shifted_copies" in summary:
        print_shifted(summary["shifted_copies"])
    if "parse_shapes" in result:
        print_parse_shapes(result["parse_shapes"])
    if "parse_floor" in result:
        print_parse_floor(result["parse_floor"], events)


CONFIGURATION_LABELS = {"as_configured": "as configured", "tuned": "tuned for the machine"}


def print_peer_configurations(result: dict) -> None:
    """Each Spark peer configuration's settings (as its session reports them) and the ratios
    the targets are read against, per configuration and history density."""
    for key, settings in result.get("peer_settings", {}).items():
        state = ""
        if settings.get("state_snapshot") is not None:
            state = f", state seeded as {'a snapshot' if settings['state_snapshot'] else 'one changelog'}"
        print(f"  {key} ({CONFIGURATION_LABELS.get(settings['configuration'], settings['configuration'])}): "
              f"{settings['master']}, shuffle partitions {settings['spark.sql.shuffle.partitions']}, adaptive "
              f"{settings['spark.sql.adaptive.enabled']} (coalescing "
              f"{settings['spark.sql.adaptive.coalescePartitions.enabled']}){state}")
    for row in result["summary"].get("peer_ratios", []):
        ratios = ", ".join(f"{peer} {row[peer]:.2f}x" for peer in ("spark_batch", "streaming") if peer in row)
        print(f"peer / eventdedup, {CONFIGURATION_LABELS.get(row['configuration'], row['configuration'])}, "
              f"{row['history_scale']}x history (median of the rounds' ratios): {ratios}")


# The targets, as budgets of wall and core-seconds a batch may spend on this machine.
TARGET_MARGINAL_EVENTS_PER_SECOND = 250_000  # issue 43's targets: marginal, and over the tuned peers
TARGET_PEER_RATIO = 3
PHASE_ORDER = {"read stage": 0, "dedup stage": 1, "outside stages": 2}  # as a batch runs them


def print_cpu_budget(ours: dict, spark_batch: dict | None, events: int, cores: int) -> None:
    """Where a batch's CPU goes, beside what the targets allow: the cores are shared by every
    process, so a wall-time target is a budget of core-seconds."""
    cpu = ours["cpu_seconds"]
    print(f"CPU per batch (the round of median total): Spark's Python workers {cpu['python_workers']:.1f}s, JVM "
          f"{cpu['jvm']:.1f}s, S3 emulator {cpu['server']:.1f}s, driver {cpu['driver']:.1f}s: "
          f"{cpu['total']:.1f} core-seconds in {ours['median_seconds']:.2f}s wall on {cores} cores")
    phases = ours.get("cpu_seconds_by_phase", {})
    for phase, used in sorted(phases.items(), key=lambda item: (PHASE_ORDER.get(item[0], len(PHASE_ORDER)), item[0])):
        print(f"  {phase}: workers {used['python_workers']:.1f}s, JVM {used['jvm']:.1f}s, S3 emulator "
              f"{used['server']:.1f}s, driver {used['driver']:.1f}s: {used['total']:.1f} core-seconds")
    budgets = []
    if "one_event_seconds" in ours:
        wall = ours["one_event_seconds"] + events / TARGET_MARGINAL_EVENTS_PER_SECOND
        budgets.append(f"{TARGET_MARGINAL_EVENTS_PER_SECOND:,} events/s marginal: <= {wall:.2f}s wall, "
                       f"<= {wall * cores:.1f} core-seconds")
    if spark_batch is not None:  # the peer's median: the target itself is judged round by round
        wall = spark_batch["median_seconds"] / TARGET_PEER_RATIO
        budgets.append(f"{TARGET_PEER_RATIO}x the Spark batch peer's median: <= {wall:.2f}s wall, "
                       f"<= {wall * cores:.1f} core-seconds")
    if budgets:
        print("  the targets' budgets (wall x cores: at most, as no batch keeps every core busy): " + "; ".join(budgets))


def print_cpu_before_after(before: dict, after: dict) -> None:
    """The batch's CPU by stage with the compiled parse core off (before) and on (after), rounds of
    median total of the same run."""
    print("CPU per batch by stage, compiled parse core off -> on (the same rounds; core-seconds):")
    phases = sorted(set(before.get("cpu_seconds_by_phase", {})) | set(after.get("cpu_seconds_by_phase", {})),
                    key=lambda phase: (PHASE_ORDER.get(phase, len(PHASE_ORDER)), phase))
    for phase in phases:
        old, new = before["cpu_seconds_by_phase"].get(phase), after["cpu_seconds_by_phase"].get(phase)
        if old and new:
            print(f"  {phase}: workers {old['python_workers']:.1f} -> {new['python_workers']:.1f}, total "
                  f"{old['total']:.1f} -> {new['total']:.1f}")
    print(f"  all: {before['cpu_seconds']['total']:.1f} -> {after['cpu_seconds']['total']:.1f} core-seconds, "
          f"{before['median_seconds']:.2f} -> {after['median_seconds']:.2f} s wall")


def print_parse_floor(floor: dict, events: int = 0) -> None:
    micros = floor["microseconds_per_line"]
    required = floor["required_microseconds_per_line"]
    print(f"a line's steps in Python ({floor['lines']:,} lines of the main shape, one process, median us a line): "
          f"orjson.loads {micros['loads']:.2f}, canonical dump {micros['canonical_dump']:.2f}, XXH3-64 "
          f"{micros.get('xxh3', float('nan')):.2f} (BLAKE2b-64, older caches: {micros['blake2b']:.2f}): "
          f"{required:.2f} required by the fingerprint's definition; the Python fast path's vouching dump "
          f"{micros['vouching_dump']:.2f}")
    print(f"  parse_lines whole: {micros['parse_lines']:.2f} as shipped"
          + (f" (the compiled core's scan alone {micros['native_scan']:.2f})" if "native_scan" in micros else
             " (the compiled core is not built here)")
          + (f"; {micros['parse_lines_python']:.2f} with the core off" if "parse_lines_python" in micros else ""))
    if events:
        print(f"  for {events:,} events: {required * events / 1e6:.1f} core-seconds required in Python, "
              f"{micros['parse_lines'] * events / 1e6:.1f} for parse_lines")


def print_parse_shapes(rows: list[dict]) -> None:
    print(f"parse per shape ({rows[0]['lines']:,} lines, one process, median us a line; the per-line reference "
          "beside it):")
    for row in rows:
        print(f"  {row['shape']}: {row['microseconds_per_line']:.1f} us (reference "
              f"{row['reference_microseconds_per_line']:.1f} us, {row['reference_ratio']:.1f}x), "
              f"{'exact' if row['exact'] else 'WRONG'}")


def write_chart(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = result["summary"]
    names = [n for n in LABELS if n in summary]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    values = [summary[n]["events_per_second"] / 1000 for n in names]
    bars = left.barh([LABELS[n].split(":")[0].split(" (")[0] for n in names], values,
                     color=["#1f77b4"] + ["#999999"] * (len(names) - 1))
    left.bar_label(bars, labels=[f"{v:,.0f}k" for v in values], padding=3)
    left.invert_yaxis()
    left.set_xlabel("thousand events per second (median; Redis: dedup step only)")
    left.set_title(f"{result['workload']['events']:,}-event batch, {result['machine']['cpus']} cores")
    scaling = summary["history_scaling"]
    per_hour = result["workload"]["history_batch_events"]
    events = result["workload"]["events"]
    right.plot([h["scale"] * per_hour / 1e6 for h in scaling], [events / h["median_seconds"] / 1000 for h in scaling],
               "o-", label="eventdedup")
    for name, marker in (("spark_batch", "s"), ("streaming", "^")):
        if name in summary:  # the as-configured peers ran at 1x only
            right.plot([per_hour / 1e6], [summary[name]["events_per_second"] / 1000], marker, label=f"{name} (1x)")
        tuned = f"{name}_tuned"
        if tuned in summary:  # 1x in the rounds, denser histories beside eventdedup's
            points = [(per_hour, summary[tuned]["median_seconds"])] + [
                (h["scale"] * per_hour, h["peers"][tuned]["median_seconds"]) for h in scaling
                if tuned in h.get("peers", {})]
            right.plot([x / 1e6 for x, _ in points], [events / t / 1000 for _, t in points], marker + "--",
                       label=f"{tuned}")
    right.set_ylim(bottom=0)
    right.legend()
    right.set_xlabel("history density: events per hour in the window (millions)")
    right.set_ylabel("thousand events per second")
    right.set_title("Throughput against history density")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":  # re-render a result file: python bench/report.py bench/results/latest.json
    path = Path(sys.argv[1])
    document = json.loads(path.read_text())
    summarise(document)
    path.write_text(json.dumps(document, indent=2) + "\n")
    write_chart(document, path.with_suffix(".png"))
    print_table(document)
