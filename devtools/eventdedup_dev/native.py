"""Build eventdedup's compiled parse core (native/parse_core.cpp) in place, as `make venv` does:

    python -m eventdedup_dev.native [--check]

The extension lands beside its loader, include/eventdedup/parse/_parse_core<EXT_SUFFIX>, so the
editable install imports it and `make package` ships it in the job archive. It needs a C++17
compiler and xxhash.h (Debian's libxxhash-dev, which `make native-deps` installs); without them the
build says what is missing and stops with status 0: the pure-Python parser runs, and the library
warns once per process (eventdedup.parse.native_core). Built for the baseline of this machine's
architecture (no -march=native): the archive runs on a cluster's other hosts of the same platform.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
SOURCE = PROJECT / "native" / "parse_core.cpp"
TARGET_DIR = PROJECT / "include" / "eventdedup" / "parse"
FLAGS = ["-O3", "-std=c++17", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror",
         "-fno-strict-aliasing"]


def target() -> Path:
    return TARGET_DIR / f"_parse_core{sysconfig.get_config_var('EXT_SUFFIX')}"


def missing() -> str | None:
    """What the build lacks on this machine, or None."""
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        return "no C++ compiler (g++)"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        return f"no Python.h under {sysconfig.get_paths()['include']}"
    probe = subprocess.run([compiler, "-E", "-x", "c++", "-"], input=b"#include <xxhash.h>\n",
                           capture_output=True, check=False)
    if probe.returncode:
        return "no xxhash.h (Debian: apt-get install libxxhash-dev; `make native-deps` does it as root)"
    return None


def build() -> Path:
    compiler = shutil.which("g++") or shutil.which("c++")
    assert compiler is not None
    out = target()
    # Written beside and renamed: a process importing it meanwhile sees the old file or the new.
    with tempfile.NamedTemporaryFile(dir=TARGET_DIR, suffix=".so.tmp", delete=False) as scratch:
        partial = Path(scratch.name)
    try:
        subprocess.run([compiler, *FLAGS, f"-I{sysconfig.get_paths()['include']}", str(SOURCE), "-o", str(partial)],
                       check=True)
        partial.chmod(0o755)
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether the core can be built here")
    parser.add_argument("--stamp", type=Path, help="touch this file once the core is built (make's record)")
    args = parser.parse_args(argv)
    lacking = missing()
    if lacking:
        print(f"eventdedup: the compiled parse core is not built: {lacking}. The pure-Python parser runs "
              "(several times slower); install what is missing and run `make venv` again.", file=sys.stderr)
        return 0
    if args.check:
        print("the compiled parse core can be built here")
        return 0
    print(f"built {build().relative_to(PROJECT)}")
    if args.stamp:
        args.stamp.touch()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
