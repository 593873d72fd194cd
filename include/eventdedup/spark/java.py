"""Which Java Spark will start, and whether it is new enough: one check, one message."""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Mapping

from eventdedup.errors import EventDedupError

MINIMUM_JAVA = 17


def java_binary(environ: Mapping[str, str]) -> str:
    """The `java` Spark's launcher runs under `environ`: $JAVA_HOME's, or the first on $PATH."""
    java_home = environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java", path=environ.get("PATH"))
    if not java or not os.path.exists(java):
        raise EventDedupError(f"Java {MINIMUM_JAVA}+ is required by Spark but no 'java' was found "
                              f"(JAVA_HOME={java_home or 'unset'}); install openjdk-17-jre-headless or set JAVA_HOME")
    return java


@functools.cache
def java_version_text(java: str) -> str:
    """`java -version`'s version string, e.g. "17.0.15" (once per binary: it costs a JVM start)."""
    output = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "([^"]+)"', output)
    return match.group(1) if match else "unknown"


def require_java(environ: Mapping[str, str] | None = None) -> int:
    """Spark 4 needs Java 17+; say so plainly instead of the JVM launcher's obscure failure."""
    java = java_binary(os.environ if environ is None else environ)
    match = re.match(r"(\d+)", java_version_text(java))
    version = int(match.group(1)) if match else 0
    if version < MINIMUM_JAVA:
        raise EventDedupError(f"Java {MINIMUM_JAVA}+ is required by Spark; {java} is version {version or 'unknown'}")
    return version
