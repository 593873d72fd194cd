"""What a Spark driver started on this host runs with beyond the job's own settings, whoever
starts it: the CLI and the bench (eventdedup.spark.session), or Airflow's operator through
a local-master spark-submit (eventdedup.spark.deployment). One home, so the two never differ.

- **The class-data archive.** Starting the driver JVM loads ~10,000 of Spark's classes, most of
  the ~6 s a local session took to start, paid by every batch. Java's application class-data
  sharing (JEP 350) maps them from an archive written once by a session that ran a task
  (`make`'s Java check: eventdedup.spark.session.write_class_archive), in the virtualenv whose jars it
  holds, named for the pyspark and Java versions. A JVM that finds it does not match its class
  path loads the classes itself: so does one whose class path starts with a $SPARK_CONF_DIR
  of the user's (Spark's launcher puts the configuration directory first on it).
- **C1 only**: the driver JVM's just-in-time compilation stops at its first tier (JIT_OPTION).
- **The workers' allocator**, on a local master only (WORKER_ALLOCATOR_ENV below). On a cluster
  the executors' environment is the deployment's, and an executor kept at its peak could
  outgrow its container's limit.

What the user has set comes first. An allocator variable in the environment the driver starts
in is inherited by the workers instead; one in the site's spark-defaults.conf is left alone
(a `--conf` would replace it). Our Java options go in `spark.driver.defaultJavaOptions`, which
Spark puts before `spark.driver.extraJavaOptions`, so a user's or site's extra options are kept
whole and, where a flag is set twice, win; a site's own default options follow ours.
"""
from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from eventdedup.errors import EventDedupError
from eventdedup.spark.java import java_binary, java_version_text

# The local Python workers keep the memory they free for their next task instead of handing it
# back to the kernel and faulting it in again, page by page: glibc's heap (Python's objects,
# numpy) is neither trimmed nor bypassed with mmap, and mimalloc (pyarrow's pool) never purges.
# The price is memory: a worker keeps its peak for life, and over many jobs in one context its
# heap fragments and creeps; a command (and a spark-submit) runs one batch per process.
# pyarrow allocates from that same glibc heap (its "system" pool) instead of mimalloc, whose
# first use in a new worker is costly (a command's batch is always a new context's first).
# What each saves: docs/performance.md, "Starting a batch".
WORKER_ALLOCATOR_ENV = {
    "MALLOC_TRIM_THRESHOLD_": str(4 << 30),
    "MALLOC_MMAP_THRESHOLD_": str(4 << 30),
    "MIMALLOC_PURGE_DELAY": "-1",  # for a user who sets the mimalloc pool back
    "ARROW_DEFAULT_MEMORY_POOL": "system",
    # glibc gives each thread that allocates its own arena (up to 8 per core), and with trimming
    # off every arena keeps its own peak: a worker's 16 I/O threads made its heap grow with every
    # batch. Two arenas keep it flat after the second job, and no slower.
    "MALLOC_ARENA_MAX": "2",
}
DEFAULT_JAVA_OPTIONS = "spark.driver.defaultJavaOptions"


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def driver_start_conf(master: str, environ: Mapping[str, str], c1_only: bool = True,
                      properties_file: str | None = None) -> dict[str, str]:
    """The settings a driver this host starts under `environ` (the environment spark-submit, or
    the driver JVM pyspark launches, runs in) adds to the job's, for `master`. `c1_only=False`
    leaves the JIT Spark's (a SQL session: the bench's peers); `properties_file` is the submit's
    --properties-file, read instead of spark-defaults.conf as spark-submit does."""
    site = site_spark_defaults(environ, properties_file)
    conf: dict[str, str] = {}
    if is_local_master(master):
        conf.update({f"spark.executorEnv.{name}": value for name, value in WORKER_ALLOCATOR_ENV.items()
                     if name not in environ and f"spark.executorEnv.{name}" not in site})
    options = " ".join(filter(None, [driver_java_options(environ, c1_only), site.get(DEFAULT_JAVA_OPTIONS, "")]))
    if options:
        conf[DEFAULT_JAVA_OPTIONS] = options
    return conf


