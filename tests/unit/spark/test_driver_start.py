"""What a driver started on this host adds to a job's settings, and what it leaves to the user
(eventdedup.spark.driver_start)."""
from __future__ import annotations

from pathlib import Path

import pytest

from eventdedup.spark import driver_start
from eventdedup.spark.driver_start import driver_start_conf, java_properties

TRIM, MMAP, PURGE = "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MIMALLOC_PURGE_DELAY"
ALLOCATOR = {f"spark.executorEnv.{TRIM}": str(4 << 30), f"spark.executorEnv.{MMAP}": str(4 << 30),
             f"spark.executorEnv.{PURGE}": "-1", "spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL": "system",
             "spark.executorEnv.MALLOC_ARENA_MAX": "2"}


@pytest.fixture
def archive(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    path = tmp_path / "jvm classes" / "spark.jsa"  # a space: the launcher splits options on whitespace
    path.parent.mkdir()
    path.write_bytes(b"archive")
    monkeypatch.setattr(driver_start, "class_archive_path", lambda environ: path)
    return path


def site(tmp_path: Path, text: str) -> dict[str, str]:
    (tmp_path / "spark-defaults.conf").write_text(text)
    return {"SPARK_CONF_DIR": str(tmp_path)}


def test_a_local_driver_gets_the_allocator_and_the_archive(archive: Path, tmp_path: Path) -> None:
    conf = driver_start_conf("local[*]", site(tmp_path, ""))
    assert conf == {**ALLOCATOR, "spark.driver.defaultJavaOptions":
                    f'-XX:SharedArchiveFile="{archive}" -Xlog:cds=off -Xlog:cds+dynamic=off -XX:TieredStopAtLevel=1'}


def test_a_cluster_driver_gets_the_archive_and_its_executors_nothing(archive: Path, tmp_path: Path) -> None:
    conf = driver_start_conf("spark://spark-master:7077", site(tmp_path, ""))
    assert list(conf) == ["spark.driver.defaultJavaOptions"]


def test_the_users_environment_and_the_sites_defaults_come_first(archive: Path, tmp_path: Path) -> None:
    environ = {**site(tmp_path, "# the site's\n"
                                "spark.executorEnv.MIMALLOC_PURGE_DELAY   25\n"
                                "spark.driver.defaultJavaOptions = -Dsite.default=1 \\\n"
                                "    -Xss4m\n"), TRIM: "65536"}
    conf = driver_start_conf("local[2]", environ)
    # the workers inherit the environment's TRIM; spark-defaults sets PURGE; MMAP is ours
    assert {key: value for key, value in conf.items() if key.startswith("spark.executorEnv.")} == {
        f"spark.executorEnv.{MMAP}": str(4 << 30), "spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL": "system",
        "spark.executorEnv.MALLOC_ARENA_MAX": "2"}
    # the site's default options kept whole, after ours: a flag set twice is the site's
    assert conf["spark.driver.defaultJavaOptions"].endswith(' -XX:TieredStopAtLevel=1 -Dsite.default=1 -Xss4m')


C1_ONLY = {"spark.driver.defaultJavaOptions": "-XX:TieredStopAtLevel=1"}


def test_without_a_java_to_ask_there_is_no_archive_and_no_error(tmp_path: Path) -> None:
    environ = {**site(tmp_path, ""), "PATH": str(tmp_path)}  # no java on it, no JAVA_HOME
    assert driver_start_conf("local[2]", environ) == {**ALLOCATOR, **C1_ONLY}


def test_an_archive_not_yet_written_is_not_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(driver_start, "class_archive_path", lambda environ: tmp_path / "absent.jsa")
    assert driver_start_conf("local[2]", site(tmp_path, "")) == {**ALLOCATOR, **C1_ONLY}


def test_spark_defaults_are_read_as_java_properties() -> None:
    text = ("# comment\n! also a comment\n\n"
            "spark.a  1\n"
            "spark.b=2\n"
            "spark.c : three words here  \n"
            "spark.d = first \\\n"
            "          second\n"
            "   spark.e\t5\n"
            "spark.f\n")
    assert java_properties(text) == {"spark.a": "1", "spark.b": "2", "spark.c": "three words here",
                                     "spark.d": "first second", "spark.e": "5", "spark.f": ""}


def test_a_sql_session_keeps_sparks_own_jit(archive: Path, tmp_path: Path) -> None:
    conf = driver_start_conf("local[2]", site(tmp_path, ""), c1_only=False)
    assert conf["spark.driver.defaultJavaOptions"] == (
        f'-XX:SharedArchiveFile="{archive}" -Xlog:cds=off -Xlog:cds+dynamic=off')


def test_the_properties_reader_agrees_with_java_properties_load(tmp_path: Path) -> None:
    """The cases where a naive reader loses the site's settings: a byte that is not UTF-8 (Spark
    replaces it), a continuation on the very last line, CRLF line ends, escapes in values."""
    (tmp_path / "spark-defaults.conf").write_bytes(
        b"# owner: J\xfcrgen\r\n"
        b"spark.executorEnv.MIMALLOC_PURGE_DELAY 25\r\n"
        b"spark.driver.defaultJavaOptions -Dpath=C:\\\\tmp -Dtab=a\\tb -Dletter=\\u0041 -Dq=\\q\r\n"
        b"spark\\ spaced\\:key = value\r\n"
        b"spark.last = one \\\n"
        b"   two \\")
    assert driver_start.site_spark_defaults({"SPARK_CONF_DIR": str(tmp_path)}) == {
        "spark.executorEnv.MIMALLOC_PURGE_DELAY": "25",
        "spark.driver.defaultJavaOptions": "-Dpath=C:\\tmp -Dtab=a\tb -Dletter=A -Dq=q",
        "spark spaced:key": "value",
        "spark.last": "one two"}


def test_a_submits_properties_file_is_read_instead_of_spark_defaults(archive: Path, tmp_path: Path) -> None:
    named = tmp_path / "job.properties"
    named.write_text("spark.executorEnv.MALLOC_TRIM_THRESHOLD_ 1\n")
    environ = site(tmp_path, "spark.executorEnv.MIMALLOC_PURGE_DELAY 25\n")  # not read: the file is named
    conf = driver_start_conf("local[2]", environ, properties_file=str(named))
    assert {key for key in conf if key.startswith("spark.executorEnv.")} == {
        f"spark.executorEnv.{MMAP}", f"spark.executorEnv.{PURGE}", "spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL",
        "spark.executorEnv.MALLOC_ARENA_MAX"}
