"""The emitted rows of a bucket (eventdedup.dedup.rows.output_columns), against the documented rules row by row:
a renamed synthetic copy gets the UUIDv5 of its key and fingerprint and keeps its old id in
original_event_id; a kept one is flagged in duplicate_of; an update names the batch it supersedes."""
from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from eventdedup.dedup.decide import SYNTHETIC_ID_NAMESPACE, Action, KeyDecision
from eventdedup.dedup.rows import output_columns

BATCH = "batch-7"
OWNERS = ("batch-1", "batch-2", "batch-3")


def _bucket(rows: int, seed: int, actions: np.ndarray | None = None) -> tuple[pa.Table, KeyDecision]:
    rng = np.random.default_rng(seed)
    ids = [f"id-{rng.integers(1 << 40)}-{i}" for i in range(rows)]
    fingerprints = rng.integers(0, 1 << 64, rows, dtype=np.uint64)
    times = rng.integers(0, 1 << 50, rows)
    half = rows // 2  # two chunks, as a table concatenated from shuffle chunks has
    table = pa.concat_tables([
        pa.table({"event_id": pa.array(ids[part], pa.string()), "fingerprint": pa.array(fingerprints[part], pa.uint64()),
                  "event_time": pa.array(times[part], pa.timestamp("us", tz="UTC"))})
        for part in (slice(0, half), slice(half, rows))])
    if actions is None:
        actions = rng.integers(0, len(Action), rows).astype(np.int8)
    holder = rng.integers(0, len(OWNERS) + 1, rows)  # len(OWNERS): the batch itself
    decision = KeyDecision(outcomes=np.zeros(rows, np.int8), actions=actions, holder=holder, owners=OWNERS,
                           batch_id=BATCH)
    return table, decision


def _expected(table: pa.Table, decision: KeyDecision) -> list[dict[str, Any]]:
    expected = []
    for row, source in enumerate(table.to_pylist()):
        action = Action(int(decision.actions[row]))
        if action is Action.DROP:
            continue
        key, fingerprint = source["event_id"], source["fingerprint"]
        holder = int(decision.holder[row])
        expected.append({
            "event_id": str(uuid.uuid5(SYNTHETIC_ID_NAMESPACE, f"{key}\n{fingerprint:016x}"))
            if action is Action.RENAME else key,
            "original_event_id": key if action is Action.RENAME else None,
            "duplicate_of": key if action is Action.KEEP else None,
            "op": "update" if action is Action.UPDATE else "insert",
            "supersedes_batch": (OWNERS[holder] if holder < len(OWNERS) else BATCH) if action is Action.UPDATE else None,
            "event_time": source["event_time"],
            "batch_id": BATCH,
        })
    return expected


@pytest.mark.parametrize("seed", range(5))
def test_every_action_gives_the_row_its_rules_say(seed: int) -> None:
    table, decision = _bucket(300, seed)
    output = output_columns(BATCH, table, decision)
    assert output.to_pylist() == _expected(table, decision)


@pytest.mark.parametrize("action", list(Action))
def test_a_bucket_of_one_action_only(action: Action) -> None:
    table, decision = _bucket(40, 11, np.full(40, action, np.int8))
    output = output_columns(BATCH, table, decision)
    assert output.to_pylist() == _expected(table, decision)


def test_an_empty_bucket() -> None:
    table, decision = _bucket(0, 3)
    assert output_columns(BATCH, table, decision).num_rows == 0
