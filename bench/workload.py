"""The workload: a window of hourly history batches and the batch to deduplicate.

Every event is a function of its 16 id bytes and its time (`event_line`), so a cross-batch copy is
byte for byte the line its history batch committed, and each system stores its history from
(ids, times) in its own format, or eventdedup commits it through its own batches (`history_lines`).
History batch j of H commits at `anchor - (H - j) h` with events over the two hours before it; the
measured batch has `as_of = anchor` and events over the last two hours: fresh events, in-batch
copies of them, and copies of history events from the last 24 hours.

A store that commits the measured batch holds it from then on, so a batch measured on top of it
is another one: variant k (k >= 1) draws its fresh ids, its in-batch copies and which history
events it resends from seeds that include k, with the same counts, over the same history.
Variant 0 is the batch as it always was.
"""
from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field, replace
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
    history_batches: int = 24
    history_batch_events: int = 1_000_000
    seed: int = 20261122
    anchor: datetime = datetime(2026, 11, 22, 12, tzinfo=timezone.utc)

    @property
    def anchor_us(self) -> int:
        return int(self.anchor.timestamp()) * 1_000_000

    @property
    def window_hours(self) -> int:
        return self.history_batches + 2  # every history event stays inside the window

    def history_as_of(self, j: int) -> datetime:
        """j = 0 is the oldest history batch."""
        return self.anchor - timedelta(hours=self.history_batches - j)

    def at_current_hour(self) -> WorkloadSpec:
        """The workload anchored at the current hour: a command judges the window by the clock."""
        return replace(self, anchor=datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0))

    def to_dict(self) -> dict:
        return {**asdict(self), "anchor": self.anchor.isoformat()}

    @staticmethod
    def from_dict(raw: dict) -> WorkloadSpec:
        return WorkloadSpec(**{**raw, "anchor": datetime.fromisoformat(raw["anchor"])})


def uuid_text(id_bytes: bytes) -> str:
    return str(uuid.UUID(bytes=id_bytes))


def event_line(id_bytes: bytes, time_us: int) -> bytes:
    """The event a producer sent for this id at this time (other fields derived from the id)."""
    user = int.from_bytes(id_bytes[:4], "big") % 1_000_000
    path = int.from_bytes(id_bytes[4:6], "big") % 1000
    created = datetime.fromtimestamp(time_us / 1_000_000, timezone.utc).isoformat()
    return (f'{{"event_id":"{uuid_text(id_bytes)}","created_at":"{created}","user_id":"u{user}",'
            f'"type":"page_view","props":{{"path":"/p/{path}","pad":"{PAD}"}}}}').encode()


def event_lines(ids: np.ndarray, times_us: np.ndarray) -> list[bytes]:
    """`event_line` of every (id, time), its fields formatted column-wise: the same bytes, a few times
    faster (an ISO time omits its fraction when it is zero, as `datetime.isoformat` does)."""
    raw = ids.view(np.uint8).reshape(-1, 16)
    uuids = np.ascontiguousarray(uuid_texts(ids)).view("S36").ravel().tolist()
    created = np.datetime_as_string(np.asarray(times_us).astype("datetime64[us]"), unit="us").astype("S26")
    created = np.where(np.asarray(times_us) % 1_000_000 == 0, created.astype("S19"), created).tolist()
    users = (raw[:, :4].copy().view(">u4").ravel() % 1_000_000).tolist()
    paths = (raw[:, 4:6].copy().view(">u2").ravel() % 1000).tolist()
    line = (b'{"event_id":"%s","created_at":"%s+00:00","user_id":"u%d","type":"page_view","props":{"path":"/p/%d",'
            b'"pad":"' + PAD.encode() + b'"}}')
    return [line % fields for fields in zip(uuids, created, users, paths, strict=True)]


def uuid_texts(ids: np.ndarray) -> np.ndarray:
    """Canonical UUID text of every id as an (n, 36) uint8 matrix, without per-row Python."""
    raw = ids.view(np.uint8).reshape(-1, 16)
    digits = np.frombuffer(b"0123456789abcdef", np.uint8)
    out = np.full((len(raw), 36), ord("-"), np.uint8)
    out[:, [i for i in range(36) if i not in (8, 13, 18, 23)]] = np.stack([digits[raw >> 4], digits[raw & 15]], 2).reshape(-1, 32)
    return out


