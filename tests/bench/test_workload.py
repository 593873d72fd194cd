"""The benchmark's workload and seeded history mean what the bench says they mean: the engine,
run on the seeded cache, finds exactly the resent events as cross-batch duplicates and the
planted copies as in-batch ones, and the workload is the same bytes for the same seed."""
from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import numpy as np
import orjson
import pyarrow.parquet as pq

from bench.history import seed_eventdedup, seed_id_parquet, seed_stream_files
from bench.workload import HOUR_US, Workload, WorkloadSpec, event_line, event_lines, id_bytes, random_ids, uuid_text
from eventdedup.commit.log import load_committed_state, read_commit
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.pipeline import run_batch

from ..support.helpers import make_config

SPEC = WorkloadSpec(events=3000, history_batches=5, history_batch_events=800, cross_batch_max_age_hours=4, seed=7)


def test_workload_is_reproducible_and_planted_as_specified() -> None:
    lines = Workload(SPEC).batch_lines()
    assert lines == Workload(SPEC).batch_lines()
    assert lines != Workload(WorkloadSpec(**{**SPEC.__dict__, "seed": 8})).batch_lines()
    expected = Workload(SPEC).expected_counts()
    ids = [orjson.loads(line)["event_id"] for line in lines]
    assert len(lines) == 3000 and len(set(ids)) == expected["unique_new"] + expected["cross_batch_duplicates"]
    assert expected == {"events": 3000, "cross_batch_duplicates": 90, "in_batch_duplicates": 60, "unique_new": 2850}
    # Resent events are byte for byte the history's events, from batches inside the maximum age.
    workload = Workload(SPEC)
    resent = {uuid_text(id_bytes(h.ids, i)) for j in range(SPEC.history_batches)
              for h in [workload.history_batch(j)] for i in workload.resent_indexes(j)}
    assert len(resent) == 90 and resent <= set(ids)
    assert all(len(workload.resent_indexes(j)) == 0 for j in range(SPEC.history_batches)
               if SPEC.history_as_of(j) - timedelta(hours=2) < SPEC.anchor - timedelta(hours=4))


def run_measured(store, config, lines: list[bytes], batch_id: str, spark) -> dict[str, int]:
    """Run a batch through the engine (committed), return its commit's counts."""
    store.put_bytes(f"landing/{batch_id}/part-0.jsonl", b"\n".join(lines) + b"\n")
    run_batch(store, config, batch_id, InputSelector(input_prefix=f"landing/{batch_id}/"), SPEC.anchor, lambda: spark)
    layout = Layout(config.layout)
    record = read_commit(store, layout, load_committed_state(store, layout).batches[batch_id])
    assert record is not None
    return dict(record.counts)


def test_the_engine_on_the_seeded_history_finds_exactly_the_planted_duplicates(spark, s3_server, bucket, store) -> None:
    """Variant 0, then variant 1 committed on top of it, as the bench's measured runs are: each finds
    its own planted copies, the resent events' fingerprints seeded true for both."""
    config = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 4, "window_hours": SPEC.window_hours})
    workload = Workload(SPEC)
    seed_eventdedup(store, config, workload, variants=(0, 1))
    for variant in (0, 1):
        counts = run_measured(store, config, workload.batch_lines(variant), f"measured-{variant}", spark)
        assert (counts["cross_batch_natural"], counts["in_batch_natural"], counts["output_rows"]) == (90, 60, 2850)
        assert counts["cross_batch_synthetic"] == counts["in_batch_synthetic"] == 0


def test_peer_history_files_hold_every_history_id(tmp_path: Path) -> None:
    workload = Workload(SPEC)
    seed_id_parquet(tmp_path / "ids", workload)
    seed_stream_files(tmp_path / "stream", workload)
    batch = workload.history_batch(2)
    expected = [uuid_text(id_bytes(batch.ids, i)) for i in range(len(batch.ids))]
    assert pq.read_table(tmp_path / "ids" / f"{batch.batch_id}.parquet").column("event_id").to_pylist() == expected
    stream = [orjson.loads(line) for line in (tmp_path / "stream" / f"{batch.batch_id}.json").read_bytes().splitlines()]
    assert [event["event_id"] for event in stream] == expected
    times = np.array([np.datetime64(event["created_at"][:-1], "us").astype(np.int64) for event in stream])
    assert (times == batch.times_us).all()


def _parsed(lines: list[bytes]) -> list[tuple[str, bytes]]:
    return [(orjson.loads(line)["event_id"], line) for line in lines]


def test_a_variant_plants_the_same_counts_over_the_same_history_with_events_of_its_own() -> None:
    workload = Workload(SPEC)
    history = {uuid_text(id_bytes(h.ids, i)): line for j in range(SPEC.history_batches)
               for h, lines in [(workload.history_batch(j), workload.history_lines(j))] for i, line in enumerate(lines)}
    base = _parsed(workload.batch_lines())
    for variant in (1, 2):
        events = _parsed(workload.batch_lines(variant))
        assert Workload(SPEC).batch_lines(variant) == [line for _, line in events]  # reproducible
        ids = [event_id for event_id, _ in events]
        resent = {event_id for event_id in ids if event_id in history}
        fresh = set(ids) - resent
        # Every resent event is the history's line byte for byte; the counts are variant 0's.
        assert all(line == history[event_id] for event_id, line in events if event_id in resent)
        assert len(resent) == workload.expected_counts()["cross_batch_duplicates"] == 90
        assert len(ids) - len(set(ids)) == workload.expected_counts()["in_batch_duplicates"] == 60
        assert len(fresh) == workload.expected_counts()["unique_new"] == 2850
        # Its new events are its own: none of another variant's.
        assert not fresh & {event_id for event_id, _ in base}
        assert not fresh & {event_id for event_id, _ in _parsed(workload.batch_lines(3 - variant))}
    # The history is the same whatever variant was drawn.
    assert {uuid_text(id_bytes(workload.history_batch(0).ids, i)) for i in range(800)} <= history.keys()
    assert Workload(SPEC).history_lines(4) == workload.history_lines(4)


def test_events_formatted_column_wise_are_event_line_byte_for_byte() -> None:
    rng = np.random.default_rng(5)
    ids = random_ids(rng, 500)
    times = rng.integers(SPEC.anchor_us - 48 * HOUR_US, SPEC.anchor_us, size=500, dtype=np.int64)
    times[7] = SPEC.anchor_us  # a whole second: isoformat writes no fraction
    times[8] = SPEC.anchor_us + 1
    assert event_lines(ids, times) == [event_line(id_bytes(ids, i), int(times[i])) for i in range(500)]
    assert b'"created_at":"2026-11-22T12:00:00+00:00"' in event_lines(ids, times)[7]


def test_a_one_event_variant_is_one_new_event() -> None:
    one = Workload(replace(SPEC, events=1))
    assert one.expected_counts() == {"events": 1, "cross_batch_duplicates": 0, "in_batch_duplicates": 0,
                                     "unique_new": 1}
    lines = [one.batch_lines(variant) for variant in range(1, 6)]
    assert all(len(of_variant) == 1 for of_variant in lines) and len({line for (line,) in lines}) == 5
