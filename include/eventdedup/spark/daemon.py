"""Spark's Python daemon with the executor side of eventdedup already imported.

PySpark starts one daemon per executor and forks a worker from it for every Python worker it
needs: a first task, a second core, and again after any task failure, since a worker that
raised is not reused. A plain daemon forks a bare interpreter and each worker then imports
pyarrow, numpy, boto3, PySpark's worker and the job's modules itself, every time. Importing them
once here, before any fork, makes every worker start warm. Nothing here opens a
connection or starts a thread (PySpark's own daemon defers `pyspark.worker` for fear of imports
that start threads; the imports here start none, which `tests/unit/spark/test_spark_daemon.py`
checks), and each forked worker reseeds numpy's global generator, which pandas imports.

Spark also puts its `pyspark.zip` first on the executors' path, and Python keeps no bytecode
for modules imported from a zip: every daemon and every worker compiled PySpark's sources
again. When that zip is the one shipped inside the installed pyspark of the
same version (a pip-installed Spark: local mode, the bench, the tests), the installed copy,
byte-compiled at install, is imported instead; a cluster's own Spark keeps its zip.

PySpark's daemon runs `gc.collect()` in a reused worker after each of its tasks. Each collection
walked every object imported here and, writing their collector headers, copied the pages holding
them into the worker. They are
frozen before the first fork (`gc.freeze`, Python's advice for a server that forks without
exec): collections in the workers walk only what the workers themselves made.

Selected by `spark.python.daemon.module` (see session.py); needs eventdedup importable by
the executors' Python, which the job needs anyway. What each of these saves, measured:
docs/performance.md, "Starting a batch".
"""
from __future__ import annotations

import gc
import importlib
import importlib.machinery
import os
import re
import sys
import zipfile
from pathlib import Path

_VERSION = re.compile(rb"""__version__(?:\s*:\s*str)?\s*=\s*["']([^"']+)["']""")


def _version_of(source: bytes) -> bytes | None:
    match = _VERSION.search(source)
    return match.group(1) if match else None


def installed_copy_of_spark_zips(path: list[str]) -> set[str]:
    """The entries of `path` that are Spark's python/lib zips of an installed pyspark package of
    the same version, which `path` without them imports: pyspark.zip, and the py4j zip beside
    it when the py4j that would be imported instead is that zip's version too. Importing the
    installed packages instead changes no code, only skips compiling it. Anything else (a
    cluster's Spark, another version, a copy earlier on the path) keeps the zips."""
    real_path = {os.path.realpath(entry) for entry in path}
    pyspark_zip, py4j_zips = None, []
    for entry in path:
        zip_path = Path(entry)
        package = zip_path.parent.parent.parent  # <site>/pyspark/python/lib/pyspark.zip -> <site>/pyspark
        if (zip_path.suffix != ".zip" or package.name != "pyspark"
                or os.path.realpath(package.parent) not in real_path):
            continue
        if zip_path.name == "pyspark.zip":
            pyspark_zip = entry
        elif zip_path.name.startswith("py4j-"):
            py4j_zips.append(entry)
    if pyspark_zip is None:
        return set()
    trimmed = [entry for entry in path if entry not in {pyspark_zip, *py4j_zips}]
    installed = _importable_version(trimmed, "pyspark")
    if installed is None or installed != _zipped_pyspark_version(pyspark_zip):
        return set()
    redundant = {pyspark_zip}
    for entry in py4j_zips:
        zipped_py4j = re.fullmatch(r"py4j-(.+?)(?:-src)?\.zip", Path(entry).name)
        if zipped_py4j and _importable_version(trimmed, "py4j") == zipped_py4j.group(1).encode():
            redundant.add(entry)
    return redundant


def _importable_version(path: list[str], package: str) -> bytes | None:
    """The version (its version.py) of the package `import package` would find on `path`, if a directory."""
    spec = importlib.machinery.PathFinder.find_spec(package, path)
    if spec is None or not spec.origin or not spec.origin.endswith("__init__.py"):
        return None
    try:
        return _version_of((Path(spec.origin).parent / "version.py").read_bytes())
    except OSError:
        return None


def _zipped_pyspark_version(zip_path: str) -> bytes | None:
    try:
        with zipfile.ZipFile(zip_path) as archive:
            return _version_of(archive.read("pyspark/version.py"))
    except (OSError, KeyError, zipfile.BadZipFile):
        return None


def warm_imports() -> None:
    """What a worker would otherwise import after the fork, each time."""
    import pyspark.worker  # noqa: F401

    import eventdedup.job.dedup_stage  # noqa: F401
    import eventdedup.job.read_stage  # noqa: F401
    from eventdedup.s3store import warm_service_models
    from eventdedup.tables import CHUNK_SCHEMA

    warm_service_models()  # each worker's S3 client is then made in ms, not ~50-150 ms

    try:  # imported by every worker's shuffle memory check, which does without it (as here)
        importlib.import_module("psutil")
    except ImportError:
        pass

    # pyarrow imports pandas (~0.4 s) on its first table built against a schema, if installed.
    CHUNK_SCHEMA.empty_table()
    # pandas imports numpy.random, whose global generator is seeded once, at import; forked
    # children would all draw the same numbers. Each worker gets its own seed, as Python's
    # `random` does by itself after a fork.
    os.register_at_fork(after_in_child=_reseed_numpy)


def _reseed_numpy() -> None:
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed()


if __name__ == "__main__":
    redundant_zips = installed_copy_of_spark_zips(sys.path)
    sys.path[:] = [entry for entry in sys.path if entry not in redundant_zips]
    warm_imports()
    from pyspark.daemon import manager  # here, so the library itself imports without pyspark

    gc.collect()  # garbage of the imports (none today) would otherwise be frozen for good
    gc.freeze()  # last before the forks: what is frozen is what the workers share, never collected
    manager()
