"""The store years of 5-minute batches leave, for one sampled bucket of 16, written directly with the
project's own writers (segments, id guards, commit records, checkpoints), and the batch measured on it.

- `rate` events per batch, 12 batches an hour committed in order; the bucket holds 1/16 of each's ids;
- 99 % of a batch's events dated in its arrival hour, 1 % stragglers dated 24-48 hours before it;
- the window `fill` % full: arrivals span the last fill x window hours (one at least);
- each hour's chain of segments merged by the shipped chain policy batch by batch; each arrival
  hour's guard holding every id of that hour (none under partition_time = "id"); superseded objects
  deleted as maintenance deletes them.

The measured batch (the bucket's share of one batch, the 7th of the newest hour): 96 % new ids, 1 %
in-batch copies, 1 % copies of ids committed earlier in the hour, 1 % stragglers, 0.5 % copies of
ids 2-20 hours old re-stamped now (found only through the guards under event partitioning) and 0.5 %
exact copies of ids 30 hours old.
"""
from __future__ import annotations

from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from bench.stores import commit_directly
from bench.workload import HOUR_US, event_line, id_bytes
from eventdedup.cache.guard import IdGuard, encode_guard
from eventdedup.cache.heads import ChainPolicy
from eventdedup.cache.identity import check_cache_identity
from eventdedup.cache.segment import CacheRun, encode_segment
from eventdedup.cache.segment_parts import ENTRY_BYTES
from eventdedup.commit.changes import BatchChange
from eventdedup.commit.ledger import LedgerUpdate
from eventdedup.commit.records import CommitRecord, PromotedObject
from eventdedup.commit.state import CommittedState
from eventdedup.config import Config
from eventdedup.counts import BatchCounts
from eventdedup.inputs.intervals import batch_id_for_interval
from eventdedup.keys import CacheKey, bucket_array, guard_head_key
from eventdedup.layout import Layout
from eventdedup.parse.event_parser import parse_event
from eventdedup.parse.rules import ParseRules
from eventdedup.s3store import ObjectInfo, S3Store

BUCKETS = 16  # the shipped default of a new cache
SAMPLED = 0  # the bucket the store is built for and the batch holds
BATCHES_PER_HOUR = 12
MEASURED_SLOT = 6  # the measured batch arrives after six batches of its hour
ANCHOR_HOUR = int(datetime(2026, 11, 22, 12, tzinfo=timezone.utc).timestamp()) // 3600
STRAGGLERS = 0.01


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


@dataclass(frozen=True)
class Plant:
    """A committed id the measured batch sends again."""

    kind: str
    version: int  # the seeded batch that committed it
    digest: bytes
    fingerprint: int
    hour: int  # its cache hour
    line: bytes  # as first sent


def interval_id(hour: int, slot: int) -> str:
    return batch_id_for_interval(datetime.fromtimestamp(hour * 3600 + slot * 300, timezone.utc))


def measured_as_of() -> datetime:
    return datetime.fromtimestamp(ANCHOR_HOUR * 3600 + 35 * 60, timezone.utc)


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
        out, filled = np.empty(len(times_us), "S16"), 0
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


