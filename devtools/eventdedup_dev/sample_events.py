"""Deterministic sample event streams with known duplicates, for the demo and the tests.

The generator keeps its own ledger of what it planted (which lines are duplicates of what,
which are malformed), so expected results never come from the code under test.
"""
from __future__ import annotations

import gzip
import random
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import orjson

_WORDS = ("click", "view", "purchase", "signup", "scroll", "Zürich", "東京", "café ☕", "naïve", "🙂 emoji")


@dataclass
class PlantedBatch:
    """One batch's input objects plus the ledger of what was planted in it."""

    name: str
    objects: dict[str, bytes] = field(default_factory=dict)  # relative object name -> body
    lines: list[tuple[str, int, bytes]] = field(default_factory=list)  # object, line number, raw
    unique_ids: list[str] = field(default_factory=list)  # first occurrences, new to the stream
    in_batch_duplicates: int = 0
    cross_batch_duplicates: int = 0
    malformed: int = 0

    @property
    def input_lines(self) -> int:
        return len(self.lines)

    def expected_counts(self) -> dict[str, int]:
        return {"input_lines": self.input_lines, "malformed": self.malformed,
                "in_batch_duplicates": self.in_batch_duplicates,
                "cross_batch_duplicates": self.cross_batch_duplicates, "output_rows": len(self.unique_ids)}


class SampleStream:
    """Builds batches of JSON-lines events; every duplicate is an exact copy of its original."""

    def __init__(self, seed: int, start: datetime) -> None:
        self.rng = random.Random(seed)
        self.start = start.astimezone(timezone.utc)
        self.history: list[bytes] = []  # raw lines of every unique event emitted so far

    def new_event(self, hour_offset: float) -> bytes:
        event_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        created = self.start + timedelta(hours=hour_offset)
        return orjson.dumps({
            "event_id": event_id,
            "created_at": created.isoformat().replace("+00:00", "Z"),
            "user_id": f"u{self.rng.randrange(1000)}",
            "action": self.rng.choice(_WORDS),
            "value": self.rng.randrange(10_000),
        })

    def batch(self, name: str, new: int, in_batch_dups: int, cross_batch_dups: int, malformed: int,
              objects: int = 2, hours: float = 2.0, gzip_last: bool = True) -> PlantedBatch:
        planted = PlantedBatch(name)
        fresh = [self.new_event(self.rng.uniform(0, hours)) for _ in range(new)]
        lines: list[bytes] = list(fresh)
        lines += [self.rng.choice(fresh) for _ in range(in_batch_dups)]
        old = [self.rng.choice(self.history) for _ in range(cross_batch_dups)] if self.history else []
        lines += old
        bad = [b'{"event_id": "broken', b"not json at all", b'{"created_at": "2026-01-01T00:00:00Z"}',
               b'{"event_id": true, "created_at": 1}', b"[1, 2, 3]"]
        lines += [bad[i % len(bad)] for i in range(malformed)]
        self.rng.shuffle(lines)
        # Duplicates are exact copies, so the survivors are the fresh events in shuffled order.
        fresh_lines, seen, firsts = set(fresh), set(), []
        for raw in lines:
            if raw in fresh_lines and raw not in seen:
                seen.add(raw)
                firsts.append(raw)
        planted.unique_ids = [orjson.loads(raw)["event_id"] for raw in firsts]
        planted.in_batch_duplicates = in_batch_dups
        planted.cross_batch_duplicates = len(old)
        planted.malformed = malformed
        chunk = -(-len(lines) // objects)
        for index in range(objects):
            part = lines[index * chunk:(index + 1) * chunk]
            body = b"".join(raw + b"\n" for raw in part)
            rel = f"part-{index:03d}.jsonl"
            if gzip_last and index == objects - 1:
                rel += ".gz"
                body = gzip.compress(body, mtime=0)
            planted.objects[rel] = body
            planted.lines += [(rel, n, raw) for n, raw in enumerate(part, start=1)]
        self.history += fresh
        return planted

