"""The reads bench's workload (bench.reads): a stream committed batch after batch over days, the
probe batch measured on it, and late events in an old hour.

Ids are UUIDv7 whose milliseconds are the event's time, so that the same events serve
partition_time "event" and "id". History batch i arrives at `start + (i + 1) * batch_hours` with
`hourly_events` an hour over the hours since the batch before, and 1 % stragglers: new ids dated
24-48 hours before it. One old hour (`dense_hour`, on the second day) holds `dense_hour_events` ids,
as an hour of a production stream holds many: the late events fall in it.

The probe at `as_of` (the same composition whatever the history before it, drawn from the last
day's batches only, so that what grows between two probes is the history alone): new events of the
last hour, in-batch copies of them, exact copies of events 0-6 and 6-20 hours old, copies of ids
2-20 hours old re-stamped now (synthetic duplicates: renamed, emitted), and stragglers dated 6-20
hours back.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone

import numpy as np

from bench.workload import HOUR_US, event_lines, random_ids

STRAGGLERS = 0.01


@dataclass(frozen=True)
class ReadsSpec:
    hourly_events: int = 20_000
    batch_hours: int = 3
    probe_events: int = 20_000
    dense_hour_events: int = 200_000
    late_events: int = 20
    seed: int = 20261122
    start: datetime = datetime(2026, 11, 1, tzinfo=timezone.utc)

    @property
    def batches_per_day(self) -> int:
        return 24 // self.batch_hours

    @property
    def dense_hour(self) -> int:
        """The old hour the late events fall in: the second day's noon."""
        return self.start_hour + 36

    @property
    def start_hour(self) -> int:
        return int(self.start.timestamp()) // 3600

    def as_of(self, i: int) -> datetime:
        """History batch i's as_of (its arrival)."""
        return self.start + timedelta(hours=(i + 1) * self.batch_hours)

    def probe_as_of(self, days: int, minutes: int = 5) -> datetime:
        """A probe after `days` days of history, `minutes` after the last batch."""
        return self.as_of(days * self.batches_per_day - 1) + timedelta(minutes=minutes)

    def to_dict(self) -> dict:
        return {**asdict(self), "start": self.start.isoformat()}


def uuid7_ids(rng: np.random.Generator, times_us: np.ndarray) -> np.ndarray:
    """One UUIDv7 per time (its first 48 bits the time's milliseconds) as an S16 array."""
    raw = random_ids(rng, len(times_us)).view(np.uint8).reshape(-1, 16).copy()
    raw[:, :6] = (np.asarray(times_us) // 1000).astype(">u8").view(np.uint8).reshape(-1, 8)[:, 2:]
    raw[:, 6] = (raw[:, 6] & 0x0F) | 0x70
    return raw.view("S16").reshape(-1)


@dataclass(frozen=True)
class Events:
    ids: np.ndarray  # S16
    times_us: np.ndarray  # int64

    def lines(self) -> list[bytes]:
        return event_lines(self.ids, self.times_us)

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class Probe:
    lines: list[bytes]
    expected: dict[str, int]  # the commit's counts a correct dedup gives


class ReadsWorkload:
    def __init__(self, spec: ReadsSpec) -> None:
        self.spec = spec

    def history_batch(self, i: int) -> Events:
        spec, rng = self.spec, np.random.default_rng([self.spec.seed, 1, i])
        end = int(spec.as_of(i).timestamp()) * 1_000_000
        count = spec.hourly_events * spec.batch_hours
        times = rng.integers(end - spec.batch_hours * HOUR_US, end, size=count, dtype=np.int64)
        late = rng.random(count) < STRAGGLERS
        times[late] = end - rng.integers(24 * HOUR_US, 48 * HOUR_US, size=int(late.sum()), dtype=np.int64)
        dense_start = spec.dense_hour * HOUR_US
        if end - spec.batch_hours * HOUR_US <= dense_start < end:  # the batch that covers the dense hour
            extra = rng.integers(dense_start, dense_start + HOUR_US, size=spec.dense_hour_events, dtype=np.int64)
            times = np.concatenate([times, extra])
        return Events(uuid7_ids(rng, times), times)

    def probe(self, as_of: datetime, variant: int) -> Probe:
        """The probe batch at `as_of` (variant: its own new ids and picks), shuffled."""
        spec, rng = self.spec, np.random.default_rng([self.spec.seed, 2, variant])
        now = int(as_of.timestamp()) * 1_000_000
        one, half = spec.probe_events // 100, spec.probe_events // 200
        fresh_count = spec.probe_events - 3 * one - 2 * half
        fresh_times = rng.integers(now - HOUR_US, now, size=fresh_count, dtype=np.int64)
        fresh = Events(uuid7_ids(rng, fresh_times), fresh_times).lines()
        recent, older, restamped = self._committed(as_of, rng, ((0, 6, one), (6, 20, one), (2, 20, half)))
        restamped = Events(restamped.ids, rng.integers(now - HOUR_US, now, size=half, dtype=np.int64))
        straggler_times = rng.integers(now - 20 * HOUR_US, now - 6 * HOUR_US, size=half, dtype=np.int64)
        lines = (fresh + [fresh[i] for i in rng.integers(0, fresh_count, size=one)] + recent.lines() + older.lines()
                 + restamped.lines() + Events(uuid7_ids(rng, straggler_times), straggler_times).lines())
        expected = {"input_lines": spec.probe_events, "in_batch_natural": one, "cross_batch_natural": 2 * one,
                    "cross_batch_synthetic": half, "output_rows": fresh_count + 2 * half}
        return Probe([lines[i] for i in rng.permutation(len(lines))], expected)

    def late(self) -> Probe:
        """`late_events` new events dated in the dense hour."""
        rng = np.random.default_rng([self.spec.seed, 3])
        start, events = self.spec.dense_hour * HOUR_US, self.spec.late_events
        times = rng.integers(start, start + HOUR_US, size=events, dtype=np.int64)
        return Probe(Events(uuid7_ids(rng, times), times).lines(),
                     {"input_lines": events, "in_batch_natural": 0, "cross_batch_natural": 0,
                      "cross_batch_synthetic": 0, "output_rows": events})

    def batches_before(self, as_of: datetime) -> int:
        """How many history batches arrive at or before `as_of`."""
        return int((as_of - self.spec.start) / timedelta(hours=self.spec.batch_hours))

    def _committed(self, as_of: datetime, rng: np.random.Generator,
                   picks: tuple[tuple[int, int, int], ...]) -> list[Events]:
        """Per (youngest, oldest, count): `count` committed events dated youngest-oldest hours before
        `as_of`, from the batches that arrived in the day before it; no event picked twice."""
        now, last = int(as_of.timestamp()) * 1_000_000, self.batches_before(as_of)
        pool = [self.history_batch(i) for i in range(max(0, last - self.spec.batches_per_day), last)]
        ids, times = np.concatenate([b.ids for b in pool]), np.concatenate([b.times_us for b in pool])
        taken = np.zeros(len(ids), bool)
        out = []
        for youngest, oldest, count in picks:
            eligible = np.flatnonzero((times < now - youngest * HOUR_US) & (times >= now - oldest * HOUR_US) & ~taken)
            rows = np.sort(rng.choice(eligible, size=count, replace=False))
            taken[rows] = True
            out.append(Events(ids[rows], times[rows]))
        return out
