"""Retract a committed batch (`eventdedup retract`): out of the committed view, its input new again.

Expected rows come from the documented rules: first copy of an id wins, a copy of an id some
visible batch holds is a cross-batch duplicate; a retracted batch is visible to nobody.
"""
from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import orjson
import pytest

from eventdedup.commit.ledger_reader import LedgerReader
from eventdedup.commit.log import load_committed_state, read_commit
from eventdedup.errors import RetractionRefusedError
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.fsck import fsck
from eventdedup.ops.pipeline import run_batch, verify_rerun
from eventdedup.ops.retract import retract_batch
from eventdedup.ops.status import store_status
from eventdedup.promotion.recovery import recover
from eventdedup.s3store import S3Store

from ..support.helpers import NOW, bucket_listing, committed_cache_entries, committed_rows, put_lines
from ..support.invariants import assert_commits_are_whole, assert_seen_ids_match_output


def ev(event_id: str, hour: int, **payload: object) -> bytes:
    return orjson.dumps({"event_id": event_id, "created_at": f"2026-11-22T0{hour}:10:00Z", **payload})


B1 = [ev(f"a{i}", 3 + i % 2) for i in range(6)]
# X: new ids, a copy of b1's a0 (cross-batch, kept in b1) and an in-batch copy of x1.
X = [ev(f"x{i}", 4 + i % 2) for i in range(6)] + [ev("a0", 3), ev("x1", 5)]
Y_INDEPENDENT = [ev(f"y{i}", 5) for i in range(4)]
Y_DEPENDENT = [ev("y0", 5), ev("x2", 4), ev("x3", 5, v=2)]  # x2 again (natural), x3 with another payload


def run(store: S3Store, config: Any, spark: Any, batch_id: str, lines: list[bytes] | None,
        prefix: str | None = None) -> None:
    prefix = prefix or f"landing/{batch_id}/"
    if lines is not None:
        put_lines(store, f"{prefix}1.jsonl", lines)
    run_batch(store, config, batch_id, InputSelector(input_prefix=prefix), NOW, lambda: spark)