# The driver JVM lives for one batch, and on a 2-core host its C2 compiler threads take CPU from
# the Python workers for code it will barely run again; the JVM moves bytes between pipes and
# files, and C1's code does that as well as C2's (docs/performance.md, "Starting a batch").
JIT_OPTION = "-XX:TieredStopAtLevel=1"


def driver_java_options(environ: Mapping[str, str], c1_only: bool = True) -> str:
    """C1 only (unless not wanted), and the archive's option when there is one for the Java
    `environ` runs. Without a Java to ask there is no archive to name: the launcher that follows
    will say Java is missing."""
    try:
        archive: Path | None = class_archive_path(environ)
    except EventDedupError:
        archive = None
    options = [archive_option(archive)] if archive and archive.exists() else []
    return " ".join([*options, JIT_OPTION] if c1_only else options)


def class_archive_path(environ: Mapping[str, str]) -> Path:
    """Where this environment's driver class-data archive for the Java of `environ` lives (it
    may not exist)."""
    from importlib.metadata import version

    java = java_version_text(java_binary(environ))
    name = f"spark-{version('pyspark')}-java-{re.sub(r'[^0-9A-Za-z.]+', '_', java)}.jsa"
    return Path(sys.prefix) / "share" / "eventdedup" / name


def archive_option(archive: Path) -> str:
    # Quoted: Spark's launcher splits Java options on whitespace, and a virtualenv's path may hold
    # a space. -Xlog:cds=off: a stale archive (another class path) is skipped without a warning.
    return f'-XX:SharedArchiveFile="{archive}" -Xlog:cds=off -Xlog:cds+dynamic=off'


def site_spark_defaults(environ: Mapping[str, str], properties_file: str | None = None) -> dict[str, str]:
    """The settings file spark-submit reads under `environ`: `properties_file` when the submit
    names one (--properties-file), else spark-defaults.conf in $SPARK_CONF_DIR, $SPARK_HOME/conf,
    or the installed pyspark's conf (a pip-installed Spark's home)."""
    if properties_file:
        path = Path(properties_file)
    else:
        conf_dir = environ.get("SPARK_CONF_DIR")
        if not conf_dir:
            spark_home = environ.get("SPARK_HOME")
            if not spark_home:
                spec = importlib.util.find_spec("pyspark")
                spark_home = str(Path(spec.origin).parent) if spec and spec.origin else ""
            conf_dir = str(Path(spark_home) / "conf") if spark_home else ""
        path = Path(conf_dir) / "spark-defaults.conf"
    try:
        # as Spark reads it: UTF-8, a byte that is not replaced, never the whole file lost
        return java_properties(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return {}


def java_properties(text: str) -> dict[str, str]:
    """Keys and values of a Java properties file as Spark reads spark-defaults.conf
    (java.util.Properties.load, values trimmed): comments (# !), continued lines (an odd run of
    trailing backslashes), a key ending at an unescaped '=', ':' or whitespace, and escapes
    (\\t \\n \\r \\f \\uXXXX; any other escaped character is itself)."""
    properties: dict[str, str] = {}
    logical = ""
    for line in re.split(r"\r\n|\r|\n", text):
        stripped = line.lstrip(" \t\f")
        if not logical and (not stripped or stripped[0] in "#!"):
            continue
        if (len(stripped) - len(stripped.rstrip("\\"))) % 2:
            logical += stripped[:-1]
            continue
        _add_property(properties, logical + stripped)
        logical = ""
    if logical:  # a continuation on the last line ends the file's last property
        _add_property(properties, logical)
    return properties


_PROPERTY = re.compile(r"((?:\\.|[^\s=:\\])+)[ \t\f]*[=:]?[ \t\f]*(.*)", re.DOTALL)
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_ESCAPED = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _add_property(properties: dict[str, str], logical: str) -> None:
    match = _PROPERTY.match(logical)
    if match:
        properties[_unescape(match.group(1))] = _unescape(match.group(2)).strip()


def _unescape(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        return chr(int(code[1:], 16)) if code[0] == "u" and len(code) == 5 else _ESCAPED.get(code, code)

    return _ESCAPE.sub(one, text)
