"""The executors' daemon: which of Spark's zips it sets aside, and what its warm imports do."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from eventdedup.spark.daemon import installed_copy_of_spark_zips


def _package(directory: Path, name: str, version: str) -> None:
    (directory / name).mkdir(parents=True)
    (directory / name / "__init__.py").write_text("")
    (directory / name / "version.py").write_text(f"__version__ = '{version}'\n")


def _installed_pyspark(site: Path, installed: str, zipped: str, py4j: str | None = "0.10.9.9") -> tuple[str, str]:
    _package(site, "pyspark", installed)
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    pyspark_zip = lib / "pyspark.zip"
    with zipfile.ZipFile(pyspark_zip, "w") as archive:
        archive.writestr("pyspark/__init__.py", "")
        archive.writestr("pyspark/version.py", f'__version__: str = "{zipped}"\n')
    py4j_zip = lib / "py4j-0.10.9.9-src.zip"
    with zipfile.ZipFile(py4j_zip, "w") as archive:
        archive.writestr("py4j/__init__.py", "")
    if py4j:
        _package(site, "py4j", py4j)
    return str(pyspark_zip), str(py4j_zip)


def test_the_zips_of_the_installed_pyspark_of_the_same_version_are_set_aside(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    pyspark_zip, py4j_zip = _installed_pyspark(site, "4.3.0", "4.3.0")
    assert installed_copy_of_spark_zips([pyspark_zip, py4j_zip, "/srv/app", str(site)]) == {pyspark_zip, py4j_zip}


def test_a_zip_of_another_version_is_kept_with_its_py4j(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    pyspark_zip, py4j_zip = _installed_pyspark(site, "4.3.0", "4.2.1")
    assert installed_copy_of_spark_zips([pyspark_zip, py4j_zip, str(site)]) == set()


def test_py4j_stays_zipped_when_it_is_not_installed(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    pyspark_zip, py4j_zip = _installed_pyspark(site, "4.3.0", "4.3.0", py4j=None)
    assert installed_copy_of_spark_zips([pyspark_zip, py4j_zip, str(site)]) == {pyspark_zip}


def test_py4j_stays_zipped_when_the_installed_one_is_another_version(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    pyspark_zip, py4j_zip = _installed_pyspark(site, "4.3.0", "4.3.0", py4j="0.10.9.7")
    assert installed_copy_of_spark_zips([pyspark_zip, py4j_zip, str(site)]) == {pyspark_zip}


def test_zips_are_kept_when_another_pyspark_earlier_on_the_path_would_be_imported(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    pyspark_zip, py4j_zip = _installed_pyspark(site, "4.3.0", "4.3.0")
    shadow = tmp_path / "deps"
    _package(shadow, "pyspark", "4.3.0-other-build")
    assert installed_copy_of_spark_zips([pyspark_zip, py4j_zip, str(shadow), str(site)]) == set()


def test_py4j_stays_zipped_when_another_py4j_earlier_on_the_path_would_be_imported(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    pyspark_zip, py4j_zip = _installed_pyspark(site, "4.3.0", "4.3.0")
    shadow = tmp_path / "deps"
    _package(shadow, "py4j", "0.10.9.8")
    assert installed_copy_of_spark_zips([pyspark_zip, py4j_zip, str(shadow), str(site)]) == {pyspark_zip}


def test_a_site_reached_through_a_symlink_still_counts(tmp_path: Path) -> None:
    site = tmp_path / "real" / "site-packages"
    _installed_pyspark(site, "4.3.0", "4.3.0")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    linked = tmp_path / "link" / "site-packages"
    pyspark_zip = str(linked / "pyspark" / "python" / "lib" / "pyspark.zip")
    py4j_zip = str(linked / "pyspark" / "python" / "lib" / "py4j-0.10.9.9-src.zip")
    assert installed_copy_of_spark_zips([pyspark_zip, py4j_zip, str(site)]) == {pyspark_zip, py4j_zip}


def test_zips_are_kept_when_the_installed_package_is_not_on_the_path(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    pyspark_zip, py4j_zip = _installed_pyspark(site, "4.3.0", "4.3.0")
    assert installed_copy_of_spark_zips([pyspark_zip, py4j_zip, "/srv/app"]) == set()


def test_a_clusters_own_spark_zip_is_kept(tmp_path: Path) -> None:
    cluster_lib = tmp_path / "opt" / "spark" / "python" / "lib"
    cluster_lib.mkdir(parents=True)
    cluster_zip = cluster_lib / "pyspark.zip"
    with zipfile.ZipFile(cluster_zip, "w") as archive:
        archive.writestr("pyspark/version.py", "__version__: str = '4.3.0'\n")
    site = tmp_path / "site-packages"
    _installed_pyspark(site, "4.3.0", "4.3.0")
    assert installed_copy_of_spark_zips([str(cluster_zip), str(site)]) == set()


def test_a_broken_zip_is_kept_not_fatal(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    pyspark_zip, py4j_zip = _installed_pyspark(site, "4.3.0", "4.3.0")
    Path(pyspark_zip).write_bytes(b"not a zip")
    assert installed_copy_of_spark_zips([pyspark_zip, py4j_zip, str(site)]) == set()


def test_the_warm_imports_start_no_thread_beyond_numpys_and_pyarrows() -> None:
    """Workers are forked after the warm imports: a thread started by them would not exist in the
    child. numpy's BLAS pool and pyarrow's allocator thread (there before, in every daemon that
    imported the job's modules) handle fork themselves."""
    script = (
        "import os, threading\n"
        "names = lambda: sorted(open(f'/proc/self/task/{t}/comm').read() for t in os.listdir('/proc/self/task'))\n"
        "import numpy, pyarrow\n"
        "before = names()\n"
        "from eventdedup.spark.daemon import warm_imports\n"
        "warm_imports()\n"
        "print(before == names(), threading.active_count())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "1"]


def test_forked_workers_draw_different_numpy_random_numbers() -> None:
    """pandas (warmed before the fork) imports numpy.random, seeded once at import: without a
    reseed in each child every worker would draw the same numbers."""
    script = (
        "import os, numpy\n"
        "from eventdedup.spark.daemon import warm_imports\n"
        "warm_imports()\n"
        "draws = []\n"
        "for _ in range(2):\n"
        "    read, write = os.pipe()\n"
        "    if os.fork() == 0:\n"
        "        os.write(write, numpy.random.randint(0, 2**62, 4).tobytes())\n"
        "        os._exit(0)\n"
        "    os.close(write)\n"
        "    draws.append(os.read(read, 64))\n"
        "    os.wait()\n"
        "print(draws[0] != draws[1])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True"]


def test_a_psutil_that_fails_to_import_does_not_stop_the_daemon(tmp_path: Path) -> None:
    """PySpark's shuffle carries on without psutil when importing it fails; so must the daemon."""
    (tmp_path / "psutil.py").write_text("raise ImportError('wrong ELF class')\n")
    script = f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n" \
             "from eventdedup.spark.daemon import warm_imports\nwarm_imports()\nprint('started')\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["started"]