def rows_by_batch(store: S3Store, config: Any, kind: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for row in committed_rows(store, config, kind):
        out.setdefault(row["batch_id"], []).append(row)
    return out


def without_batch(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(orjson.dumps({k: v for k, v in row.items() if k != "batch_id"}, default=str).decode()
                  for row in rows)


def test_retracted_batch_leaves_the_view_and_its_input_commits_its_original_rows_again(store, config, spark) -> None:
    run(store, config, spark, "b1", B1)
    run(store, config, spark, "x", X)
    run(store, config, spark, "y", Y_INDEPENDENT)
    x_data, x_audit = rows_by_batch(store, config, "data")["x"], rows_by_batch(store, config, "audit")["x"]
    assert sorted(row["event_id"] for row in x_data) == [f"x{i}" for i in range(6)]
    assert sorted((row["event_id"], row["kept_in_batch"]) for row in x_audit) == [("a0", "b1"), ("x1", "x")]
    layout = Layout(config.layout)
    manifests_before = {key: store.get_bytes(key) for key in bucket_listing(store) if key.startswith("manifests/")}

    arrival = load_committed_state(store, layout).latest_arrival_hour
    # An operator's clock a month ahead of log time: the retraction commits at log time, so the
    # windows of the batches after it do not move.
    outcome = retract_batch(store, config, "x", "wrong prefix", NOW + timedelta(days=30))
    assert load_committed_state(store, layout).latest_arrival_hour == arrival
    assert (outcome.retraction_id, outcome.retracted, outcome.newly_committed) == ("retract-x", ("x",), True)
    assert outcome.figures["retracted_output_rows"] == 6
    # Readers through the log and the manifests no longer see x; its objects are still on S3.
    assert set(rows_by_batch(store, config, "data")) == {"b1", "y"}
    assert set(rows_by_batch(store, config, "audit")) == set()
    assert orjson.loads(store.get_bytes("manifests/x.manifest")) == {"entries": []}
    for key, body in manifests_before.items():
        if key != "manifests/x.manifest":
            assert store.get_bytes(key) == body
    assert all(store.head(row_key) is not None for row_key in bucket_listing(store) if "/x-part-" in row_key)
    assert {owner for owner, _, _ in committed_cache_entries(store, config)} == {"b1", "y"}
    state = load_committed_state(store, layout)
    assert "x" not in state.batches and state.retracted == {"x": outcome.version}
    assert not [key for key in LedgerReader(store, state.ledger, layout).entries() if key.startswith("landing/x/")]
    assert fsck(store, config).consistent and recover(store, config).consistent
    listed = {entry["batch_id"]: entry for entry in store_status(store, config, NOW)["batches"]}
    assert listed["x"]["retracted_at_version"] == outcome.version
    assert (listed["retract-x"]["retracts"], listed["retract-x"]["reason"]) == (["x"], "wrong prefix")
    assert_commits_are_whole(store, config)
    assert_seen_ids_match_output(store, config)
    assert verify_rerun(store, config, "y", spark) == []  # a later, independent batch still reruns exactly

    # The retracted id never commits again; retracting again changes nothing.
    with pytest.raises(RetractionRefusedError, match="retracted"):
        run(store, config, spark, "x", None)
    listing = bucket_listing(store)
    again = retract_batch(store, config, "x", "wrong prefix", NOW)
    assert (again.version, again.newly_committed) == (outcome.version, False) and bucket_listing(store) == listing

    # The same input under a new id (its objects are unconsumed again) commits exactly x's rows.
    run(store, config, spark, "x-again", None, prefix="landing/x/")
    assert without_batch(rows_by_batch(store, config, "data")["x-again"]) == without_batch(x_data)
    audit = rows_by_batch(store, config, "audit")["x-again"]
    assert sorted((row["event_id"], row["reason"], row["kept_in_batch"]) for row in audit) == [
        ("a0", "cross_batch_natural", "b1"), ("x1", "in_batch_natural", "x-again")]
    assert_seen_ids_match_output(store, config)


def test_a_batch_a_later_one_decided_against_is_retracted_only_with_cascade(store, config, spark) -> None:
    run(store, config, spark, "b1", B1)
    run(store, config, spark, "x", X)
    run(store, config, spark, "y", Y_DEPENDENT)
    run(store, config, spark, "z", [ev("z0", 5), ev("a1", 4)])  # depends on b1 only
    original = rows_by_batch(store, config, "data")
    y_audit = rows_by_batch(store, config, "audit")["y"]
    assert sorted((row["event_id"], row["reason"], row["action"]) for row in y_audit) == [
        ("x2", "cross_batch_natural", "dropped"), ("x3", "cross_batch_synthetic", "renamed")]
    with pytest.raises(RetractionRefusedError, match=r"later batches decided duplicates against it: y \(2 audited"):
        retract_batch(store, config, "x", "producer bug", NOW)
    outcome = retract_batch(store, config, "x", "producer bug", NOW, cascade=True)
    assert outcome.retracted == ("x", "y")
    assert set(rows_by_batch(store, config, "data")) == {"b1", "z"}
    assert orjson.loads(store.get_bytes("manifests/y.manifest")) == {"entries": []}
    # Both inputs, processed again in their order, commit exactly their original rows.
    run(store, config, spark, "x2", None, prefix="landing/x/")
    run(store, config, spark, "y2", None, prefix="landing/y/")
    after = rows_by_batch(store, config, "data")
    assert without_batch(after["x2"]) == without_batch(original["x"])
    renamed = {row["original_event_id"]: row for row in after["y2"] if row["original_event_id"]}
    assert without_batch(after["y2"]) == without_batch(original["y"]) and set(renamed) == {"x3"}
    assert fsck(store, config).consistent
    assert_commits_are_whole(store, config)
    assert_seen_ids_match_output(store, config)


def test_retract_learns_dependants_from_the_commits_and_reads_audits_only_of_older_ones(store, config, spark) -> None:
    run(store, config, spark, "b1", B1)
    run(store, config, spark, "x", X)  # its copy of a0 is dropped against b1
    layout = Layout(config.layout)
    record = read_commit(store, layout, 2)
    assert record is not None and record.batch_change is not None
    assert record.batch_change.decided_against == {"b1": 1}  # x1's in-batch copy is x's own
    audits = {obj.key: store.get_bytes(obj.key) for obj in record.objects if obj.kind == "audit"}
    store.delete_keys(list(audits))  # the commit says it: no audit is read
    refused = r"later batches decided duplicates against it: x \(1 audited row\(s\) kept in b1\)"
    with pytest.raises(RetractionRefusedError, match=refused):
        retract_batch(store, config, "b1", "producer bug", NOW)
    # A commit written before 2026-11-26 does not say it: its audit is read.
    for key, data in audits.items():
        store.put_bytes(key, data)
    older = replace(record, change=replace(record.batch_change, decided_against=None))
    store.put_bytes(layout.commit(2), older.to_bytes())
    with pytest.raises(RetractionRefusedError, match=refused):
        retract_batch(store, config, "b1", "producer bug", NOW)


def test_retract_refuses_what_it_cannot_do(store, config, spark) -> None:
    with pytest.raises(RetractionRefusedError, match="not committed"):
        retract_batch(store, config, "nothing", "typo", NOW)
    run(store, config, spark, "b1", B1)
    with pytest.raises(RetractionRefusedError, match="needs a reason"):
        retract_batch(store, config, "b1", "  ", NOW)
