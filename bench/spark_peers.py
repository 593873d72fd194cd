"""The Spark peers, each written as a user of that tool would write it, and the process serving one:

    python -m bench.spark_peers {spark_batch|streaming} ROOT SPEC_JSON CONFIGURATION_JSON
    stdin: {"action": "settings" | "seed" | "run", "run": N, "batch_file": PATH}, a line each
    stdout: RESULT {json}, one per command

- Spark batch: `dropDuplicates` inside the batch, a left-anti join against the window's committed ids
  (Parquet), the output written as Parquet and the new ids appended.
- Structured Streaming: `withWatermark(...).dropDuplicatesWithinWatermark` on the RocksDB state store
  (changelog checkpointing on), file source, Parquet sink, `trigger(availableNow=True)`.
Both read local files (no S3A jars here).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from bench.workload import WorkloadSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EVENT_SCHEMA = "event_id STRING, created_at TIMESTAMP, user_id STRING, type STRING, props STRUCT<path: STRING, pad: STRING>"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
REPORTED_SETTINGS = ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled",
                     "spark.sql.adaptive.coalescePartitions.enabled", "spark.sql.streaming.stateStore.providerClass",
                     CHANGELOG, "spark.shuffle.compress", "spark.driver.memory")


@dataclass(frozen=True)
class PeerConfiguration:
    """A Spark peer's session; `state_snapshot`: the stream's seeded state is a RocksDB snapshot, as a
    long-running query's maintenance leaves it, not one changelog every run replays row by row."""

    name: str
    master: str
    spark_conf: dict[str, str] = field(default_factory=dict)
    state_snapshot: bool = False

    def key(self, peer: str) -> str:
        """The peer's name in the result: as configured, its bare name."""
        return peer if self.name == "as_configured" else f"{peer}_{self.name}"


def configurations(names: str, cores: int | None = None) -> list[PeerConfiguration]:
    """as_configured: the session eventdedup's build_spark_session gives on local[2] (its 8 shuffle
    partitions, not Spark's 200); tuned: as a user sizes it to the cores (4 shuffle partitions a core:
    whole waves of tasks; adaptive execution and coalescing written out, so no change of defaults
    moves the peer; Structured Streaming runs no adaptive execution)."""
    cores = cores or os.cpu_count() or 1
    known = {"as_configured": PeerConfiguration("as_configured", "local[2]"),
             "tuned": PeerConfiguration("tuned", f"local[{cores}]", {
                 "spark.sql.shuffle.partitions": str(4 * cores), "spark.sql.adaptive.enabled": "true",
                 "spark.sql.adaptive.coalescePartitions.enabled": "true"}, state_snapshot=True)}
    if unknown := [name for name in names.split(",") if name and name not in known]:
        raise SystemExit(f"unknown peer configuration(s) {unknown}: choose from {sorted(known)}")
    return [known[name] for name in names.split(",") if name]


class SparkBatchPeer:
    def __init__(self, spark: SparkSession, root: Path, spec: WorkloadSpec, configuration: PeerConfiguration) -> None:
        self.spark, self.spec, self.ids_dir, self.out_dir = spark, spec, root / "ids", root / "out"

    def run(self, batch_file: Path, run: int) -> dict:
        from pyspark.sql import functions as F

        before = set(self.ids_dir.iterdir())
        started = time.perf_counter()
        events = self.spark.read.schema(EVENT_SCHEMA).json(str(batch_file))
        window_start = self.spec.anchor - timedelta(hours=self.spec.window_hours)
        committed = self.spark.read.parquet(str(self.ids_dir)).where(F.col("event_time") >= F.lit(window_start))
        new = events.dropDuplicates(["event_id"]).join(committed.select("event_id"), "event_id", "left_anti")
        new.write.mode("overwrite").parquet(str(self.out_dir))
        written = self.spark.read.parquet(str(self.out_dir))
        written.select("event_id", F.col("created_at").alias("event_time")).write.mode("append").parquet(str(self.ids_dir))
        seconds = time.perf_counter() - started
        rows = self.spark.read.parquet(str(self.out_dir)).count()
        for path in set(self.ids_dir.iterdir()) - before:  # the next run starts from the same history
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        return {"seconds": seconds, "output_rows": rows}


