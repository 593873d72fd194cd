"""Soak (outside the default suite: `make soak`): 50 consecutive batches with random crashes at a
random S3 request (named by its verb and which occurrence of it, not by its arrival number, which
the batch's threads reorder), random flavour, and random reruns of committed batches between them. After
every batch: commits are whole, seen pairs equal output, and the batch's committed rows equal the
plain reference model's. Seeded (SOAK_SEED), so a failure replays exactly.
"""
from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import orjson
import pytest

from eventdedup.inputs.selector import InputSelector
from eventdedup.ops.pipeline import run_batch, verify_rerun
from eventdedup.promotion.recovery import recover
from eventdedup.s3store import S3Store, make_client
from eventdedup_dev.s3_requests import FaultPoint

from ..support.helpers import NOW, bucket_listing, committed_rows, expected_renamed_id, put_lines
from ..support.invariants import assert_commits_are_whole, assert_seen_ids_match_output
from ..support.reference_model import ModelEvent, ModelPolicy, ModelStore, decide_batch
from .conftest import config_for, is_injected_crash

BATCHES = int(os.environ.get("SOAK_BATCHES", "50"))
VERBS = ["GET", "GET", "LIST", "PUT", "PUT", "COPY", "POST", "HEAD"]


def random_batch(rng: random.Random, number: int) -> list[bytes]:
    lines = []
    for _ in range(rng.randint(5, 40)):
        if rng.random() < 0.05:
            lines.append(b'{"event_id": broken')
            continue
        event_id = f"e{rng.randrange(number * 15 + 10)}"  # a growing pool: cross-batch duplicates
        hour = 3 + rng.randrange(3)
        lines.append(orjson.dumps({"event_id": event_id, "created_at": f"2026-11-22T0{hour}:10:00Z",
                                   "v": rng.choice([1, 1, 1, 2])}))
    return lines


def expected_output(batch: str, lines: list[bytes], model: ModelStore) -> list[tuple[str, str | None, str]]:
    events = [orjson.loads(line) for line in lines if not line.startswith(b'{"event_id": broken')]
    # The fingerprint is the whole event (README, "Dedup semantics"): copies of an id in other
    # hours are synthetic duplicates of it, since their created_at differs.
    models = [ModelEvent(e["event_id"], orjson.dumps(e, option=orjson.OPT_SORT_KEYS)) for e in events]
    rows = []
    for event, verdict in zip(events, decide_batch(model, batch, models, ModelPolicy()), strict=False):
        if verdict.action == "renamed":
            rows.append((expected_renamed_id(event["event_id"], event), event["event_id"], orjson.dumps(event).decode()))
        elif verdict.action != "dropped":
            rows.append((event["event_id"], None, orjson.dumps(event).decode()))
    return sorted(rows, key=repr)


@pytest.mark.soak
def test_fifty_batches_with_random_crashes_and_reruns_keep_every_invariant(s3_server, proxy, spark) -> None:
    seed = int(os.environ.get("SOAK_SEED", "20261122"))
    rng = random.Random(seed)
    bucket = f"soak-{os.getpid()}"
    s3_server.client().create_bucket(Bucket=bucket)
    direct, via_proxy = config_for(s3_server.endpoint_url, bucket), config_for(proxy.endpoint_url, bucket)
    store = S3Store(s3_server.client(), bucket)
    model = ModelStore()
    crashes = reruns = 0
    started = time.monotonic()
    for number in range(1, BATCHES + 1):
        batch, lines = f"s{number:03d}", random_batch(rng, number)
        put_lines(store, f"landing/{batch}/1.jsonl", lines)
        selector = InputSelector(input_prefix=f"landing/{batch}/")
        if rng.random() < 0.5:
            verb, occurrence = rng.choice(VERBS), rng.randint(1, 12)
            proxy.arm(FaultPoint(where=lambda r, verb=verb: r.verb == verb, occurrence=occurrence, label=verb),
                      rng.choice(["raise_before", "lose_response"]))
            try:
                run_batch(S3Store(make_client(via_proxy.s3), bucket), via_proxy, batch, selector, NOW, lambda: spark)
            except Exception as exc:  # noqa: BLE001 - any failure of a killed run is expected
                assert is_injected_crash(exc, proxy), (batch, exc)
                crashes += 1
            proxy.heal()
            assert_commits_are_whole(store, direct)
            assert_seen_ids_match_output(store, direct)
            report = recover(store, direct)
            assert report.consistent, (batch, report.problems)
        run_batch(store, direct, batch, selector, NOW, lambda: spark)
        got = sorted(((r["event_id"], r["original_event_id"], r["raw"]) for r in committed_rows(store, direct, "data")
                      if r["batch_id"] == batch), key=repr)
        assert got == expected_output(batch, lines, model), batch
        assert_commits_are_whole(store, direct)
        assert_seen_ids_match_output(store, direct)
        if rng.random() < 0.2:
            earlier = f"s{rng.randint(1, number):03d}"
            before = bucket_listing(store)
            run_batch(store, direct, earlier, InputSelector(input_prefix=f"landing/{earlier}/"), NOW, lambda: spark)
            assert bucket_listing(store) == before, earlier
            assert verify_rerun(store, direct, earlier, spark) == [], earlier
            reruns += 1
    summary = {"date": time.strftime("%Y-%m-%d"), "seed": seed, "batches": BATCHES, "crashes": crashes, "reruns_verified": reruns,
               "seconds": round(time.monotonic() - started, 1), "result": "all invariants held"}
    results = Path(__file__).resolve().parents[2] / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "soak-latest.json").write_text(json.dumps(summary, indent=2) + "\n")
