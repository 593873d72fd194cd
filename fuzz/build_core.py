"""Build a coverage-instrumented copy of a compiled core for the fuzzer (fuzz/run.py).

The same source, flags and generated tables as `make venv`'s build (eventdedup_dev.native), plus
gcc's -fsanitize-coverage=trace-pc,trace-cmp and native/coverage_shim.c, which turns those calls
into libFuzzer's 8-bit counters and value profile. The result lands in the fuzzer's scratch
folder, never beside the shipped core; the harness loads it when EVENTDEDUP_FUZZ_CORE names it.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from eventdedup_dev import native

SHIM = Path(__file__).resolve().parent / "native" / "coverage_shim.c"
COVERAGE_FLAGS = ["-fsanitize-coverage=trace-pc,trace-cmp"]


def build_instrumented_core(out_dir: Path, core: native.Core = native.PARSE) -> Path:
    """The instrumented core's path; CalledProcessError or RuntimeError when it cannot be built."""
    compiler, c_compiler = shutil.which("g++"), shutil.which("gcc")
    if compiler is None or c_compiler is None:
        raise RuntimeError("no gcc/g++")
    lacking = native.missing(core)
    if lacking:
        raise RuntimeError(lacking)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"_{core.name}{sysconfig.get_config_var('EXT_SUFFIX')}"
    with tempfile.TemporaryDirectory() as scratch:
        generated = Path(scratch)
        if hasattr(native, "unicode_tables"):  # the tables the shipped build generates
            (generated / "unicode_tables.h").write_text(native.unicode_tables())
        shim = generated / "coverage_shim.o"
        subprocess.run([c_compiler, "-O2", "-fPIC", "-fvisibility=hidden", "-c", str(SHIM), "-o", str(shim)],
                       check=True)
        flags = [flag for flag in native.FLAGS if flag != "-Werror"]  # the shipped build holds the warnings
        subprocess.run([compiler, *flags, *COVERAGE_FLAGS, f"-I{sysconfig.get_paths()['include']}", f"-I{generated}",
                        str(core.source), str(shim), "-ldl", *core.libraries, "-o", str(target)], check=True)
    return target


if __name__ == "__main__":
    print(build_instrumented_core(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("build/fuzz/parse_core")))
