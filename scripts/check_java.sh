#!/usr/bin/env bash
# Spark 4 needs Java 17 or newer; say so plainly instead of letting the JVM launcher fail obscurely.
set -euo pipefail
java_bin="${JAVA_HOME:+$JAVA_HOME/bin/}java"
if ! command -v "$java_bin" >/dev/null 2>&1; then
  echo "eventdedup: Java 17+ is required by Spark but no 'java' was found." >&2
  echo "  Install it (Debian: apt-get install openjdk-17-jre-headless) or set JAVA_HOME." >&2
  exit 1
fi
version=$("$java_bin" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
if [ -z "$version" ] || [ "$version" -lt 17 ]; then
  echo "eventdedup: Java 17+ is required by Spark; found '${version:-unknown}' at $(command -v "$java_bin")." >&2
  exit 1
fi
