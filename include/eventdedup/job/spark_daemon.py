"""Spark's Python daemon with the executor side of eventdedup already imported.

PySpark starts one daemon per executor and forks a worker from it for every Python worker it
needs: a first task, a second core, and again after any task failure, since a worker that
raised is not reused. A plain daemon forks a bare interpreter and each worker then imports
pyarrow, numpy, boto3, PySpark's worker and the job's modules itself, ~1.2 s of CPU every time.
Importing them once here, before any fork, makes every worker start warm. Nothing here opens a
connection or starts a thread, so forking after it is as safe as forking the plain daemon
(PySpark's own daemon defers `pyspark.worker` for fear of imports that start threads; the
imports here start none, which `tests/unit/test_spark_daemon.py` checks).

Spark also puts its `pyspark.zip` first on the executors' path, and Python keeps no bytecode
for modules imported from a zip: every daemon and every worker compiled PySpark's sources
again (~0.7 s a process). When that zip is the one shipped inside the installed pyspark of the
same version (a pip-installed Spark: local mode, the bench, the tests), the installed copy,
byte-compiled at install, is imported instead; a cluster's own Spark keeps its zip.

Selected by `spark.python.daemon.module` (see spark_session.py); needs eventdedup importable by
the executors' Python, which the job needs anyway.
"""
from __future__ import annotations

import importlib.util
import re
import sys
import zipfile
from pathlib import Path

_VERSION = re.compile(rb"""__version__(?:\s*:\s*str)?\s*=\s*["']([^"']+)["']""")


def _version_of(source: bytes) -> bytes | None:
    match = _VERSION.search(source)
    return match.group(1) if match else None


def installed_copy_of_spark_zips(path: list[str]) -> set[str]:
    """The entries of `path` that are Spark's python/lib zips of an installed pyspark package
    which is itself importable from `path` with the same version: pyspark.zip, and the py4j zip
    beside it when py4j is installed too. Importing the installed package instead changes no
    code, only skips compiling it."""
    redundant: set[str] = set()
    for entry in path:
        zip_path = Path(entry)
        lib = zip_path.parent
        package = lib.parent.parent  # <site>/pyspark/python/lib/pyspark.zip -> <site>/pyspark
        site = package.parent
        if zip_path.suffix != ".zip" or package.name != "pyspark" or str(site) not in path:
            continue
        if zip_path.name == "pyspark.zip":
            try:
                with zipfile.ZipFile(zip_path) as archive:
                    zipped = _version_of(archive.read("pyspark/version.py"))
                installed = _version_of((package / "version.py").read_bytes())
            except (OSError, KeyError, zipfile.BadZipFile):
                continue
            if zipped is not None and zipped == installed:
                redundant.add(entry)
        elif zip_path.name.startswith("py4j-") and (site / "py4j" / "__init__.py").exists():
            redundant.add(entry)
    # py4j without pyspark's zip gone would mix the zip's pyspark with the installed py4j.
    if not any(Path(entry).name == "pyspark.zip" for entry in redundant):
        return set()
    return redundant


def warm_imports() -> None:
    """What a worker would otherwise import after the fork, each time."""
    import pyspark.worker  # noqa: F401

    import eventdedup.job.dedup_stage  # noqa: F401
    import eventdedup.job.read_stage  # noqa: F401
    from eventdedup.tables import CHUNK_SCHEMA

    if importlib.util.find_spec("psutil") is not None:  # optional: PySpark's shuffle does without it
        importlib.import_module("psutil")  # imported by every worker's shuffle memory check

    # pyarrow imports pandas (~0.4 s) on its first table built against a schema, if installed.
    CHUNK_SCHEMA.empty_table()


if __name__ == "__main__":
    redundant_zips = installed_copy_of_spark_zips(sys.path)
    sys.path[:] = [entry for entry in sys.path if entry not in redundant_zips]
    warm_imports()
    from pyspark.daemon import manager  # here, so the library itself imports without pyspark

    manager()
