"""Build the SparkSession eventdedup jobs run in."""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from .config import SparkSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def build_spark_session(settings: SparkSettings, app_name: str = "eventdedup",
                        extra_conf: dict[str, str] | None = None) -> SparkSession:
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.appName(app_name)
        .master(settings.master)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", settings.driver_memory)
        # Workers must run this interpreter, the one with eventdedup and its dependencies.
        .config("spark.pyspark.python", sys.executable)
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.ui.showConsoleProgress", "false")
        # Local mode stays on loopback: no listening on external interfaces.
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
