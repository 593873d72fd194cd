"""bench.reads' workload and summary: the probe plants what its expected counts say, whatever the
history before it, the history is the same for every probe, ids carry their event's time, and the
growth and the late events' share are read from a result document alone."""
from __future__ import annotations

from collections import Counter

import numpy as np
import orjson
import pytest

from bench.reads_summary import print_reads, summarise_reads
from bench.reads_workload import ReadsSpec, ReadsWorkload, uuid7_ids
from bench.traffic import KINDS, STATE_PARTS

SPEC = ReadsSpec(hourly_events=200, batch_hours=6, probe_events=2000, dense_hour_events=1000, late_events=20)


def _ids(lines: list[bytes]) -> Counter:
    return Counter(orjson.loads(line)["event_id"] for line in lines)


def test_a_uuid7_carries_its_events_millisecond() -> None:
    times = np.array([1_795_000_000_123_456, 1_795_000_000_123_999, 1_600_000_000_000_000])
    ids = uuid7_ids(np.random.default_rng(1), times)
    raw = ids.view(np.uint8).reshape(-1, 16)
    assert [int.from_bytes(row[:6].tobytes(), "big") for row in raw] == [1_795_000_000_123, 1_795_000_000_123,
                                                                          1_600_000_000_000]
    assert all(row[6] >> 4 == 7 and row[8] >> 6 == 2 for row in raw)


def test_the_probe_plants_exactly_its_expected_counts_from_the_last_days_history() -> None:
    workload = ReadsWorkload(SPEC)
    for days, variant in ((1, 2), (7, 15)):
        as_of = SPEC.probe_as_of(days)
        probe = workload.probe(as_of, variant)
        last = workload.batches_before(as_of)
        assert last == days * SPEC.batches_per_day
        history = {orjson.loads(line)["event_id"]: line for i in range(last - SPEC.batches_per_day, last)
                   for line in workload.history_batch(i).lines()}
        ids = _ids(probe.lines)
        committed = [line for line in probe.lines if orjson.loads(line)["event_id"] in history]
        exact = [line for line in committed if history[orjson.loads(line)["event_id"]] == line]
        expected = probe.expected
        assert len(probe.lines) == expected["input_lines"] == 2000
        assert len(exact) == expected["cross_batch_natural"] == 40
        assert len(committed) - len(exact) == expected["cross_batch_synthetic"] == 10  # re-stamped
        assert sum(ids.values()) - len(ids) == expected["in_batch_natural"] == 20
        assert len(ids) - len(committed) + expected["cross_batch_synthetic"] == expected["output_rows"] == 1940
        assert probe.lines == workload.probe(as_of, variant).lines  # reproducible
        assert not set(ids) - set(history) & set(_ids(workload.probe(as_of, variant + 1).lines))


def test_the_history_is_the_same_batches_whatever_was_probed_and_one_old_hour_is_dense() -> None:
    workload = ReadsWorkload(SPEC)
    sizes = [len(workload.history_batch(i)) for i in range(7 * SPEC.batches_per_day)]
    dense = [i for i, size in enumerate(sizes) if size > 200 * 6]
    assert len(dense) == 1 and sizes[dense[0]] == 200 * 6 + 1000
    batch = workload.history_batch(dense[0])
    assert int(np.sum(batch.times_us // 3_600_000_000 == SPEC.dense_hour)) >= 1000
    workload.probe(SPEC.probe_as_of(1), 3)
    assert ReadsWorkload(SPEC).history_batch(5).lines() == workload.history_batch(5).lines()
    late = workload.late()
    assert len(late.lines) == 20 and late.expected["output_rows"] == 20
    assert all(orjson.loads(line)["created_at"].startswith("2026-11-02T12:") for line in late.lines)


def _run(reads: dict[str, int], delta_log: int = 0) -> dict:
    traffic = {kind: {"read_bytes": reads.get(kind, 0)} for kind in KINDS}
    parts = {part: {"read_bytes": 0} for part in STATE_PARTS}
    parts["delta log"]["read_bytes"], parts["commit log"]["read_bytes"] = delta_log, reads.get("state", 0)
    return {"traffic": traffic, "state_parts": parts}


def test_growth_is_the_last_days_bytes_over_the_first_days_input_aside(capsys: pytest.CaptureFixture[str]) -> None:
    probes = {"1d warm": _run({"segments": 100, "state": 50, "output": 50, "input": 999}, 50),
              "1d cold": _run({"segments": 400, "guards": 400, "state": 100, "output": 100, "input": 999}, 100),
              "7d warm": _run({"segments": 130, "state": 60, "output": 60, "input": 999}, 60),
              "7d cold": _run({"segments": 500, "guards": 2000, "state": 200, "output": 300, "input": 999}, 100)}
    late = {**_run({"segments": 20, "guards": 5000}), "hour": "2026-11-02T12:00:00+00:00", "hour_segments": 16,
            "hour_segment_bytes": 1000, "hour_bytes_read": 90}
    result = {"days": [1, 7], "seconds": 60.0, "spec": SPEC.to_dict(),
              "partition_times": {"event": {"probes": probes, "late": late, "history": {}},
                                  "id": {"probes": probes, "late": {**late, "hour_bytes_read": 101}, "history": {}}}}
    summarise_reads(result)
    event, by_id = result["partition_times"]["event"]["summary"], result["partition_times"]["id"]["summary"]
    assert event["probes"]["7d cold"]["read_bytes"] == {"segments": 500, "guards": 2000, "state": 200, "delta log": 100,
                                                        "output": 200, "total": 3000, "input": 999}
    assert event["growth"] == {"cold": 3.0, "warm": pytest.approx(250 / 200)}
    assert event["growth_met"] == {"cold": False, "warm": True}  # event: <= 2.0x
    assert by_id["growth_met"] == {"cold": False, "warm": True}  # id: <= 1.3x
    assert (event["late_share"], event["late_met"], by_id["late_met"]) == (0.09, True, False)
    print_reads(result)
    out = capsys.readouterr().out
    assert "cold 3.00x (<= 2.0x: NOT MET); warm 1.25x (<= 2.0x: met)" in out
    assert "= 9.0% (<= 10%: met)" in out and "= 10.1% (<= 10%: NOT MET)" in out
