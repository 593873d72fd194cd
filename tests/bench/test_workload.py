"""The benchmark's workload and seeded history mean what the bench says they mean: the engine,
run on the seeded cache, finds exactly the resent events as cross-batch duplicates and the
planted copies as in-batch ones, and the workload is the same bytes for the same seed."""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import orjson
import pyarrow.parquet as pq

from bench.history import seed_eventdedup, seed_id_parquet, seed_stream_files
from bench.workload import Workload, WorkloadSpec, id_bytes, uuid_text
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


def seed_and_run_measured(store, config, workload: Workload, lines: list[bytes], spark) -> dict[str, int]:
    """Seed the history, run the batch through the engine, return its commit's counts."""
    seed_eventdedup(store, config, workload)
    store.put_bytes("landing/batch/part-0.jsonl", b"\n".join(lines) + b"\n")
    run_batch(store, config, "measured", InputSelector(input_prefix="landing/batch/"), SPEC.anchor, lambda: spark)
    layout = Layout(config.layout)
    record = read_commit(store, layout, load_committed_state(store, layout).batches["measured"])
    assert record is not None
    return dict(record.counts)


def test_the_engine_on_the_seeded_history_finds_exactly_the_planted_duplicates(spark, s3_server, bucket, store) -> None:
    config = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 4, "window_hours": SPEC.window_hours})
    workload = Workload(SPEC)
    lines = workload.batch_lines()
    counts = seed_and_run_measured(store, config, workload, lines, spark)
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
