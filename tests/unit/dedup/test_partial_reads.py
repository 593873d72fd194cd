"""Deciding a bucket through segments read in parts equals deciding it through whole segments:
for random segments (keys with hundreds of payloads spanning blocks, runs of 0, 5, 255-257 and
600 entries, reshards 2 -> 4 -> 8 so guard-named keys include other fine buckets'), guards that
also name wrong hours (false hits), changing visible owners and every synthetic and changelog
policy, every output of `decide_bucket` is the same with a tail of 100 bytes or 8 KiB.
Each key's runs are split over a chain of one to three objects, as batches that build on older
objects leave them (eventdedup.cache.heads).
(Written by helper-8's review of the partial reads; a mutant that skips the block before a
probe equal to a block's first digest fails it.)"""
from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from eventdedup.cache.epochs import BucketEpochs
from eventdedup.cache.guard import IdGuard, decode_guard, encode_guard
from eventdedup.cache.segment import CacheRun, decode_segment, encode_segment
from eventdedup.cache.segment_parts import runs_holding
from eventdedup.dedup.bucket import BucketRules, decide_bucket
from eventdedup.dedup.decide import DuplicatePolicy
from eventdedup.dedup.survivor import SurvivorPolicy
from eventdedup.keys import bucket_array, guard_head_key, key_digest
from eventdedup.tables import UTC_MICROS

HOUR = 490_000
HOT: set[str] = set()
class Whole:
    """Chains of segments (each key's objects, oldest first) read whole."""
    def __init__(self, segs, guards, tail=0):  # type: ignore[no-untyped-def]
        self.segs, self.guards, self.tail, self.partial_calls = segs, guards, tail, 0

    def runs(self, h, b, newest):  # type: ignore[no-untyped-def]
        chain = self.segs.get((h, b), [])
        return [run for d in chain[len(chain) - newest:] for run in decode_segment(d, "x")]

    def runs_holding(self, h, b, digests):  # type: ignore[no-untyped-def]
        return self.runs(h, b, len(self.segs.get((h, b), [])))

    def chain_sizes(self, h, b):  # type: ignore[no-untyped-def]
        return [len(d) for d in self.segs.get((h, b), [])]

    def guard(self, head):  # type: ignore[no-untyped-def]
        d = self.guards.get(head)
        return IdGuard.empty() if d is None else decode_guard(d, head)


class Partial(Whole):
    def runs_holding(self, h, b, digests):  # type: ignore[no-untyped-def]
        assert list(digests) == sorted(digests)
        found = []
        for d in self.segs.get((h, b), []):
            self.partial_calls += 1
            r = runs_holding(d[-self.tail:], len(d), lambda a, z, d=d: d[a:z], "x", digests)
            assert r is not None
            found += r
        return found

