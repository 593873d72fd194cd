"""Run a command while other work keeps every core busy, as CI runs beside other jobs.

    python -m eventdedup_dev.busy [--runs N] [--hog-seconds S] -- COMMAND...

Starts one busy-looping process per core, at the command's own priority (CI's neighbours are not
niced for us), runs COMMAND `--runs` times in a row, stopping at the first failure, then stops the hog. The hog
ends by itself after `--hog-seconds` whatever happens to this process (it is bounded in time, not
left spinning by a killed run). Exit code: the first failing run's, else 0.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

_HOG = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"


def start_hog(seconds: float, processes: int | None = None) -> list[subprocess.Popen[bytes]]:
    """One busy loop per core, each ending by itself after `seconds`."""
    count = processes or os.cpu_count() or 2
    return [subprocess.Popen([sys.executable, "-c", _HOG, str(seconds)]) for _ in range(count)]


def stop_hog(hog: list[subprocess.Popen[bytes]]) -> None:
    for process in hog:
        process.kill()
    for process in hog:
        process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eventdedup_dev.busy", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1, help="run the command this many times in a row")
    parser.add_argument("--hog-seconds", type=float, default=3 * 3600, help="the hog's own time bound")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (after --)")
    hog = start_hog(args.hog_seconds)
    try:
        for run in range(1, args.runs + 1):
            started = time.monotonic()
            code = subprocess.call(command)
            print(f"busy run {run}/{args.runs}: exit {code} in {time.monotonic() - started:.0f} s "
                  f"beside {len(hog)} busy loops", flush=True)
            if code != 0:
                return code
        return 0
    finally:
        stop_hog(hog)


if __name__ == "__main__":
    sys.exit(main())
