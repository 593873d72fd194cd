"""The peers as the main bench runs them, in the order they take turns in a round: each Spark peer in
each configuration in a long-lived process and JVM of its own (bench.spark_peers; its leftovers,
garbage and RocksDB maintenance, would slow eventdedup's context), then Redis: Tapjoy's design, the
dedup step only (ids as 16 raw bytes in hashes per event hour and slice of the id; one Lua script per
hash HMGETs, claims unseen ids with an owner id and returns the duplicates; pipelined)."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import numpy as np
import orjson

from bench import ROOT
from bench.history import seed_id_parquet, seed_stream_files
from bench.spark_peers import PeerConfiguration, command
from bench.workload import HOUR_US, Workload, id_bytes
from eventdedup.keys import bucket_array
from eventdedup_dev.local_s3 import free_port

SPARK_PEERS = {"spark_batch": ("ids", seed_id_parquet), "streaming": ("source", seed_stream_files)}


class SparkPeerProcess:
    """A Spark peer served by its own long-lived process and JVM; start-up is not timed."""

    def __init__(self, name: str, root: Path, workload: Workload, configuration: PeerConfiguration) -> None:
        self.name = name
        self.process = subprocess.Popen(command(name, root, workload.spec, configuration), cwd=ROOT, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def step(self, **request: object) -> dict:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        for line in self.process.stdout:
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])
        raise RuntimeError(f"the {self.name} peer process died (exit {self.process.wait()})")

    def run(self, batch_file: Path, lines: list[bytes], run: int) -> dict:
        return self.step(action="run", run=run, batch_file=str(batch_file))

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(120)


@contextlib.contextmanager
def started_peers(work: Path, workload: Workload, wanted: list[str],
                  configured: list[PeerConfiguration]) -> Iterator[dict[str, SparkPeerProcess | RedisPeer]]:
    """The peers with their history, closed and their files removed afterwards. A Spark peer's
    configurations after the first get hard links to the first's history files (never modified:
    the batch peer adds and removes files of its own, the stream only reads)."""
    peers: dict[str, SparkPeerProcess | RedisPeer] = {}
    try:
        for name in [name for name in SPARK_PEERS if name in wanted]:
            directory, seed_files = SPARK_PEERS[name]
            for configuration in configured:
                started, key = time.perf_counter(), configuration.key(name)
                history = work / key / directory
                if configuration is configured[0]:
                    seed_files(history, workload)
                else:
                    shutil.copytree(work / configured[0].key(name) / directory, history, copy_function=os.link)
                peers[key] = SparkPeerProcess(name, work / key, workload, configuration)
                if name == "streaming":
                    peers[key].step(action="seed")
                print(f"{key} history in {time.perf_counter() - started:.1f}s", flush=True)
            if name == "streaming":  # seeded: the history's JSON and the seed's output are read no more
                for configuration in configured:
                    for history_file in (work / configuration.key(name) / directory).glob("history-*.json"):
                        history_file.unlink()
                    shutil.rmtree(work / configuration.key(name) / "out-history", ignore_errors=True)
        if "redis" in wanted:
            if shutil.which("redis-server") is None:
                raise SystemExit("redis-server is not installed: `apt-get install redis-server` (make bench does it as root)")
            started, peers["redis"] = time.perf_counter(), RedisPeer(work / "redis", workload)
            peers["redis"].seed()
            print(f"redis history in {time.perf_counter() - started:.1f}s", flush=True)
        yield peers
    finally:
        for peer in peers.values():
            peer.close()
        shutil.rmtree(work, ignore_errors=True)


def peer_settings(peers: dict) -> dict:
    """What each Spark peer's session runs with, asked of the session itself."""
    return {key: {"peer": peer.name, **peer.step(action="settings")} for key, peer in peers.items()
            if isinstance(peer, SparkPeerProcess)}


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

        self.workload, port = workload, free_port()
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

    def seed(self) -> None:
        for j in range(self.workload.spec.history_batches):
            batch = self.workload.history_batch(j)
            pipe = self.client.pipeline(transaction=False)
            for key, rows in _grouped(batch.ids, batch.times_us).items():
                pipe.hset(str(key), mapping={id_bytes(batch.ids, i): f"{batch.batch_id}:{i}".encode() for i in rows})
                if len(pipe) >= 500:
                    pipe.execute()
            pipe.execute()

    def run(self, batch_file: Path, lines: list[bytes], run: int) -> dict:
        """Dedup one round's batch, its ids parsed before the clock starts; afterwards remove what it
        claimed, so every round starts alike."""
        events = [orjson.loads(line) for line in lines]
        ids = np.array([uuid.UUID(e["event_id"]).bytes for e in events], "S16")
        times = np.array([int(datetime.fromisoformat(e["created_at"]).timestamp() * 1_000_000) for e in events])
        owners = [f"main-{run}:{i}".encode() for i in range(len(ids))]
        raw_ids = [id_bytes(ids, i) for i in range(len(ids))]
        started = time.perf_counter()
        groups = _grouped(ids, times)
        duplicates: list[int] = []
        calls: list[list[int]] = []
        pipe = self.client.pipeline(transaction=False)
        for key, rows in groups.items():
            for start in range(0, len(rows), IDS_PER_CALL):
                calls.append(rows[start:start + IDS_PER_CALL])
                self.script(keys=[str(key)], args=[v for i in calls[-1] for v in (raw_ids[i], owners[i])], client=pipe)
            if len(pipe) >= 256:
                duplicates += [part[int(i) - 1] for dupes, part in zip(pipe.execute(), calls, strict=True) for i in dupes]
                calls = []
        duplicates += [part[int(i) - 1] for dupes, part in zip(pipe.execute(), calls, strict=True) for i in dupes]
        seconds = time.perf_counter() - started
        dropped = set(duplicates)
        pipe = self.client.pipeline(transaction=False)
        for key, rows in groups.items():
            claimed = [raw_ids[i] for i in rows if i not in dropped]
            if claimed:
                pipe.hdel(str(key), *claimed)
        pipe.execute()
        return {"seconds": seconds, "output_rows": len(ids) - len(dropped), "lua_calls": len(groups)}


def _grouped(ids: np.ndarray, times_us: np.ndarray) -> dict[int, list[int]]:
    """Rows by hash: (event hour, slice of the id)."""
    groups: dict[int, list[int]] = defaultdict(list)
    for row, key in enumerate(((times_us // HOUR_US) * SLICES_PER_HOUR + bucket_array(ids, SLICES_PER_HOUR)).tolist()):
        groups[key].append(row)
    return groups