def trial(rng):  # type: ignore[no-untyped-def]
    epochs = BucketEpochs(2)
    if rng.random() < 0.6:
        epochs = epochs.with_cutover(HOUR + rng.randrange(-3, 4), 4)
        if rng.random() < 0.5:
            epochs = epochs.with_cutover(epochs.cutovers[-1][0] + rng.randrange(1, 4), 8)
    nkeys = rng.choice([20, 300, 3000])
    ids = [f"id{i}" for i in range(nkeys)]
    dig = {i: key_digest(i) for i in ids}
    hours = list(range(HOUR - 6, HOUR + 7))
    owners = ["b1", "b2", "b3"]
    HOT.clear()
    segs, guard_ids = {}, {}
    for h in hours:
        count = epochs.at(h)
        # per owner, entries: keys in the hour, some repeated with many fingerprints
        per_fine = {}
        for o in owners:
            n = rng.choice([0, 5, 255, 256, 257, 600])
            chosen = [rng.choice(ids[: max(3, nkeys // rng.choice([1, 10]))]) for _ in range(n)]
            if rng.random() < 0.5 and chosen:  # one key with 300+ payloads spanning blocks
                HOT.add(chosen[0])
                chosen += [chosen[0]] * rng.randrange(256, 800)
            for i in chosen:
                f = int(epochs.fine_buckets(np.array([dig[i]], "S16"), np.array([h]))[0])
                fingerprint = rng.randrange(1, 4) if i not in HOT else rng.randrange(1, 1200)
                per_fine.setdefault((f, o), []).append((dig[i], fingerprint))
                coarse = int(bucket_array(np.array([dig[i]], "S16"), 2)[0])
                guard_ids.setdefault((o, coarse), []).append((dig[i], h))
        for f in range(count):
            runs = []
            for o in owners:
                pairs = sorted(set(per_fine.get((f, o), [])))
                if pairs or rng.random() < 0.2:
                    runs.append(CacheRun.build(o, np.array([p[0] for p in pairs], "S16"),
                                               np.array([p[1] for p in pairs], np.uint64)))
            if runs:  # a chain of one to three objects
                cuts = sorted(rng.sample(range(1, len(runs)), min(len(runs) - 1, rng.randrange(0, 3))))
                segs[(h, f)] = [encode_segment(runs[a:z]) for a, z in zip([0, *cuts], [*cuts, len(runs)], strict=True)]
    arrivals = {"b1": HOUR - 5, "b2": HOUR - 2, "b3": HOUR}
    guards = {}
    for (o, b), lst in guard_ids.items():
        extra = [(dig[rng.choice(ids)], rng.choice(hours)) for _ in range(rng.randrange(0, 20))]  # false/stale names
        lst = lst + extra
        ids_of, hours_of = np.array([x[0] for x in lst], "S16"), np.array([x[1] for x in lst], np.int64)
        key = guard_head_key(arrivals[o], b)
        prev = guards.get(key)
        held = IdGuard.empty() if prev is None else decode_guard(prev, key)
        guards[key] = encode_guard(held.with_ids(ids_of, hours_of))
    visible = rng.choice([{"b1": 0, "b2": 1, "b3": 2}, {"b1": 0, "b2": 1}, {"b2": 0, "b3": 1}])
    batch = "b4" if len(visible) == 3 or "b1" not in visible else "b3"
    arrival = HOUR + 1
    rules = BucketRules(batch, visible_owners=visible, kept_owners=frozenset(visible), arrival_hour=arrival,
                        guard_hours=tuple(range(HOUR - 6, arrival + 1)), guard_days=(), epochs=epochs,
                        survivor=SurvivorPolicy("first"),
                        policy=DuplicatePolicy(rng.choice(["rename", "drop", "keep"]), rng.random() < 0.5))
    hot = sorted(HOT)
    picked = [rng.choice(hot) if hot and rng.random() < 0.5 else rng.choice(ids) for _ in range(rng.randrange(1, 40))]
    rows = [(i, rng.choice([HOUR - 1, HOUR, HOUR + 1, HOUR + 2]),
             rng.randrange(1, 1200) if i in HOT else rng.randrange(1, 4)) for i in picked]
    table = pa.table({
        "event_id": [r[0] for r in rows],
        "key_digest": pa.array([dig[r[0]] for r in rows], pa.binary(16)),
        "fingerprint": pa.array([r[2] for r in rows], pa.uint64()),
        "event_time": pa.array([r[1] * 3_600_000_000 for r in rows], UTC_MICROS),
        "order_key": pa.nulls(len(rows), pa.binary()),
        "cache_hour": pa.array([r[1] for r in rows], pa.int64()),
    })
    digests = np.array([dig[r[0]] for r in rows], "S16")
    calls = 0
    for bucket in range(2):
        members = np.flatnonzero(bucket_array(digests, 2) == bucket)
        if not len(members):
            continue
        t = table.take(pa.array(members))
        a = decide_bucket(rules, bucket, t, Whole(segs, guards))
        for tail in (100, 8192):
            pc = Partial(segs, guards, tail)
            b = decide_bucket(rules, bucket, t, pc)
            calls += pc.partial_calls
            assert np.array_equal(a.emitted, b.emitted)
            assert a.output.equals(b.output) and a.audit.equals(b.audit)
            assert np.array_equal(a.duplicates, b.duplicates)
            assert dict(a.counts.items()) == dict(b.counts.items())
            assert a.segments == b.segments
            assert (a.guard is None) == (b.guard is None) and (a.guard is None or encode_guard(a.guard) == encode_guard(b.guard))
    return calls



@pytest.mark.parametrize("seed", [1, 3, 4])
def test_deciding_through_segments_read_in_parts_equals_deciding_through_whole_ones(seed: int) -> None:
    rng = random.Random(seed)
    assert sum(trial(rng) for _ in range(6)) > 0  # some hours were read in parts