class SeededStore:
    """The steady state of the sampled bucket, written as the batches before would have left it."""

    def __init__(self, store: S3Store, config: Config, spec: ScaleSpec, rng: np.random.Generator) -> None:
        self.store, self.config, self.spec, self.rng = store, config, spec, rng
        self.layout, self.ids = Layout(config.layout), Ids(rng, spec.partition_time)
        self.rules = ParseRules.for_batch(config, measured_as_of(),
                                          fingerprint_hash=config.dedup.new_store_fingerprint_hash)
        self.last_commit_objects: list[str] = []

    def batches(self) -> list[tuple[str, int]]:
        """(batch id, arrival hour) of every seeded batch, in commit order (version = index + 1)."""
        slots = [(hour, slot) for hour in range(ANCHOR_HOUR - self.spec.seeded_hours, ANCHOR_HOUR)
                 for slot in range(BATCHES_PER_HOUR)] + [(ANCHOR_HOUR, slot) for slot in range(MEASURED_SLOT)]
        return [(interval_id(hour, slot), hour) for hour, slot in slots]

    def write(self, composition: Composition) -> list[Plant]:
        identity = check_cache_identity(self.store, self.layout, self.config)
        assert identity.fingerprint_hash == self.rules.fingerprint.algorithm
        batches = self.batches()
        plants = self.plant(composition, batches)
        runs: dict[int, list[tuple[int, CacheRun]]] = defaultdict(list)  # cache hour -> (version, run)
        guard_parts: dict[int, list[tuple[int, np.ndarray, np.ndarray]]] = defaultdict(list)  # arrival hour ->
        for version, (batch_id, arrival) in enumerate(batches, start=1):
            count, mine = self.spec.per_bucket, [p for p in plants if p.version == version]
            late = self.rng.random(count) < STRAGGLERS
            hours = np.where(late, arrival - self.rng.integers(24, 49, count), arrival).astype(np.int64)
            digests = self.ids.anonymous(count)
            fingerprints = self.rng.integers(0, 2**63, count).astype(np.uint64)
            if mine:
                digests = np.concatenate([digests, np.array([p.digest for p in mine], "S16")])
                fingerprints = np.concatenate([fingerprints, np.array([p.fingerprint for p in mine], np.uint64)])
                hours = np.concatenate([hours, np.array([p.hour for p in mine], np.int64)])
            for hour in np.unique(hours).tolist():
                runs[hour].append((version, CacheRun.build(batch_id, digests[hours == hour], fingerprints[hours == hour])))
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
        sources = {"same_hour": (composition.same_hour, [ANCHOR_HOUR]),
                   "restamped": (composition.restamped, list(range(max(oldest, ANCHOR_HOUR - 20), ANCHOR_HOUR - 1))
                                 or [ANCHOR_HOUR]),
                   "late": (composition.late, [max(oldest, ANCHOR_HOUR - 30)])}
        plants = []
        for kind, (count, hours) in sources.items():
            hour_of = np.array(hours, np.int64)[self.rng.integers(0, len(hours), count)]
            times = hour_of * HOUR_US + self.rng.integers(0, HOUR_US // 2, count)  # first half: before as_of
            digests = self.ids.sent(times)
            for i in range(count):
                versions = by_hour[int(hour_of[i])]
                version = versions[int(self.rng.integers(0, len(versions)))]
                line = event_line(id_bytes(digests, i), int(times[i]))
                plants.append(Plant(kind, version, id_bytes(digests, i), parse_event(line, self.rules).fingerprint,
                                    int(hour_of[i]), line))
        return plants

    def _write_heads(self, batches: list[tuple[str, int]], runs: dict[int, list[tuple[int, CacheRun]]],
                     guard_parts: dict[int, list[tuple[int, np.ndarray, np.ndarray]]],
                     ) -> tuple[dict[int, dict[str, str]], dict[int, dict[str, tuple[str, ...]]]]:
        """Each hour's runs in commit order, merged by the shipped chain policy as the job merges them;
        objects a later merge superseded are not written. Guards: each arrival hour's last version.
        Returns what each version's commit names: head -> object, and head -> the objects it builds on."""
        named: dict[int, dict[str, str]] = defaultdict(dict)
        bases: dict[int, dict[str, tuple[str, ...]]] = defaultdict(dict)
        uploads: list[tuple[str, bytes]] = []
        policy = ChainPolicy()
        for hour, hour_runs in runs.items():
            key = CacheKey.of_hour(hour, SAMPLED)
            chain: list[tuple[str, list[CacheRun], int]] = []  # (object key, its runs, its bytes)
            for version, run in sorted(hour_runs, key=lambda item: item[0]):
                merge = policy.objects_to_merge([size for _, _, size in chain], len(run) * ENTRY_BYTES)
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
            as_of = datetime.strptime(batch_id, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc).timestamp() + 300
            record = CommitRecord(
                version=version, batch_id=batch_id, previous_batch_id=state.last_batch_id, token=f"scale-{version}",
                as_of=datetime.fromtimestamp(int(as_of), timezone.utc).isoformat(),
                counts=BatchCounts(input_lines=self.spec.rate, output_rows=self.spec.rate),
                objects=tuple(PromotedObject("cache", key, 0, "") for key in named[version].values()),
                cache_heads=named[version],
                change=BatchChange(window_start_hour=arrival - self.spec.window,
                                   retain_from_hour=arrival - 2 * self.spec.window,
                                   ledger_update=LedgerUpdate((ObjectInfo(f"landing/{batch_id}.jsonl", 1, "e"),)),
                                   partitions=2, interval=True, arrival_hour=arrival),
                cache_bases=bases[version])
            state = commit_directly(self.store, self.config, state, record)


def measured_lines(composition: Composition, plants: list[Plant], ids: Ids, rng: np.random.Generator) -> list[bytes]:
    """The measured batch's events in a shuffled order (copies before and after their originals)."""
    fresh_times = ANCHOR_HOUR * HOUR_US + rng.integers(0, HOUR_US // 2, composition.fresh)
    fresh_ids = ids.sent(fresh_times)
    lines = [event_line(id_bytes(fresh_ids, i), int(fresh_times[i])) for i in range(composition.fresh)]
    lines += lines[:composition.in_batch]
    straggler_times = (ANCHOR_HOUR - rng.integers(24, 49, composition.stragglers)) * HOUR_US + rng.integers(
        0, HOUR_US, composition.stragglers)
    straggler_ids = ids.sent(straggler_times)
    lines += [event_line(id_bytes(straggler_ids, i), int(straggler_times[i])) for i in range(composition.stragglers)]
    for plant in plants:
        if plant.kind == "restamped":
            lines.append(event_line(plant.digest, ANCHOR_HOUR * HOUR_US + int(rng.integers(0, HOUR_US // 2))))
        else:
            lines.append(plant.line)
    return [lines[i] for i in rng.permutation(len(lines)).tolist()]
