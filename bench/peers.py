"""The systems eventdedup is measured against, each written as a user of that tool would write it.

- Spark batch: `dropDuplicates` inside the batch, then a left-anti join against the committed
  ids of the window (Parquet), output written as Parquet and the new ids appended.
- Structured Streaming: `withWatermark(...).dropDuplicatesWithinWatermark` with the RocksDB state
  store provider (changelog checkpointing on, as Spark's guide recommends), file source, Parquet
  sink, `trigger(availableNow=True)` as a scheduler would run it.
- Redis: Tapjoy's design (seeds/003): ids as 16 raw bytes in hashes bucketed by event hour and
  a slice of the id, one Lua script per hash that HMGETs, claims unseen ids with an owner id and
  returns the duplicates, pipelined. Only the dedup step: no parsing, no output.

Both Spark peers read local files (no S3A jars here); eventdedup reads and writes the S3 server.

Each Spark peer runs in two configurations (PeerConfiguration): "as configured", the session the
bench has always given it (eventdedup's build_spark_session on local[2], which carries the job's
8 shuffle partitions), and "tuned for the machine", sized by a stated rule from the cores.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow.parquet as pq
from workload import HOUR_US, Workload, id_bytes

from eventdedup.keys import bucket_array
from eventdedup_dev.local_s3 import free_port

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EVENT_SCHEMA = ("event_id STRING, created_at TIMESTAMP, user_id STRING, type STRING, "
                "props STRUCT<path: STRING, pad: STRING>")
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


# A Spark user sizing a session to the machine: shuffle partitions a small multiple of the cores
# (each core gets whole waves of tasks, none a sliver), adaptive execution left on with its
# partition coalescing (Spark's defaults, written out so that neither a change of Spark's default
# nor of eventdedup's own session settings moves the peer). Structured Streaming runs no adaptive
# execution, and its state store keeps the partition count of the checkpoint's first run.
PARTITIONS_PER_CORE = 4
# The settings a peer reports (peer_run's "settings" action), so the result says what ran.
REPORTED_SETTINGS = ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled",
                     "spark.sql.adaptive.coalescePartitions.enabled", "spark.sql.streaming.stateStore.providerClass",
                     "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "spark.shuffle.compress",
                     "spark.driver.memory")


@dataclass(frozen=True)
class PeerConfiguration:
    """How a Spark peer's session is configured and its streaming state seeded.

    `state_snapshot`: the streaming peer's seeded state is written as a RocksDB snapshot, as a
    long-running query's state is (its maintenance snapshots the store every few versions), rather
    than as one changelog of the whole history that every measured run replays row by row."""

    name: str
    master: str
    spark_conf: dict[str, str] = field(default_factory=dict)
    state_snapshot: bool = False

    def key(self, peer: str) -> str:
        """The peer's name in the result: the as-configured peer keeps its historical name."""
        return peer if self.name == "as_configured" else f"{peer}_{self.name}"

    def to_json(self) -> str:
        return json.dumps({"name": self.name, "master": self.master, "spark_conf": self.spark_conf,
                           "state_snapshot": self.state_snapshot})

    @staticmethod
    def from_json(text: str) -> PeerConfiguration:
        return PeerConfiguration(**json.loads(text))


AS_CONFIGURED = PeerConfiguration("as_configured", "local[2]")


def tuned_for_machine(cores: int | None = None) -> PeerConfiguration:
    cores = cores or os.cpu_count() or 1
    return PeerConfiguration("tuned", f"local[{cores}]", {
        "spark.sql.shuffle.partitions": str(PARTITIONS_PER_CORE * cores),
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
    }, state_snapshot=True)


def configurations(names: str) -> list[PeerConfiguration]:
    known = {"as_configured": AS_CONFIGURED, "tuned": tuned_for_machine()}
    unknown = [name for name in names.split(",") if name and name not in known]
    if unknown:
        raise SystemExit(f"unknown peer configuration(s) {unknown}: choose from {sorted(known)}")
    return [known[name] for name in names.split(",") if name]


@dataclass(frozen=True)
class PeerRun:
    seconds: float
    output_rows: int
    detail: dict


