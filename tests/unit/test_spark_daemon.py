"""The executors' daemon: which of Spark's zips it sets aside, and what its warm imports do."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from eventdedup.job.spark_daemon import installed_copy_of_spark_zips


def _installed_pyspark(site: Path, installed: str, zipped: str, py4j: bool = True) -> tuple[str, str]:
    package = site / "pyspark"
    lib = package / "python" / "lib"
    lib.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "version.py").write_text(f"__version__: str = '{installed}'\n")
    pyspark_zip = lib / "pyspark.zip"
    with zipfile.ZipFile(pyspark_zip, "w") as archive:
        archive.writestr("pyspark/__init__.py", "")
        archive.writestr("pyspark/version.py", f'__version__: str = "{zipped}"\n')
    py4j_zip = lib / "py4j-0.10.9.9-src.zip"
    with zipfile.ZipFile(py4j_zip, "w") as archive:
        archive.writestr("py4j/__init__.py", "")
    if py4j:
        (site / "py4j").mkdir()
        (site / "py4j" / "__init__.py").write_text("")
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
    pyspark_zip, py4j_zip = _installed_pyspark(site, "4.3.0", "4.3.0", py4j=False)
    assert installed_copy_of_spark_zips([pyspark_zip, py4j_zip, str(site)]) == {pyspark_zip}


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
        "from eventdedup.job.spark_daemon import warm_imports\n"
        "warm_imports()\n"
        "print(before == names(), threading.active_count())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "1"]