class StreamingPeer:
    def __init__(self, spark: SparkSession, root: Path, spec: WorkloadSpec, configuration: PeerConfiguration) -> None:
        self.spark, self.spec, self.root, self.state_snapshot = spark, spec, root, configuration.state_snapshot
        self.source, self.seed_checkpoint = root / "source", root / "checkpoint-after-history"
        spark.conf.set("spark.sql.streaming.stateStore.providerClass",
                       "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
        spark.conf.set(CHANGELOG, "true")

    def _query(self, checkpoint: Path, out: Path):  # noqa: ANN202 (pyspark StreamingQuery)
        stream = self.spark.readStream.schema(EVENT_SCHEMA).json(str(self.source))
        deduped = stream.withWatermark("created_at", f"{self.spec.window_hours} hours").dropDuplicatesWithinWatermark(["event_id"])
        return (deduped.writeStream.format("parquet").option("path", str(out))
                .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())

    def seed(self) -> dict:
        """The history through the query once; its checkpoint is copied before every run. With
        `state_snapshot`, changelog checkpointing is off for the seed alone: it commits a snapshot."""
        self.spark.conf.set(CHANGELOG, str(not self.state_snapshot).lower())
        try:
            self._query(self.seed_checkpoint, self.root / "out-history").awaitTermination()
        finally:
            self.spark.conf.set(CHANGELOG, "true")
        self._unload_state_stores()
        return {}

    def _unload_state_stores(self) -> None:
        """Now, not at the next maintenance (every 60 s): each holds a copy of the state (3 GB at 10x)."""
        state = self.spark._jvm.org.apache.spark.sql.execution.streaming.state  # type: ignore[attr-defined]
        getattr(state, "StateStore$").__getattr__("MODULE$").stop()

    def run(self, batch_file: Path, run: int) -> dict:
        """Timed: the micro-batch's `triggerExecution` (state loading included, query start-up not), the
        favourable reading for the peer. Rows: the part files (the sink's log starts at the restored batch)."""
        checkpoint, out, target = self.root / f"checkpoint-{run}", self.root / f"out-{run}", self.source / "batch.json"
        shutil.rmtree(checkpoint, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(self.seed_checkpoint, checkpoint)
        target.unlink(missing_ok=True)
        started = time.perf_counter()
        shutil.copyfile(batch_file, target)
        query = self._query(checkpoint, out)
        query.awaitTermination()
        seconds = time.perf_counter() - started
        progress = [p for p in query.recentProgress if p["numInputRows"]]
        rows = sum(pq.ParquetFile(part).metadata.num_rows for part in out.glob("part-*.parquet"))
        target.unlink()
        self._unload_state_stores()
        shutil.rmtree(checkpoint)
        shutil.rmtree(out)
        return {"seconds": sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000,
                "output_rows": rows, "wall_seconds_with_query_start": seconds, "micro_batches": len(progress)}


def effective_setting(spark: SparkSession, key: str) -> str | None:
    """The value the session runs with: a SQL setting's default when unset, None for one without."""
    try:
        return spark.conf.get(key)
    except Exception:  # noqa: BLE001 (py4j raises a generic error for an unset key)
        return None


def serve(name: str, root: Path, spec: WorkloadSpec, configuration: PeerConfiguration) -> None:
    from eventdedup.config import SparkSettings
    from eventdedup.spark.session import build_spark_session

    spark = build_spark_session(SparkSettings(master=configuration.master), f"bench-{configuration.key(name)}",
                                configuration.spark_conf)
    peer = (StreamingPeer if name == "streaming" else SparkBatchPeer)(spark, root, spec, configuration)
    for line in sys.stdin:
        command = json.loads(line)
        if command["action"] == "settings":
            reply = {"configuration": configuration.name, "master": spark.sparkContext.master,
                     "state_snapshot": configuration.state_snapshot if name == "streaming" else None,
                     **{key: effective_setting(spark, key) for key in REPORTED_SETTINGS}}
        else:
            reply = peer.seed() if command["action"] == "seed" else peer.run(Path(command["batch_file"]), command["run"])  # type: ignore[union-attr]
        print("RESULT " + json.dumps(reply), flush=True)
    spark.stop()


def command(name: str, root: Path, spec: WorkloadSpec, configuration: PeerConfiguration) -> list[str]:
    """The command line of a process serving this peer."""
    return [sys.executable, "-m", "bench.spark_peers", name, str(root), json.dumps(spec.to_dict()),
            json.dumps(asdict(configuration))]


if __name__ == "__main__":
    serve(sys.argv[1], Path(sys.argv[2]), WorkloadSpec.from_dict(json.loads(sys.argv[3])),
          PeerConfiguration(**json.loads(sys.argv[4])))
