"""A compiled core's own coverage for the fuzzer: the gcc trace-pc build that build_core.py makes,
loaded by the harness and handed to libFuzzer (native/coverage_shim.c)."""
from __future__ import annotations

import ctypes
import importlib.util
import os
import sysconfig
from pathlib import Path
from types import ModuleType

import atheris


def instrumented_core(module_name: str) -> ModuleType | None:
    """The coverage-instrumented build of a core that EVENTDEDUP_FUZZ_CORE names (build_core.py),
    None without; its coverage reaches libFuzzer once `register_core_coverage` has run."""
    path = os.environ.get("EVENTDEDUP_FUZZ_CORE")
    if not path:
        return None
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def register_core_coverage(core: ModuleType) -> None:
    """Hand the instrumented core's counters to libFuzzer, which atheris has loaded by the first
    input (its module is local to atheris: the shim finds it by path)."""
    atheris_folder = Path(atheris.__file__).parent
    libfuzzer = atheris_folder / f"core_with_libfuzzer{sysconfig.get_config_var('EXT_SUFFIX')}"
    if not ctypes.CDLL(str(core.__file__)).eventdedup_fuzz_register_coverage(str(libfuzzer).encode()):
        raise RuntimeError(f"the instrumented core found no libFuzzer at {libfuzzer}: no core coverage")