class SparkBatchPeer:
    def __init__(self, spark: SparkSession, root: Path, workload: Workload) -> None:
        self.spark, self.workload = spark, workload
        self.ids_dir, self.out_dir = root / "ids", root / "out"

    def run(self, batch_file: Path) -> PeerRun:
        from pyspark.sql import functions as F

        spark, spec = self.spark, self.workload.spec
        before = set(self.ids_dir.iterdir())
        window_start = spec.anchor - timedelta(hours=spec.window_hours)
        started = time.perf_counter()
        events = spark.read.schema(EVENT_SCHEMA).json(str(batch_file))
        committed = spark.read.parquet(str(self.ids_dir)).where(F.col("event_time") >= F.lit(window_start))
        new = events.dropDuplicates(["event_id"]).join(committed.select("event_id"), "event_id", "left_anti")
        new.write.mode("overwrite").parquet(str(self.out_dir))
        written = spark.read.parquet(str(self.out_dir))
        written.select("event_id", F.col("created_at").alias("event_time")).write.mode("append").parquet(str(self.ids_dir))
        seconds = time.perf_counter() - started
        rows = spark.read.parquet(str(self.out_dir)).count()
        for path in set(self.ids_dir.iterdir()) - before:  # the next run starts from the same history
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        return PeerRun(seconds, rows, {})