def random_ids(rng: np.random.Generator, count: int) -> np.ndarray:
    """Version-4 UUID bytes as an S16 array."""
    raw = rng.integers(0, 256, size=(count, 16), dtype=np.uint8)
    raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40
    raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80
    return raw.view("S16").reshape(count)


def id_bytes(ids: np.ndarray, i: int) -> bytes:
    """Row i of an S16 array with its trailing zero bytes (numpy strips them from S scalars)."""
    return ids.view(np.uint8).reshape(-1, 16)[i].tobytes()


@dataclass(frozen=True)
class HistoryBatch:
    batch_id: str
    as_of: datetime
    ids: np.ndarray  # S16
    times_us: np.ndarray  # int64


def variant_seed(*parts: int, variant: int = 0) -> list[int]:
    """A generator's seed: variant 0 keeps the seeds the workload always had."""
    return [*parts, variant] if variant else list(parts)


@dataclass
class Workload:
    spec: WorkloadSpec
    _resent: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)

    def history_batch(self, j: int) -> HistoryBatch:
        rng = np.random.default_rng([self.spec.seed, 1, j])
        as_of = self.spec.history_as_of(j)
        end = int(as_of.timestamp()) * 1_000_000
        times = rng.integers(end - 2 * HOUR_US, end, size=self.spec.history_batch_events, dtype=np.int64)
        return HistoryBatch(f"history-{j:04d}", as_of, random_ids(rng, self.spec.history_batch_events), times)

    def history_lines(self, j: int) -> list[bytes]:
        """History batch j as its producers sent it, in the order of its ids."""
        batch = self.history_batch(j)
        return event_lines(batch.ids, batch.times_us)

    def resent_indexes(self, j: int, variant: int = 0) -> np.ndarray:
        """Which events of history batch j the measured batch (its variant) sends again (sorted indexes)."""
        if (j, variant) not in self._resent:
            rng = np.random.default_rng(variant_seed(self.spec.seed, 2, j, variant=variant))
            count = self._resent_per_batch.get(j, 0)
            self._resent[(j, variant)] = np.sort(rng.choice(self.spec.history_batch_events, size=count, replace=False))
        return self._resent[(j, variant)]

    @cached_property
    def _resent_per_batch(self) -> dict[int, int]:
        """Cross-batch copies split evenly over the history batches younger than the maximum age."""
        spec = self.spec
        oldest_allowed = spec.anchor - timedelta(hours=spec.cross_batch_max_age_hours)
        eligible = [j for j in range(spec.history_batches)
                    if spec.history_as_of(j) - timedelta(hours=2) >= oldest_allowed]
        total = int(spec.events * spec.cross_batch_rate) if eligible else 0
        share, extra = divmod(total, max(len(eligible), 1))
        return {j: share + (1 if n < extra else 0) for n, j in enumerate(eligible)}

    def batch_lines(self, variant: int = 0) -> list[bytes]:
        """The measured batch (its variant), shuffled."""
        spec = self.spec
        rng = np.random.default_rng(variant_seed(spec.seed, 3, variant=variant))
        cross = [line for j in self._resent_per_batch for h in [self.history_batch(j)] for rows in
                 [self.resent_indexes(j, variant)] for line in event_lines(h.ids[rows], h.times_us[rows])]
        in_batch = int(spec.events * spec.in_batch_rate)
        fresh_count = spec.events - len(cross) - in_batch
        ids = random_ids(rng, fresh_count)
        times = rng.integers(spec.anchor_us - 2 * HOUR_US, spec.anchor_us, size=fresh_count, dtype=np.int64)
        fresh = event_lines(ids, times)
        lines = fresh + [fresh[i] for i in rng.integers(0, fresh_count, size=in_batch)] + cross
        return [lines[i] for i in rng.permutation(len(lines))]

    def expected_counts(self) -> dict[str, int]:
        """What a correct dedup must find, in every variant (in-batch copies may repeat one event
        several times)."""
        cross = sum(self._resent_per_batch.values())
        in_batch = int(self.spec.events * self.spec.in_batch_rate)
        return {"events": self.spec.events, "cross_batch_duplicates": cross, "in_batch_duplicates": in_batch,
                "unique_new": self.spec.events - cross - in_batch}
