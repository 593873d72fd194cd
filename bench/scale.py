"""`make bench-scale`: what one batch reads and writes at production density, by kind of object.

    .venv/bin/python bench/scale.py [--rates 100000,1000000,10000000] [--windows 24,168]
        [--fills 1,10,100] [--partition-times event,id] [--max-seed-ids 40000000] [--out FILE]

Years of 5-minute batches are not run: the steady state they leave is written directly, with
the project's own writers (`encode_segment`, `IdGuard`, `write_commit`, checkpoints), for one
sampled bucket of the cache's 16, as those batches would have left it:

- a stream of `rate` events per 5-minute batch, 12 batches an hour, each an interval batch
  committed in order; a bucket holds 1/16 of each batch's ids;
- of each batch's events 99 % are dated in its arrival hour, 1 % are stragglers dated 24-48 hours
  before it (their runs land in old hours' segments, as late events' do);
- the window is `fill` % full: arrivals span the last fill x window hours (1 hour at least);
- each hour's chain of segments as the job leaves it: every run committed to the hour, merged by
  the shipped chain policy batch by batch (what merges cost over the batches is played
  separately, `merge_costs`),
  each arrival hour's id guard holding every id of that hour (none under partition_time = "id"),
  superseded versions deleted as the maintenance DAG deletes them.

Then one real batch runs against it (Spark, the local S3 server, through a counting proxy): the
sampled bucket's share of a 5-minute batch, arriving in the 7th slot of the newest hour, made
of 96 % new ids, 1 % in-batch copies, 1 % exact copies of ids committed earlier in the hour,
1 % stragglers, 0.5 % copies re-stamped now of ids committed 2-20 hours ago (found only
through the guard under event partitioning) and 0.5 % exact late copies of ids 30 hours old.
Its output rows are checked against that composition (the bench fails on a wrong count).

Per batch it reports requests and bytes read and written per kind of object (input, hour
segments, id guards, state: the log, checkpoints, markers, view; output: data, audit,
manifests, staging), CPU seconds per stage, and each figure extrapolated to all 16 buckets
(input, segments, guards and output grow with the buckets; the state does not), cold (no
executor-local copies) and warm (after a batch before it read the window on the same executor:
copies of every cache object but those the last commit wrote). A store that would hold more
than --max-seed-ids entries in the sampled bucket is not built on this machine; those cells are
extrapolated linearly in fill from the 1 % and 10 % runs of the same configuration, and
labelled so.

Separately, the state at 1,000 input objects per batch: a checkpoint whose ledger holds two
windows of inputs plus 9 commits, its load time (median of 3).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from process_cpu import SampledCpu, spark_groups, spark_phase  # noqa: E402
from workload import HOUR_US, event_line  # noqa: E402

from eventdedup.cache.guard import IdGuard, encode_guard  # noqa: E402
from eventdedup.cache.heads import ChainPolicy  # noqa: E402
from eventdedup.cache.identity import check_cache_identity  # noqa: E402
from eventdedup.cache.local_copies import LocalCopies, LocalCopySettings  # noqa: E402
from eventdedup.cache.segment import CacheRun, encode_segment  # noqa: E402
from eventdedup.cache.segment_parts import ENTRY_BYTES  # noqa: E402
from eventdedup.commit.changes import BatchChange  # noqa: E402
from eventdedup.commit.ledger import IngestionLedger, LedgerUpdate, write_part  # noqa: E402
from eventdedup.commit.ledger_reader import LedgerReader  # noqa: E402
from eventdedup.commit.log import (  # noqa: E402
    forget_loaded_states,
    load_committed_state,
    write_checkpoint_if_due,
    write_commit,
)
from eventdedup.commit.records import CommitRecord, PromotedObject  # noqa: E402
from eventdedup.commit.state import CommittedState  # noqa: E402
from eventdedup.config import Config, config_from_mapping  # noqa: E402
from eventdedup.counts import BatchCounts  # noqa: E402
from eventdedup.inputs.intervals import batch_id_for_interval  # noqa: E402
from eventdedup.inputs.manifest import freeze_batch_inputs  # noqa: E402
from eventdedup.inputs.selector import InputSelector  # noqa: E402
from eventdedup.job.driver import run_dedup_job  # noqa: E402
from eventdedup.keys import CacheKey, bucket_array, guard_head_key, hour_index_at  # noqa: E402
from eventdedup.layout import GUARD_SUFFIX, SEGMENT_SUFFIX, Layout  # noqa: E402
from eventdedup.parse.event_parser import parse_event  # noqa: E402
from eventdedup.parse.rules import ParseRules  # noqa: E402
from eventdedup.promotion.promote import promote_batch  # noqa: E402
from eventdedup.s3store import ObjectInfo, S3Store, make_client  # noqa: E402
from eventdedup.spark.session import build_spark_context  # noqa: E402
from eventdedup_dev.local_s3 import LocalS3Process, use_local_credentials  # noqa: E402
from eventdedup_dev.s3_fault_proxy import FaultProxy  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
BUCKETS = 16  # the shipped default of a new cache
SAMPLED = 0  # the bucket the store is built for and the batch holds
SHIPPED_CHAINS = ChainPolicy()  # the chain policy batches use (eventdedup.cache.heads)
BATCHES_PER_HOUR = 12
MEASURED_SLOT = 6  # the measured batch arrives after six batches of its hour
ANCHOR_HOUR = int(datetime(2026, 11, 22, 12, tzinfo=timezone.utc).timestamp()) // 3600
STRAGGLERS = 0.01
INPUT_OBJECTS = 8
KINDS = ("input", "segments", "guards", "state", "output")
PER_BUCKET_KINDS = ("input", "segments", "guards", "output")


@dataclass(frozen=True)
class ScaleSpec:
    rate: int  # events per 5-minute batch
    window: int  # hours
    fill: int  # percent of the window the store holds
    partition_time: str

    @property
    def per_bucket(self) -> int:
        return self.rate // BUCKETS

    @property
    def seeded_hours(self) -> int:
        return max(1, round(self.window * self.fill / 100))

    @property
    def seeded_ids(self) -> int:
        return self.per_bucket * (self.seeded_hours * BATCHES_PER_HOUR + MEASURED_SLOT)

    @property
    def label(self) -> str:
        return f"{self.rate:,}/5min {self.window}h {self.partition_time} {self.fill}%"


@dataclass(frozen=True)
class Composition:
    """The measured batch (the sampled bucket's share), by what each event is."""

    fresh: int
    in_batch: int  # exact copies of fresh events of the batch
    same_hour: int  # exact copies of ids committed earlier in the hour
    stragglers: int  # new ids dated 24-48 hours back
    restamped: int  # copies of ids committed 2-20 hours ago, dated now (synthetic: renamed, emitted)
    late: int  # exact copies of ids committed 30 hours ago, with their time then

    @classmethod
    def of(cls, events: int) -> Composition:
        one, half = events // 100, events // 200
        return cls(events - 4 * one - 2 * half, one, one, one, half, half)

    @property
    def expected_output(self) -> int:
        return self.fresh + self.stragglers + self.restamped


def hour_time(hour: int, minute_us: int = 0) -> int:
    return hour * HOUR_US + minute_us


def interval_id(hour: int, slot: int) -> str:
    return batch_id_for_interval(datetime.fromtimestamp(hour * 3600 + slot * 300, timezone.utc))


class Ids:
    """Ids as the parser digests them (a canonical UUID's 16 bytes). Under id partitioning an id
    that is sent is a UUIDv7 whose milliseconds are its event time; otherwise a v4."""

    def __init__(self, rng: np.random.Generator, partition_time: str) -> None:
        self.rng, self.version = rng, 0x70 if partition_time == "id" else 0x40

    def anonymous(self, count: int) -> np.ndarray:
        """Committed ids the measured batch never sends: any 16 bytes digest and hash alike."""
        return np.frombuffer(self.rng.bytes(16 * count), "S16").copy()

    def sent(self, times_us: np.ndarray) -> np.ndarray:
        """One id of the sampled bucket per event time."""
        out = np.empty(len(times_us), "S16")
        filled = 0
        while filled < len(out):
            raw = self.rng.integers(0, 256, size=(max(64, (len(out) - filled) * BUCKETS * 2), 16), dtype=np.uint8)
            raw[:, 6] = (raw[:, 6] & 0x0F) | self.version
            raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80
            ids = raw.view("S16").reshape(-1)
            kept = ids[bucket_array(ids, BUCKETS) == SAMPLED][:len(out) - filled]
            out[filled:filled + len(kept)] = kept
            filled += len(kept)
        if self.version == 0x70:
            raw = out.view(np.uint8).reshape(-1, 16)
            raw[:, :6] = (times_us // 1000).astype(">u8").view(np.uint8).reshape(-1, 8)[:, 2:]
            out = raw.view("S16").reshape(-1)
            keep = bucket_array(out, BUCKETS) == SAMPLED  # the time changed the bucket: draw those again
            if not keep.all():
                out[~keep] = self.sent(times_us[~keep])
        return out


def id_of(digests: np.ndarray, i: int) -> bytes:
    return digests.view(np.uint8).reshape(-1, 16)[i].tobytes()


@dataclass(frozen=True)
class Plant:
    kind: str
    version: int  # the seeded batch that committed it
    digest: bytes
    fingerprint: int
    hour: int  # its cache hour
    line: bytes  # as first sent
    time_us: int


class SeededStore:
    """The steady state of the sampled bucket, written as the batches before would have left it."""

    def __init__(self, store: S3Store, config: Config, spec: ScaleSpec, rng: np.random.Generator) -> None:
        self.store, self.config, self.spec, self.rng = store, config, spec, rng
        self.layout = Layout(config.layout)
        self.ids = Ids(rng, spec.partition_time)
        # A new store: its identity will record the new-store hash (write() records it first).
        self.rules = ParseRules.for_batch(config, measured_as_of(),
                                          fingerprint_hash=config.dedup.new_store_fingerprint_hash)

    def batches(self) -> list[tuple[str, int]]:
        """(batch id, arrival hour) of every seeded batch, in commit order (version = index + 1)."""
        first = ANCHOR_HOUR - self.spec.seeded_hours
        slots = [(hour, slot) for hour in range(first, ANCHOR_HOUR) for slot in range(BATCHES_PER_HOUR)]
        slots += [(ANCHOR_HOUR, slot) for slot in range(MEASURED_SLOT)]
        return [(interval_id(hour, slot), hour) for hour, slot in slots]

    def write(self, composition: Composition) -> list[Plant]:
        identity = check_cache_identity(self.store, self.layout, self.config)
        assert identity.fingerprint_hash == self.rules.fingerprint.algorithm
        batches = self.batches()
        plants = self.plant(composition, batches)
        by_version: dict[int, list[Plant]] = defaultdict(list)
        for plant in plants:
            by_version[plant.version].append(plant)
        runs: dict[int, list[tuple[int, CacheRun]]] = defaultdict(list)  # cache hour -> (version, run)
        guard_parts: dict[int, list[tuple[int, np.ndarray, np.ndarray]]] = defaultdict(list)  # arrival hour ->
        for version, (batch_id, arrival) in enumerate(batches, start=1):
            count = self.spec.per_bucket
            late = self.rng.random(count) < STRAGGLERS
            hours = np.where(late, arrival - self.rng.integers(24, 49, count), arrival).astype(np.int64)
            digests = self.ids.anonymous(count)
            fingerprints = self.rng.integers(0, 2**63, count).astype(np.uint64)
            mine = by_version.get(version, [])
            if mine:
                digests = np.concatenate([digests, np.array([p.digest for p in mine], "S16")])
                fingerprints = np.concatenate([fingerprints, np.array([p.fingerprint for p in mine], np.uint64)])
                hours = np.concatenate([hours, np.array([p.hour for p in mine], np.int64)])
            for hour in np.unique(hours).tolist():
                rows = hours == hour
                runs[hour].append((version, CacheRun.build(batch_id, digests[rows], fingerprints[rows])))
            if self.config.dedup.uses_id_guards:
                guard_parts[arrival].append((version, digests, hours))
        heads, bases = self._write_heads(batches, runs, guard_parts)
        self._write_log(batches, heads, bases)
        self.last_commit_objects = sorted(heads[len(batches)].values())
        return plants

    def plant(self, composition: Composition, batches: list[tuple[str, int]]) -> list[Plant]:
        """The committed ids the measured batch re-sends, with the lines first sent."""
        by_hour: dict[int, list[int]] = defaultdict(list)
        for version, (_, arrival) in enumerate(batches, start=1):
            by_hour[arrival].append(version)
        oldest = min(by_hour)
        restamp_hours = [h for h in range(max(oldest, ANCHOR_HOUR - 20), ANCHOR_HOUR - 1)] or [ANCHOR_HOUR]
        sources = {
            "same_hour": (composition.same_hour, [ANCHOR_HOUR]),
            "restamped": (composition.restamped, restamp_hours),
            "late": (composition.late, [max(oldest, ANCHOR_HOUR - 30)]),
        }
        plants = []
        for kind, (count, hours) in sources.items():
            hour_of = np.array(hours, np.int64)[self.rng.integers(0, len(hours), count)]
            times = hour_of * HOUR_US + self.rng.integers(0, HOUR_US // 2, count)  # first half: before as_of
            digests = self.ids.sent(times)
            for i in range(count):
                hour = int(hour_of[i])
                versions = by_hour[hour]
                version = versions[int(self.rng.integers(0, len(versions)))]
                line = event_line(id_of(digests, i), int(times[i]))
                plants.append(Plant(kind, version, id_of(digests, i), parse_event(line, self.rules).fingerprint,
                                    hour, line, int(times[i])))
        return plants

    def _write_heads(self, batches: list[tuple[str, int]], runs: dict[int, list[tuple[int, CacheRun]]],
                     guard_parts: dict[int, list[tuple[int, np.ndarray, np.ndarray]]],
                     ) -> tuple[dict[int, dict[str, str]], dict[int, dict[str, tuple[str, ...]]]]:
        """Every key's chain as the batches left it: each hour's runs, in commit order, merged by
        the shipped chain policy (eventdedup.cache.heads) as the job merges them; the objects a
        later merge superseded are not written (maintenance deletes them). Guards: each arrival
        hour's last version. Returns what each version's commit names: head -> object, and head
        -> the objects it builds on."""
        named: dict[int, dict[str, str]] = defaultdict(dict)
        bases: dict[int, dict[str, tuple[str, ...]]] = defaultdict(dict)
        uploads: list[tuple[str, bytes]] = []
        for hour, hour_runs in runs.items():
            key = CacheKey.of_hour(hour, SAMPLED)
            chain: list[tuple[str, list[CacheRun], int]] = []  # (object key, its runs, its bytes)
            for version, run in sorted(hour_runs, key=lambda item: item[0]):
                merge = SHIPPED_CHAINS.objects_to_merge([size for _, _, size in chain], len(run) * ENTRY_BYTES)
                kept, merged = chain[:len(chain) - merge], chain[len(chain) - merge:]
                held = [r for _, object_runs, _ in merged for r in object_runs] + [run]
                object_key = self.layout.final_cache_segment(batches[version - 1][0], key)
                chain = [*kept, (object_key, held, sum(len(r) for r in held) * ENTRY_BYTES)]
                named[version][str(key)] = object_key
                if kept:
                    bases[version][str(key)] = tuple(object_key for object_key, _, _ in kept)
            uploads += [(object_key, encode_segment(object_runs)) for object_key, object_runs, _ in chain]
        for arrival, parts in guard_parts.items():
            name = guard_head_key(arrival, SAMPLED)
            for version, _, _ in parts:
                named[version][name] = self.layout.final_guard(batches[version - 1][0], arrival, SAMPLED)
            guard = IdGuard.empty().with_ids(np.concatenate([d for _, d, _ in parts]),
                                             np.concatenate([h for _, _, h in parts]))
            uploads.append((named[max(v for v, _, _ in parts)][name], encode_guard(guard)))
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda item: self.store.put_bytes(*item), uploads))
        return named, bases

    def _write_log(self, batches: list[tuple[str, int]], named: dict[int, dict[str, str]],
                   bases: dict[int, dict[str, tuple[str, ...]]]) -> None:
        state = CommittedState()
        for version, (batch_id, arrival) in enumerate(batches, start=1):
            as_of = datetime.fromtimestamp(int(datetime.strptime(batch_id, "%Y%m%dT%H%M%SZ").replace(
                tzinfo=timezone.utc).timestamp()) + 300, timezone.utc)
            record = CommitRecord(
                version=version, batch_id=batch_id, previous_batch_id=state.last_batch_id, token=f"scale-{version}",
                as_of=as_of.isoformat(), counts=BatchCounts(input_lines=self.spec.rate, output_rows=self.spec.rate),
                objects=tuple(PromotedObject("cache", key, 0, "") for key in named[version].values()),
                cache_heads=named[version],
                change=BatchChange(window_start_hour=arrival - self.spec.window,
                                   retain_from_hour=arrival - 2 * self.spec.window,
                                   ledger_update=LedgerUpdate((ObjectInfo(f"landing/{batch_id}.jsonl", 1, "e"),)),
                                   partitions=2, interval=True, arrival_hour=arrival),
                cache_bases=bases[version])
            write_commit(self.store, self.layout, record)
            state = state.apply(record, self.layout.commit(version))
            state = write_checkpoint_if_due(self.store, self.layout, state, self.config.dedup.checkpoint_interval)


def measured_as_of() -> datetime:
    return datetime.fromtimestamp(ANCHOR_HOUR * 3600 + 35 * 60, timezone.utc)


def measured_lines(composition: Composition, plants: list[Plant], ids: Ids, rng: np.random.Generator) -> list[bytes]:
    """The measured batch's events in a shuffled order (copies before and after their originals)."""
    fresh_times = ANCHOR_HOUR * HOUR_US + rng.integers(0, HOUR_US // 2, composition.fresh)
    fresh_ids = ids.sent(fresh_times)
    lines = [event_line(id_of(fresh_ids, i), int(fresh_times[i])) for i in range(composition.fresh)]
    lines += lines[:composition.in_batch]
    straggler_times = (ANCHOR_HOUR - rng.integers(24, 49, composition.stragglers)) * HOUR_US + rng.integers(
        0, HOUR_US, composition.stragglers)
    straggler_ids = ids.sent(straggler_times)
    lines += [event_line(id_of(straggler_ids, i), int(straggler_times[i])) for i in range(composition.stragglers)]
    for plant in plants:
        if plant.kind == "restamped":
            lines.append(event_line(plant.digest, ANCHOR_HOUR * HOUR_US + int(rng.integers(0, HOUR_US // 2))))
        else:
            lines.append(plant.line)
    return [lines[i] for i in rng.permutation(len(lines)).tolist()]


def kind_of(layout: Layout, request: str) -> str:
    """Which kind of object a proxied request is about: "METHOD /bucket/key[?query]"."""
    _, path = request.split(" ", 2)[:2]
    key = path.split("/", 2)[2] if path.count("/") >= 2 else ""
    key, _, query = key.partition("?")
    if not key and "prefix=" in query:
        key = query.split("prefix=", 1)[1].split("&", 1)[0].replace("%2F", "/")
    if key.startswith("landing/"):
        return "input"
    if key.endswith(SEGMENT_SUFFIX):
        return "segments"
    if key.endswith(GUARD_SUFFIX):
        return "guards"
    staged_output = any(part in key for part in ("/data/", "/audit/", "/quarantine/"))
    if key.startswith(layout.settings.staging_prefix) and not staged_output:
        return "state"
    if key.startswith(layout.settings.state_prefix) or key.startswith(layout.settings.commit_log_prefix):
        return "state"
    return "output"


def traffic(layout: Layout, proxy: FaultProxy) -> dict[str, dict[str, int]]:
    out = {kind: {"read_requests": 0, "read_bytes": 0, "write_requests": 0, "write_bytes": 0, "other_requests": 0}
           for kind in KINDS}
    for request in proxy.requests:
        method = request.split(" ", 1)[0]
        figures = out[kind_of(layout, request)]
        if method in ("GET", "HEAD"):
            figures["read_requests"] += 1
        elif method == "PUT":
            figures["write_requests"] += 1
        else:
            figures["other_requests"] += 1  # COPY (server-side, promotion), DELETE, POST
    for request, size in proxy.bytes_served.items():
        out[kind_of(layout, request)]["read_bytes"] += size
    for request, size in proxy.bytes_received.items():
        out[kind_of(layout, request)]["write_bytes"] += size
    return out


def scale_config(endpoint: str, spec: ScaleSpec, local_copies: Path | None = None, copy_bytes: int = 0) -> Config:
    return config_from_mapping({
        "s3": {"endpoint_url": endpoint, "bucket": "scale"},
        "dedup": {"window_hours": spec.window, "partition_time": spec.partition_time},
        "spark": {"local_cache_dir": str(local_copies or ""), "local_cache_bytes": copy_bytes},
    })


def run_spec(spec: ScaleSpec, spark: object, work: Path) -> dict:
    """Seed, then the measured batch's job cold (no local copies), its job again warm (after a
    batch before it read the window on this executor: local copies of everything but what the last
    commit wrote), and its promotion."""
    rng = np.random.default_rng([spec.rate, spec.window, spec.fill, int(spec.partition_time == "id")])
    composition = Composition.of(spec.per_bucket)
    with LocalS3Process() as server:
        server.client().create_bucket(Bucket="scale")
        config = scale_config(server.endpoint_url, spec)
        store = S3Store(make_client(config.s3), "scale")
        started = time.perf_counter()
        seeded = SeededStore(store, config, spec, rng)
        plants = seeded.write(composition)
        seed_seconds = time.perf_counter() - started
        lines = measured_lines(composition, plants, seeded.ids, rng)
        per = -(-len(lines) // INPUT_OBJECTS)
        for i in range(INPUT_OBJECTS):
            store.put_bytes(f"landing/scale/part-{i:03d}.jsonl", b"\n".join(lines[i * per:(i + 1) * per]) + b"\n")
        input_bytes = sum(len(line) + 1 for line in lines)
        del lines
        with FaultProxy(server.endpoint_url) as proxy:
            cold = scale_config(proxy.endpoint_url, spec, work / "cold", 0)
            warm = scale_config(proxy.endpoint_url, spec, work / "warm", 8 << 30)
            layout = Layout(cold.layout)
            batch_id = "scale-measured"
            freeze_batch_inputs(S3Store(make_client(cold.s3), "scale"), cold, batch_id,
                                InputSelector(input_prefix="landing/scale/"), measured_as_of())
            groups = spark_groups(int(spark._jvm.java.lang.ProcessHandle.current().pid()), server.pid)  # type: ignore[attr-defined]
            proxy.arm(None)
            with SampledCpu(groups, spark_phase(spark)) as cpu:
                job_started = time.perf_counter()
                job = run_dedup_job(spark, cold, batch_id)
                job_seconds = time.perf_counter() - job_started
            cold_traffic = traffic(layout, proxy)
            run_dedup_job(spark, warm, batch_id)  # as a batch before it read the window
            copies = LocalCopies(LocalCopySettings(str(work / "warm"), 8 << 30))
            for key in seeded.last_commit_objects:  # its own writes: not read by any batch yet
                copies.path_of(store, key).unlink(missing_ok=True)
            proxy.arm(None)
            warm_job = run_dedup_job(spark, warm, batch_id)
            warm_traffic = traffic(layout, proxy)
            proxy.arm(None)
            promote_started = time.perf_counter()
            promote_batch(S3Store(make_client(warm.s3), "scale"), warm, batch_id)
            promote_seconds = time.perf_counter() - promote_started
            promotion = traffic(layout, proxy)
    counts = dict(job.counts)
    if counts["output_rows"] != composition.expected_output or dict(warm_job.counts) != counts:
        raise SystemExit(f"{spec.label}: the batch emitted {counts['output_rows']:,} rows (warm: "
                         f"{warm_job.counts['output_rows']:,}); its composition {asdict(composition)} makes "
                         f"{composition.expected_output:,}")
    return {"spec": asdict(spec), "label": spec.label, "measured": True, "seeded_ids": spec.seeded_ids,
            "seed_seconds": round(seed_seconds, 1), "composition": asdict(composition), "input_bytes": input_bytes,
            "traffic": added(cold_traffic, promotion), "traffic_warm": added(warm_traffic, promotion),
            "job_seconds": round(job_seconds, 2), "promote_seconds": round(promote_seconds, 2),
            "cpu_seconds_by_phase": cpu.by_phase, "counts": counts}


def added(*parts: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    return {kind: {name: sum(part[kind][name] for part in parts) for name in parts[0][kind]} for kind in parts[0]}


def all_buckets(result: dict, which: str = "traffic") -> dict[str, dict[str, float]]:
    """The sampled bucket's traffic as a whole batch's: per-bucket kinds times the buckets."""
    return {kind: {name: value * (BUCKETS if kind in PER_BUCKET_KINDS else 1) for name, value in figures.items()}
            for kind, figures in result[which].items()}


def extrapolated(spec: ScaleSpec, low: dict, high: dict) -> dict:
    """A cell too big to build here: each figure linear in fill through the 1 % and 10 % runs."""
    def line(a: float, b: float) -> float:
        return max(0.0, a + (b - a) * (spec.fill - low["spec"]["fill"]) / (high["spec"]["fill"] - low["spec"]["fill"]))
    lines = {which: {kind: {name: round(line(low[which][kind][name], value)) for name, value in figures.items()}
                     for kind, figures in high[which].items()} for which in ("traffic", "traffic_warm")}
    return {"spec": asdict(spec), "label": spec.label, "measured": False, "seeded_ids": spec.seeded_ids,
            "extrapolated_from": [low["label"], high["label"]], "input_bytes": high["input_bytes"], **lines}


def dated_update(inputs: list[ObjectInfo]) -> LedgerUpdate:
    """A commit's ledger update as the job writes it: each input with its LastModified's hour."""
    return LedgerUpdate(tuple(inputs), dated_hours=tuple(hour_index_at(info.last_modified) for info in inputs
                                                         if info.last_modified is not None))


def state_load(window: int, objects_per_batch: int = 1000, commits_after: int = 9) -> dict:
    """The committed state at `objects_per_batch` input objects per 5-minute batch, its ledger
    holding two windows of inputs (what it keeps) in parts of 10 commits each, as checkpoints
    write them, plus `commits_after` commits since the last checkpoint: the state's load time, and
    an interval batch's ledger lookups (every object of its 3-hour lookback), median of 3."""
    batches = 2 * window * BATCHES_PER_HOUR
    interval = 10
    with LocalS3Process() as server:
        server.client().create_bucket(Bucket="scale")
        config = scale_config(server.endpoint_url, ScaleSpec(1_000_000, window, 100, "event"))
        store, layout = S3Store(make_client(config.s3), "scale"), Layout(config.layout)
        first = ANCHOR_HOUR - 2 * window
        ids = [(interval_id(first + i // BATCHES_PER_HOUR, i % BATCHES_PER_HOUR), first + i // BATCHES_PER_HOUR)
               for i in range(batches)]

        def consumed(version: int, hour: int) -> list[ObjectInfo]:
            return [ObjectInfo(f"landing/{version:06d}/part-{n:04d}.jsonl", 1, uuid.UUID(int=version * 4096 + n).hex,
                               last_modified=datetime.fromtimestamp(hour * 3600 - 60, timezone.utc))
                    for n in range(objects_per_batch)]

        ledger = IngestionLedger(retain_from_hour=first, started=True)
        with ThreadPoolExecutor(8) as pool:
            futures = []
            for start in range(1, batches + 1, interval):
                span = range(start, min(start + interval, batches + 1))
                part = IngestionLedger(started=True)
                for version in span:
                    part = part.with_update(dated_update(consumed(version, ids[version - 1][1])), version,
                                            ids[version - 1][1])
                futures.append(pool.submit(write_part, store, layout, part, span[-1]))
            for future in futures:
                ledger = replace(ledger, parts=(*ledger.parts, *future.result().parts))
        state = CommittedState(
            version=batches, batches={b: v for v, (b, _) in enumerate(ids, start=1)},
            arrivals={b: a for b, a in ids}, last_batch_id=ids[-1][0], retain_from_hour=first,
            latest_interval_batch_id=ids[-1][0], latest_interval_arrival_hour=ids[-1][1],
            latest_arrival_hour=ids[-1][1], ledger=ledger)
        checkpoint = state.to_bytes()
        store.put_bytes(layout.checkpoint(batches), checkpoint)
        store.put_bytes(layout.last_checkpoint, json.dumps({"version": batches}).encode())
        for k in range(1, commits_after + 1):
            batch_id = interval_id(ANCHOR_HOUR, k)
            record = CommitRecord(
                version=state.version + 1, batch_id=batch_id, previous_batch_id=state.last_batch_id, token="s",
                as_of=measured_as_of().isoformat(), counts=BatchCounts(), objects=(), cache_heads={},
                change=BatchChange(window_start_hour=ANCHOR_HOUR - window, retain_from_hour=first,
                                   ledger_update=dated_update(consumed(state.version + 1, ANCHOR_HOUR)),
                                   interval=True, arrival_hour=ANCHOR_HOUR))
            write_commit(store, layout, record)
            state = state.apply(record, layout.commit(record.version))
        lookback = [info for version in range(batches - 3 * BATCHES_PER_HOUR + 1, batches + 1)
                    for info in consumed(version, ids[version - 1][1])]
        load_seconds, lookup_seconds, parts_read = [], [], 0
        for _ in range(3):
            forget_loaded_states()  # the time of a load from scratch, not of a process's kept fold
            started = time.perf_counter()
            loaded = load_committed_state(store, layout)
            load_seconds.append(time.perf_counter() - started)
            started = time.perf_counter()
            reader = LedgerReader(store, loaded.ledger, layout)
            held = sum(reader.consumed_before(info, loaded.version + 1) is not None for info in lookback)
            lookup_seconds.append(time.perf_counter() - started)
            parts_read = len(reader._read)  # noqa: SLF001 (what the bench reports)
            if held != len(lookback):
                raise SystemExit(f"the ledger holds {held:,} of the lookback's {len(lookback):,} consumed objects")
    return {"window": window, "objects_per_batch": objects_per_batch, "ledger_entries": loaded.ledger.entry_count,
            "parts": len(loaded.ledger.parts), "checkpoint_bytes": len(checkpoint), "commits_after": commits_after,
            "load_seconds": round(statistics.median(load_seconds), 3), "lookback_objects": len(lookback),
            "lookback_lookup_seconds": round(statistics.median(lookup_seconds), 3), "lookback_parts_read": parts_read}


def mib(value: float) -> str:
    return f"{value / 2**20:,.1f}"


def table(results: list[dict]) -> str:
    head = ("| stream, window, partition_time, fill | seeded ids (1 bucket) | segments read MiB | guards read MiB | "
            "cache read warm MiB | state read MiB | cache read / input (warm) | cache written MiB | requests | job s |")
    rows = [head, "|" + " --- |" * 10]
    for result in results:
        whole, warm = all_buckets(result), all_buckets(result, "traffic_warm")
        cache_read = whole["segments"]["read_bytes"] + whole["guards"]["read_bytes"]
        warm_read = warm["segments"]["read_bytes"] + warm["guards"]["read_bytes"]
        written = whole["segments"]["write_bytes"] + whole["guards"]["write_bytes"]
        requests = sum(f["read_requests"] + f["write_requests"] + f["other_requests"] for f in whole.values())
        how = "" if result["measured"] else " (extrapolated)"
        input_bytes = result["input_bytes"] * BUCKETS
        rows.append(f"| {result['label']}{how} | {result['seeded_ids']:,} | {mib(whole['segments']['read_bytes'])} | "
                    f"{mib(whole['guards']['read_bytes'])} | {mib(warm_read)} | {mib(whole['state']['read_bytes'])} | "
                    f"{cache_read / input_bytes:.2f} ({warm_read / input_bytes:.2f}) | {mib(written)} | "
                    f"{requests:,.0f} | {result.get('job_seconds', '')} |")
    return "\n".join(rows)


def cache_figures(result: dict, which: str = "traffic") -> tuple[float, float]:
    """(cache bytes read, cache bytes written) per batch, all buckets."""
    whole = all_buckets(result, which)
    return (whole["segments"]["read_bytes"] + whole["guards"]["read_bytes"],
            whole["segments"]["write_bytes"] + whole["guards"]["write_bytes"])


def comparison(results: list[dict], before: list[dict]) -> str:
    """Cache bytes per batch now against a run before, cell by cell."""
    earlier = {result["label"]: result for result in before}
    rows = ["| stream, window, partition_time, fill | before: read GiB | before: written GiB | now: read GiB cold "
            "| now: read GiB warm | now: written GiB |", "|" + " --- |" * 6]
    for result in results:
        old = earlier.get(result["label"])
        if old is None:
            continue
        (old_read, old_written), (read, written) = cache_figures(old), cache_figures(result)
        warm_read, _ = cache_figures(result, "traffic_warm")
        how = "" if result["measured"] else " (extrapolated)"
        rows.append(f"| {result['label']}{how} | {old_read / 2**30:,.2f} | {old_written / 2**30:,.2f} | "
                    f"{read / 2**30:,.2f} | {warm_read / 2**30:,.2f} | {written / 2**30:,.2f} |")
    return "\n".join(rows)


def growth_chart(results: list[dict], before: list[dict], path: Path) -> None:
    """Cache bytes a batch reads as the window fills: per window, a line per stream and
    partitioning, now cold (solid), now warm (dashed), before (dotted)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    windows = sorted({result["spec"]["window"] for result in results})
    fig, axes = plt.subplots(1, len(windows), figsize=(6.5 * len(windows), 4.8), squeeze=False)
    for axis, window in zip(axes[0], windows, strict=True):
        series = sorted({(r["spec"]["rate"], r["spec"]["partition_time"]) for r in results
                         if r["spec"]["window"] == window})
        for number, (rate, partition_time) in enumerate(series):
            color = f"C{number}"
            for source, which, style in ((results, "traffic", "-"), (results, "traffic_warm", "--"),
                                         (before, "traffic", ":")):
                points = sorted((r["spec"]["fill"], cache_figures(r, which)[0] / 2**30) for r in source
                                if (r["spec"]["rate"], r["spec"]["window"], r["spec"]["partition_time"])
                                == (rate, window, partition_time) and which in r)
                if points:
                    label = f"{rate / 1e6:g}M/5min {partition_time}" if style == "-" else None
                    axis.plot(*zip(*points, strict=True), style, color=color, marker="o", label=label)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("window fill (%)")
        axis.set_ylabel("cache GiB read per batch, all buckets")
        axis.set_title(f"{window}-hour window: now cold (solid), warm (dashed), before (dotted)")
        axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def merge_costs(rate: int, policy: ChainPolicy = SHIPPED_CHAINS) -> dict:
    """What merging costs over time, which one measured batch does not show: the shipped chain
    policy (eventdedup.cache.heads) played over the 12 batches of an hour (each adding 99 % of its
    ids to the current hour) and over the 288 batches an old hour receives stragglers for (1 % of
    each batch's ids spread over 24 hours), beside copy-forward (each batch rewriting the key
    whole). Segment bytes per (hour, bucket), 24 per entry."""
    def play(sizes: list[int]) -> tuple[int, int, int]:
        chain: list[int] = []
        written = merged_read = longest = 0
        for own in sizes:
            merge = policy.objects_to_merge(chain, own)
            merged = sum(chain[len(chain) - merge:])
            chain = [*chain[:len(chain) - merge], merged + own]
            written, merged_read, longest = written + merged + own, merged_read + merged, max(longest, len(chain))
        return written, merged_read, longest
    own = int(rate * 0.99 / BUCKETS * 24)
    written, merged_read, longest = play([own] * 12)
    copy_forward = sum(own * n for n in range(1, 13))
    late = int(rate * 0.01 / 24 / BUCKETS * 24)
    base = own * 12
    late_written, late_read, late_longest = play([base] + [late] * 288)
    late_written -= base
    return {"rate": rate, "current_hour": {
                "own_bytes": own, "written_per_batch": written // 12, "merged_read_per_batch": merged_read // 12,
                "copy_forward_written_per_batch": copy_forward // 12, "longest_chain": longest},
            "old_hour": {
                "base_bytes": base, "tail_bytes": late, "written_per_batch": late_written // 288,
                "merged_read_per_batch": late_read // 288, "copy_forward_written_per_batch": base + late * 144,
                "longest_chain": late_longest}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="100000,1000000,10000000")
    parser.add_argument("--windows", default="24,168")
    parser.add_argument("--fills", default="1,10,100")
    parser.add_argument("--partition-times", default="event,id")
    parser.add_argument("--max-seed-ids", type=int, default=40_000_000,
                        help="largest store (entries of the sampled bucket) built here; bigger cells are extrapolated")
    parser.add_argument("--state-windows", default="24,168")
    parser.add_argument("--out", type=Path, default=RESULTS / "scale-latest.json")
    parser.add_argument("--before", type=Path, default=RESULTS / "scale-before-39.json",
                        help="a run to compare with (its table and dotted lines); none if missing")
    args = parser.parse_args()
    use_local_credentials()
    specs = [ScaleSpec(int(rate), int(window), int(fill), pt) for rate in args.rates.split(",")
             for window in args.windows.split(",") for pt in args.partition_times.split(",")
             for fill in sorted(int(f) for f in args.fills.split(","))]
    spark = build_spark_context(scale_config("http://127.0.0.1:1", specs[0]).spark, "eventdedup-bench-scale")
    results: list[dict] = []
    by_label: dict[tuple, dict] = {}
    for spec in specs:
        if spec.seeded_ids > args.max_seed_ids:
            low, high = (by_label.get((spec.rate, spec.window, spec.partition_time, fill)) for fill in (1, 10))
            if low is None or high is None:
                print(f"{spec.label}: {spec.seeded_ids:,} entries, beyond --max-seed-ids; no runs to extrapolate from",
                      flush=True)
                continue
            results.append(extrapolated(spec, low, high))
            continue
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="eventdedup-scale-") as work:
            result = run_spec(spec, spark, Path(work))
        results.append(result)
        by_label[(spec.rate, spec.window, spec.partition_time, spec.fill)] = result
        whole = all_buckets(result)
        print(f"{spec.label}: seeded {spec.seeded_ids:,} ids in {result['seed_seconds']}s; batch: segments "
              f"{mib(whole['segments']['read_bytes'])} MiB, guards {mib(whole['guards']['read_bytes'])} MiB, state "
              f"{mib(whole['state']['read_bytes'])} MiB read; job {result['job_seconds']}s "
              f"({time.perf_counter() - started:.0f}s in all)", flush=True)
    states = [state_load(int(window)) for window in args.state_windows.split(",") if window]
    for state in states:
        print(f"state at {state['objects_per_batch']} objects/batch, {state['window']}h: {state['ledger_entries']:,} "
              f"ledger entries in {state['parts']} parts, checkpoint {mib(state['checkpoint_bytes'])} MiB, load "
              f"{state['load_seconds']}s; an interval batch's {state['lookback_objects']:,} lookups "
              f"{state['lookback_lookup_seconds']}s ({state['lookback_parts_read']} parts read)", flush=True)
    merges = [merge_costs(int(rate)) for rate in args.rates.split(",")]
    for merge in merges:
        current, old = merge["current_hour"], merge["old_hour"]
        print(f"merges at {merge['rate']:,}/5min, per (hour, bucket): current hour {mib(current['written_per_batch'])} "
              f"MiB written a batch (copy-forward {mib(current['copy_forward_written_per_batch'])}), chain <= "
              f"{current['longest_chain']}; an old hour {old['written_per_batch'] / 1024:.1f} KiB a batch "
              f"(copy-forward {mib(old['copy_forward_written_per_batch'])} MiB), chain <= {old['longest_chain']}",
              flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"buckets": BUCKETS, "results": results, "state": states, "merges": merges},
                                   indent=1))
    before = json.loads(args.before.read_text())["results"] if args.before.exists() else []
    growth_chart(results, before, args.out.with_suffix(".png"))
    print(table(results))
    if before:
        print(comparison(results, before))
    return 0


if __name__ == "__main__":
    sys.exit(main())