class StreamingPeer:
    def __init__(self, spark: SparkSession, root: Path, workload: Workload, state_snapshot: bool = False) -> None:
        self.spark, self.workload, self.root = spark, workload, root
        self.state_snapshot = state_snapshot
        self.source, self.seed_checkpoint = root / "source", root / "checkpoint-after-history"
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
        spark.conf.set("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")

    def _query(self, checkpoint: Path, out: Path):  # noqa: ANN202 (pyspark StreamingQuery)
        window = self.workload.spec.window_hours
        stream = self.spark.readStream.schema(EVENT_SCHEMA).json(str(self.source))
        deduped = stream.withWatermark("created_at", f"{window} hours").dropDuplicatesWithinWatermark(["event_id"])
        return (deduped.writeStream.format("parquet").option("path", str(out))
                .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())

    def seed(self) -> float:
        """Run the history through the query once; its checkpoint (with the RocksDB state) is
        copied before every measured run, so each run sees the same history. With `state_snapshot`
        the seed commits a snapshot (changelog checkpointing off for it alone): the measured runs
        then load the state as a long-running query's restart would, and write changelogs."""
        changelog = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
        started = time.perf_counter()
        if self.state_snapshot:
            self.spark.conf.set(changelog, "false")
        try:
            query = self._query(self.seed_checkpoint, self.root / "out-history")
            query.awaitTermination()
        finally:
            self.spark.conf.set(changelog, "true")
        seconds = time.perf_counter() - started
        self._unload_state_stores()
        return seconds

    def _unload_state_stores(self) -> None:
        """Unload the finished query's state stores now rather than at the next maintenance
        (every 60 s): each holds a local copy of the whole state (3 GB at 10x history), which
        would pile up run after run, and the next run then starts with no other store loaded."""
        state = self.spark._jvm.org.apache.spark.sql.execution.streaming.state  # type: ignore[attr-defined]
        getattr(state, "StateStore$").__getattr__("MODULE$").stop()

    def run(self, batch_file: Path, run: int) -> PeerRun:
        checkpoint, out = self.root / f"checkpoint-{run}", self.root / f"out-{run}"
        shutil.rmtree(checkpoint, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(self.seed_checkpoint, checkpoint)
        target = self.source / "batch.json"
        target.unlink(missing_ok=True)
        started = time.perf_counter()
        shutil.copyfile(batch_file, target)
        query = self._query(checkpoint, out)
        query.awaitTermination()
        seconds = time.perf_counter() - started
        progress = [p for p in query.recentProgress if p["numInputRows"]]
        # The sink's own log starts at the restored batch number, so count the part files directly.
        rows = sum(pq.ParquetFile(part).metadata.num_rows for part in out.glob("part-*.parquet"))
        trigger_ms = sum(p["durationMs"].get("triggerExecution", 0) for p in progress)
        target.unlink()
        self._unload_state_stores()
        shutil.rmtree(checkpoint)
        shutil.rmtree(out)
        # The micro-batch itself (state store loads included, query start-up not) is what the
        # ratio uses: the favourable reading for the peer.
        return PeerRun(trigger_ms / 1000, rows, {"wall_seconds_with_query_start": seconds,
                                                 "micro_batches": len(progress)})


# Tapjoy's script: HMGET once, claim what is unclaimed (or already ours), return the duplicates.
DEDUP_LUA = """
local n = #ARGV / 2
local ids = {}
for i = 1, n do ids[i] = ARGV[2 * i - 1] end
local current = redis.call('HMGET', KEYS[1], unpack(ids))
local claimed, claims, dupes = {}, {}, {}
for i = 1, n do
  local id, owner = ARGV[2 * i - 1], ARGV[2 * i]
  local holder = current[i] or claimed[id]
  if not holder then
    claimed[id] = owner
    claims[#claims + 1] = id
    claims[#claims + 1] = owner
  elseif holder ~= owner then
    dupes[#dupes + 1] = i
  end
end
if #claims > 0 then redis.call('HSET', KEYS[1], unpack(claims)) end
return dupes
"""
SLICES_PER_HOUR = 2048  # ~500 ids per hash at 1M ids an hour: inside the listpack limit below
IDS_PER_CALL = 1000  # Lua's unpack() stack limit


class RedisPeer:
    def __init__(self, root: Path, workload: Workload) -> None:
        import redis

        self.workload = workload
        port = free_port()
        root.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(root), "--hash-max-listpack-entries", "1024", "--hash-max-listpack-value", "64"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.client = redis.Redis(host="127.0.0.1", port=port)
        for _ in range(100):
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        self.script = self.client.register_script(DEDUP_LUA)

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)

    def memory_bytes(self) -> int:
        return int(self.client.info("memory")["used_memory"])

    @staticmethod
    def hash_keys(ids: np.ndarray, times_us: np.ndarray) -> np.ndarray:
        return (times_us // HOUR_US) * SLICES_PER_HOUR + bucket_array(ids, SLICES_PER_HOUR)

    def seed(self) -> float:
        started = time.perf_counter()
        for j in range(self.workload.spec.history_batches):
            batch = self.workload.history_batch(j)
            owners = [f"{batch.batch_id}:{i}".encode() for i in range(len(batch.ids))]
            groups = self._grouped(batch.ids, batch.times_us)
            pipe = self.client.pipeline(transaction=False)
            for key, rows in groups.items():
                mapping = {id_bytes(batch.ids, i): owners[i] for i in rows}
                pipe.hset(str(key), mapping=mapping)
                if len(pipe) >= 500:
                    pipe.execute()
            pipe.execute()
        return time.perf_counter() - started

    def _grouped(self, ids: np.ndarray, times_us: np.ndarray) -> dict[int, list[int]]:
        groups: dict[int, list[int]] = defaultdict(list)
        for row, key in enumerate(self.hash_keys(ids, times_us).tolist()):
            groups[key].append(row)
        return groups

    def run(self, ids: np.ndarray, times_us: np.ndarray, batch_id: str) -> PeerRun:
        """Dedup one batch; afterwards remove what it claimed, so every run starts alike."""
        owners = [f"{batch_id}:{i}".encode() for i in range(len(ids))]
        raw_ids = [id_bytes(ids, i) for i in range(len(ids))]
        started = time.perf_counter()
        groups = self._grouped(ids, times_us)
        duplicates: list[int] = []
        calls: list[tuple[int, list[int]]] = []
        pipe = self.client.pipeline(transaction=False)
        for key, rows in groups.items():
            for start in range(0, len(rows), IDS_PER_CALL):
                part = rows[start:start + IDS_PER_CALL]
                args = [value for i in part for value in (raw_ids[i], owners[i])]
                self.script(keys=[str(key)], args=args, client=pipe)
                calls.append((key, part))
            if len(pipe) >= 256:
                duplicates += _positions(pipe.execute(), calls)
                calls = []
        duplicates += _positions(pipe.execute(), calls)
        seconds = time.perf_counter() - started
        dropped = set(duplicates)
        pipe = self.client.pipeline(transaction=False)
        for key, rows in groups.items():
            claimed = [raw_ids[i] for i in rows if i not in dropped]
            if claimed:
                pipe.hdel(str(key), *claimed)
        pipe.execute()
        return PeerRun(seconds, len(ids) - len(dropped), {"lua_calls": sum(1 for _ in groups)})


def _positions(results: list, calls: list[tuple[int, list[int]]]) -> list[int]:
    return [part[int(i) - 1] for dupes, (_, part) in zip(results, calls, strict=False) for i in dupes]
