"""Run a core's harness (parse_core_fuzz.py, dedup_core_fuzz.py) under libFuzzer and report its
executions and findings (`make fuzz` runs both).

The core's own coverage comes from a gcc-instrumented build of it (build_core.py) made in --out
and scanned beside the shipped core; without a compiler the run goes on with Python's coverage.
The seeds in fuzz/corpus/<target> are read, never written: inputs the run finds go to a scratch
corpus under --out (build/fuzz/<target> by default, ignored by git), findings (crash-*,
timeout-*, oom-* files: inputs that raised a mismatch or hung) to --out/artifacts, libFuzzer's
whole output to --out/fuzz.log. Add a finding to the seeds by hand, minimised (README.md).
Exit status 0 when the run ended without a finding.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from build_core import build_instrumented_core

from eventdedup_dev import native

HERE = Path(__file__).resolve().parent
TARGETS = {"parse_core": native.PARSE, "dedup_core": native.DEDUP}
FINDING_PREFIXES = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")
# What is echoed to the terminal while the run goes (and a finding's report, whole); the rest is only in the log.
_SHOWN = re.compile(r"^(#\d+\s+(INITED|pulse|DONE)|Done \d+ runs|==\d+== ERROR)")
_FINDING_STARTS, _FINDING_ENDS = "=== Uncaught Python exception", "Base64:"


def fuzz_command(target: str, out: Path, seconds: int | None, runs: int | None, seed: int | None) -> list[str]:
    """The harness's libFuzzer command line: the scratch corpus first (where new inputs go)."""
    dictionary = HERE / f"{target}.dict"
    command = [sys.executable, str(HERE / f"{target}_fuzz.py"), f"-artifact_prefix={out / 'artifacts'}/",
               "-timeout=60", "-use_value_profile=1", "-print_final_stats=1",
               *([f"-dict={dictionary}"] if dictionary.exists() else [])]
    if seconds is not None:
        command.append(f"-max_total_time={seconds}")
    if runs is not None:
        command.append(f"-runs={runs}")
    if seed is not None:
        command.append(f"-seed={seed}")
    return [*command, str(out / "corpus"), str(HERE / "corpus" / target)]


def executions_of(output: str) -> int:
    """libFuzzer's count of executed inputs: its final statistics, else its last status line."""
    for pattern in (r"stat::number_of_executed_units:\s*(\d+)", r"^Done (\d+) runs", r"^#(\d+)\s"):
        found = re.findall(pattern, output, re.MULTILINE)
        if found:
            return int(found[-1])
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=900, help="run this long (libFuzzer's -max_total_time)")
    parser.add_argument("--runs", type=int, help="stop after this many inputs instead")
    parser.add_argument("--seed", type=int, help="libFuzzer's random seed (default: from the clock)")
    parser.add_argument("--target", choices=sorted(TARGETS), default="parse_core", help="which core's harness")
    parser.add_argument("--out", type=Path, help="scratch corpus, findings, log (default: build/fuzz/<target>)")
    parser.add_argument("--no-core-coverage", action="store_true",
                        help="fuzz the shipped core alone, without the instrumented build's coverage (build_core.py)")
    args = parser.parse_args()
    args.out = args.out or Path("build/fuzz") / args.target
    title = args.target.replace("_", " ")
    for folder in (args.out / "corpus", args.out / "artifacts"):
        folder.mkdir(parents=True, exist_ok=True)
    environment = dict(os.environ)
    coverage = "Python only"
    if not args.no_core_coverage:
        try:
            environment["EVENTDEDUP_FUZZ_CORE"] = str(build_instrumented_core(args.out / "core", TARGETS[args.target]))
            coverage = "Python and the core's (gcc trace-pc, trace-cmp)"
        except (RuntimeError, subprocess.CalledProcessError) as exc:
            print(f"{title} fuzz: no instrumented core ({exc}); coverage is the Python's only", flush=True)
    before = set((args.out / "artifacts").iterdir())
    seconds = None if args.runs is not None else args.seconds
    started = time.monotonic()
    log_path = args.out / "fuzz.log"
    with log_path.open("w") as log, subprocess.Popen(
            fuzz_command(args.target, args.out, seconds, args.runs, args.seed), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace", env=environment) as fuzzer:
        assert fuzzer.stdout is not None
        lines = []
        in_finding = False
        for line in fuzzer.stdout:
            log.write(line)
            lines.append(line)
            in_finding = in_finding or _FINDING_STARTS in line
            if in_finding or _SHOWN.match(line):
                print(line, end="", flush=True)
            in_finding = in_finding and not line.startswith(_FINDING_ENDS)
    elapsed = time.monotonic() - started
    output = "".join(lines)
    executions = executions_of(output)
    findings = sorted(path for path in set((args.out / "artifacts").iterdir()) - before
                      if path.name.startswith(FINDING_PREFIXES))
    corpus = sum(1 for _ in (args.out / "corpus").iterdir())
    print(f"{title} fuzz: {executions} executions in {elapsed:.0f} s ({executions / max(elapsed, 1e-9):.0f}/s), "
          f"{len(findings)} findings, exit status {fuzzer.returncode}; coverage: {coverage}; scratch corpus {corpus} "
          f"inputs; log {log_path}")
    for path in findings:
        print(f"  finding: {path}")
    return 0 if fuzzer.returncode == 0 and not findings else 1


if __name__ == "__main__":
    sys.exit(main())
