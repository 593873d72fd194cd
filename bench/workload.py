"""The seeded benchmark workload: a window of hourly history batches and the batch to deduplicate.

Every event is a function of its 16 id bytes and its time (`event_line`), so a cross-batch
duplicate is byte for byte the line that history batch committed, and the history never has to
be kept as text: each system stores its history from (ids, times) in its own format.

History batch j of H commits at `anchor - (H - j + 1) h` with events spread over the two hours
before it, so each hour of the window holds about one batch of ids. The measured batch has
`as_of = anchor` and events over the last two hours: fresh events, in-batch copies of them, and
cross-batch copies of history events from the last 24 hours.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import cached_property

import numpy as np

HOUR_US = 3_600_000_000
PAD = "x" * 150  # brings an event to about 300 bytes


@dataclass(frozen=True)
class WorkloadSpec:
    events: int = 1_000_000
    in_batch_rate: float = 0.02
    cross_batch_rate: float = 0.03
    cross_batch_max_age_hours: int = 24
    # Cross-batch copies re-stamped later by up to this many hours (0: exact retransmissions):
    # a server that stamps events on receipt, a client that flushes a retry hours later.
    cross_batch_shift_hours: int = 0
    history_batches: int = 24
    history_batch_events: int = 1_000_000
    seed: int = 20261122
    anchor: datetime = datetime(2026, 11, 22, 12, tzinfo=timezone.utc)

    @property
    def anchor_us(self) -> int:
        return int(self.anchor.timestamp()) * 1_000_000

    def history_as_of(self, j: int) -> datetime:
        """j = 0 is the oldest history batch."""
        return self.anchor - timedelta(hours=self.history_batches - j)

    @property
    def window_hours(self) -> int:
        return self.history_batches + 2  # every history event stays inside the window


def uuid_text(id_bytes: bytes) -> str:
    return str(uuid.UUID(bytes=id_bytes))


def iso_time(time_us: int) -> str:
    return datetime.fromtimestamp(time_us / 1_000_000, timezone.utc).isoformat()


def event_line(id_bytes: bytes, time_us: int) -> bytes:
    """The event a producer sent for this id at this time (other fields derived from the id)."""
    user = int.from_bytes(id_bytes[:4], "big") % 1_000_000
    path = int.from_bytes(id_bytes[4:6], "big") % 1000
    return (f'{{"event_id":"{uuid_text(id_bytes)}","created_at":"{iso_time(time_us)}","user_id":"u{user}",'
            f'"type":"page_view","props":{{"path":"/p/{path}","pad":"{PAD}"}}}}').encode()


def random_ids(rng: np.random.Generator, count: int) -> np.ndarray:
    """Version-4 UUID bytes as an S16 array."""
    raw = rng.integers(0, 256, size=(count, 16), dtype=np.uint8)
    raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40
    raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80
    return raw.view("S16").reshape(count)


_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", np.uint8)
_DASH_AT = (8, 13, 18, 23)


def uuid_texts(ids: np.ndarray) -> np.ndarray:
    """Canonical UUID text of every id as an (n, 36) uint8 matrix, without per-row Python."""
    raw = ids.view(np.uint8).reshape(-1, 16)
    hexed = np.empty((len(raw), 32), np.uint8)
    hexed[:, 0::2], hexed[:, 1::2] = _HEX_DIGITS[raw >> 4], _HEX_DIGITS[raw & 15]
    out = np.full((len(raw), 36), ord("-"), np.uint8)
    out[:, [i for i in range(36) if i not in _DASH_AT]] = hexed
    return out


def iso_texts(times_us: np.ndarray) -> np.ndarray:
    """'YYYY-MM-DDTHH:MM:SS.ffffffZ' of every time as an (n, 27) uint8 matrix."""
    text = np.datetime_as_string(times_us.astype("datetime64[us]"), unit="us").astype("S26")
    out = np.full((len(times_us), 27), ord("Z"), np.uint8)
    out[:, :26] = text.view(np.uint8).reshape(-1, 26)
    return out


def id_bytes(ids: np.ndarray, i: int) -> bytes:
    """Row i of an S16 array with its trailing zero bytes (numpy strips them from S scalars)."""
    return ids.view(np.uint8).reshape(-1, 16)[i].tobytes()


@dataclass(frozen=True)
class HistoryBatch:
    batch_id: str
    as_of: datetime
    ids: np.ndarray  # S16
    times_us: np.ndarray  # int64


@dataclass
class Workload:
    spec: WorkloadSpec
    _resent: dict[int, np.ndarray] = field(default_factory=dict)

    def history_batch(self, j: int) -> HistoryBatch:
        rng = np.random.default_rng([self.spec.seed, 1, j])
        as_of = self.spec.history_as_of(j)
        end = int(as_of.timestamp()) * 1_000_000
        times = rng.integers(end - 2 * HOUR_US, end, size=self.spec.history_batch_events, dtype=np.int64)
        return HistoryBatch(f"history-{j:04d}", as_of, random_ids(rng, self.spec.history_batch_events), times)

    def resent_indexes(self, j: int) -> np.ndarray:
        """Which events of history batch j the measured batch sends again (sorted indexes)."""
        if j not in self._resent:
            self._resent[j] = self._pick_resent(j)
        return self._resent[j]

    @cached_property
    def _resent_per_batch(self) -> dict[int, int]:
        """Cross-batch copies split evenly over the history batches whose events are younger than
        the maximum age (every event of those batches is)."""
        spec = self.spec
        oldest_allowed = spec.anchor - timedelta(hours=spec.cross_batch_max_age_hours)
        eligible = [j for j in range(spec.history_batches)
                    if spec.history_as_of(j) - timedelta(hours=2) >= oldest_allowed]
        total = int(spec.events * spec.cross_batch_rate) if eligible else 0
        share, extra = divmod(total, max(len(eligible), 1))
        return {j: share + (1 if n < extra else 0) for n, j in enumerate(eligible)}

    def _pick_resent(self, j: int) -> np.ndarray:
        count = self._resent_per_batch.get(j, 0)
        rng = np.random.default_rng([self.spec.seed, 2, j])
        return np.sort(rng.choice(self.spec.history_batch_events, size=count, replace=False))

    def batch_lines(self) -> list[bytes]:
        """The measured batch, shuffled."""
        spec = self.spec
        rng = np.random.default_rng([spec.seed, 3])
        originals = [(id_bytes(h.ids, i), int(h.times_us[i]))
                     for j in self._resent_per_batch
                     for h in [self.history_batch(j)] for i in self.resent_indexes(j)]
        shifts = np.zeros(len(originals), np.int64)
        if spec.cross_batch_shift_hours:
            shifts = np.random.default_rng([spec.seed, 4]).integers(
                1, spec.cross_batch_shift_hours * HOUR_US + 1, size=len(originals), dtype=np.int64)
        cross = [event_line(key, time_us + int(shift)) for (key, time_us), shift in zip(originals, shifts, strict=True)]
        in_batch = int(spec.events * spec.in_batch_rate)
        fresh_count = spec.events - len(cross) - in_batch
        ids = random_ids(rng, fresh_count)
        times = rng.integers(spec.anchor_us - 2 * HOUR_US, spec.anchor_us, size=fresh_count, dtype=np.int64)
        fresh = [event_line(id_bytes(ids, i), int(times[i])) for i in range(fresh_count)]
        copies = [fresh[i] for i in rng.integers(0, fresh_count, size=in_batch)]
        lines = fresh + copies + cross
        order = rng.permutation(len(lines))
        return [lines[i] for i in order]

    def expected_counts(self) -> dict[str, int]:
        """What a correct dedup must find (in-batch copies may repeat one event several times)."""
        cross = sum(self._resent_per_batch.values())
        in_batch = int(self.spec.events * self.spec.in_batch_rate)
        return {"events": self.spec.events, "cross_batch_duplicates": cross, "in_batch_duplicates": in_batch,
                "unique_new": self.spec.events - cross - in_batch}
