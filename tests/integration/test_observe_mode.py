"""Observe mode ([dedup] mode = "observe") through real Spark and the real S3 server: the same
three batches run enforcing in one store, and observing (the first two) then enforcing (the
third) in another.

Observing, every parsed line is output exactly once as it arrived, the audit holds the rows
enforcing audits with "would_" actions, and the cache is the one enforcing builds: the third
batch, enforced in both stores, comes out the same in both. Expected rows, counts and producer
values are written out here from the input lines and the documented rules.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson
import pytest

from eventdedup.commit.log import load_committed_state, read_commit
from eventdedup.config import Config
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.pipeline import run_batch, verify_rerun
from eventdedup.ops.retract import retract_batch
from eventdedup.report.build import build_report
from eventdedup.s3store import S3Store

from ..support.helpers import NOW, commit_counts, committed_cache_entries, committed_rows, make_config, put_lines


def ev(event_id: str, minute: int, **payload: object) -> bytes:
    return orjson.dumps({"event_id": event_id, "created_at": f"2026-11-22T03:{minute:02d}:00Z", **payload})


A1, A2, A3 = ev("a", 1, v=1, app_id="web"), ev("a", 1, v=2, app_id="web"), ev("a", 1, v=3, app_id="android")
C1, C2 = ev("c", 2, v=1, app_id=7), ev("c", 2, v=2, app_id=7)
D1, D2 = ev("d", 3, v=1, app_id="ios"), ev("d", 3, v=2, app_id="ios")
E1 = ev("e", 4, v=1)
F1 = ev("f", 5, v=1, app_id=None)
G1, G2 = ev("g", 6, v=1, app_id=True), ev("g", 6, v=2, app_id=True)
H1 = ev("h", 7, v=1, app_id="web")
BROKEN = b'{"event_id": "z", "created_at": '

BATCHES = {
    "b1": [A1, A1, A2, C1, D1, D1, E1],
    "b2": [A1, A3, BROKEN, C1, F1, F1, G1, G2, D2],
    "b3": [A1, A3, F1, H1, C2, H1, G2, D2],
}
# Enforced (synthetic = "rename"): (batch, line, reason, action, kept_in_batch) of every duplicate.
ENFORCED_AUDIT = [
    ("b1", 2, "in_batch_natural", "dropped", "b1"), ("b1", 3, "in_batch_synthetic", "renamed", "b1"),
    ("b1", 6, "in_batch_natural", "dropped", "b1"),
    ("b2", 1, "cross_batch_natural", "dropped", "b1"), ("b2", 2, "cross_batch_synthetic", "renamed", "b1"),
    ("b2", 4, "cross_batch_natural", "dropped", "b1"), ("b2", 6, "in_batch_natural", "dropped", "b2"),
    ("b2", 8, "in_batch_synthetic", "renamed", "b2"), ("b2", 9, "cross_batch_synthetic", "renamed", "b1"),
    ("b3", 1, "cross_batch_natural", "dropped", "b1"), ("b3", 2, "cross_batch_natural", "dropped", "b2"),
    ("b3", 3, "cross_batch_natural", "dropped", "b2"), ("b3", 5, "cross_batch_synthetic", "renamed", "b1"),
    ("b3", 6, "in_batch_natural", "dropped", "b3"), ("b3", 7, "cross_batch_natural", "dropped", "b2"),
    ("b3", 8, "cross_batch_natural", "dropped", "b2"),
]
WOULD = {"dropped": "would_drop", "renamed": "would_rename", "kept": "would_keep"}
OBSERVED_COUNTS = {
    "b1": {"input_lines": 7, "output_rows": 7, "in_batch_natural": 2, "in_batch_synthetic": 1,
           "would_drop_in_batch": 2, "would_rename": 1, "cache_keys_written": 5},  # a/1 a/2 c/1 d/1 e/1
    "b2": {"input_lines": 9, "malformed": 1, "output_rows": 8, "cross_batch_natural": 2, "cross_batch_synthetic": 2,
           "in_batch_natural": 1, "in_batch_synthetic": 1, "would_drop_cross_batch": 2, "would_drop_in_batch": 1,
           "would_rename": 3, "cache_keys_written": 5},  # a/3 d/2 f/1 g/1 g/2
}
ENFORCED_COUNTS = {
    "b1": {"input_lines": 7, "output_rows": 5, "in_batch_natural": 2, "in_batch_synthetic": 1,
           "in_batch_duplicates": 2, "renamed": 1, "cache_keys_written": 5},
    "b2": {"input_lines": 9, "malformed": 1, "output_rows": 5, "cross_batch_natural": 2, "cross_batch_synthetic": 2,
           "in_batch_natural": 1, "in_batch_synthetic": 1, "cross_batch_duplicates": 2, "in_batch_duplicates": 1,
           "renamed": 3, "cache_keys_written": 5},
    "b3": {"input_lines": 8, "output_rows": 2, "cross_batch_natural": 5, "cross_batch_synthetic": 1,
           "in_batch_natural": 1, "cross_batch_duplicates": 5, "in_batch_duplicates": 1, "renamed": 1,
           "cache_keys_written": 2},  # h/1 c/2
}


def expected_producer(line: bytes) -> str | None:
    """The documented rule: the top-level app_id, a string as it is, a number or boolean as JSON
    writes it, null when absent or null."""
    value = orjson.loads(line).get("app_id")
    if isinstance(value, bool):
        return "true" if value else "false"
    return None if value is None else str(value)


@pytest.fixture
def observe_bucket(s3_server, bucket: str) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """A second store beside the test's own: the observing one."""
    name = f"{bucket}-observe"
    s3_server.client().create_bucket(Bucket=name)
    yield name
    s3_server.delete_bucket(name)


def run(store: S3Store, config: Config, spark: Any, batch_id: str) -> None:  # type: ignore[misc]
    put_lines(store, f"landing/{batch_id}/x.jsonl", BATCHES[batch_id])
    run_batch(store, config, batch_id, InputSelector(input_prefix=f"landing/{batch_id}/"), NOW, lambda: spark)


def located(rows: list[dict[str, Any]]) -> list[tuple[str, str, int, str, str, str]]:
    return sorted((r["batch_id"], r["source_object"], r["line_number"], r["reason"], r["action"], r["kept_in_batch"])
                  for r in rows)


def of_batch(rows: list[dict[str, Any]], batch_id: str) -> list[str]:
    return sorted(orjson.dumps(row, default=str).decode() for row in rows if row["batch_id"] == batch_id)


def nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {name: value for name, value in counts.items() if value}


def test_observing_outputs_every_event_audits_what_enforcing_drops_and_keeps_its_cache(
        s3_server, bucket, observe_bucket, spark) -> None:
    settings: dict[str, Any] = {"report": {"producer_field": "app_id"}}
    enforcing = make_config(s3_server.endpoint_url, bucket, dedup={"synthetic": "rename"}, **settings)
    observing = make_config(s3_server.endpoint_url, observe_bucket, dedup={"synthetic": "rename", "mode": "observe"},
                            **settings)
    switched = make_config(s3_server.endpoint_url, observe_bucket, dedup={"synthetic": "rename"}, **settings)
    enforced, observed = S3Store(s3_server.client(), bucket), S3Store(s3_server.client(), observe_bucket)
    for batch_id in ("b1", "b2", "b3"):
        run(enforced, enforcing, spark, batch_id)
    for batch_id in ("b1", "b2"):
        run(observed, observing, spark, batch_id)
    observed_before_switch = committed_cache_entries(observed, observing)
    run(observed, switched, spark, "b3")

    # (a) Observing: every parsed line exactly once, as it arrived; the malformed one quarantined.
    observed_data = committed_rows(observed, switched, "data")
    assert sorted((r["batch_id"], r["event_id"], r["original_event_id"], r["duplicate_of"], r["op"],
                   r["supersedes_batch"], r["raw"]) for r in observed_data if r["batch_id"] != "b3") == sorted(
        (batch_id, orjson.loads(line)["event_id"], None, None, "insert", None, line.decode())
        for batch_id in ("b1", "b2") for line in BATCHES[batch_id] if line != BROKEN)
    assert [(r["batch_id"], r["line_number"], r["raw"]) for r in committed_rows(observed, switched, "quarantine")] == [
        ("b2", 3, BROKEN)]

    # (b) The audit: enforcing's rows, its actions as would-be ones.
    source = "landing/{}/x.jsonl".format
    assert located(committed_rows(enforced, enforcing, "audit")) == sorted(
        (batch_id, source(batch_id), line, reason, action, holder) for batch_id, line, reason, action, holder
        in ENFORCED_AUDIT)
    assert located(committed_rows(observed, switched, "audit")) == sorted(
        (batch_id, source(batch_id), line, reason, WOULD[action] if batch_id != "b3" else action, holder)
        for batch_id, line, reason, action, holder in ENFORCED_AUDIT)

    # (c) Counts, and the mode each commit records.
    assert {batch_id: nonzero(counts) for batch_id, counts in commit_counts(enforced, enforcing).items()} == (
        ENFORCED_COUNTS)
    assert {batch_id: nonzero(counts) for batch_id, counts in commit_counts(observed, switched).items()} == {
        **OBSERVED_COUNTS, "b3": ENFORCED_COUNTS["b3"]}
    layout = Layout(switched.layout)
    modes = {}
    for version in range(1, 4):
        record = read_commit(observed, layout, version)
        assert record is not None and record.batch_change is not None
        modes[record.batch_id] = record.batch_change.mode
        # What the report ranks and times copies by is recorded alike: the same duplicates were found.
        enforced_change = read_commit(enforced, layout, version).batch_change  # type: ignore[union-attr]
        assert enforced_change is not None
        for name in ("duplicates_by_folder", "duplicates_by_producer", "copies_decided_against",
                     "quarantined_by_reason", "decided_against"):
            assert getattr(record.batch_change, name) == getattr(enforced_change, name), (version, name)
    assert modes == {"b1": "observe", "b2": "observe", "b3": "enforce"}

    # (d) The cache observing built is enforcing's: switched, b3 comes out as in the enforced store.
    assert observed_before_switch == [entry for entry in committed_cache_entries(enforced, enforcing)
                                      if entry[0] != "b3"]
    assert committed_cache_entries(observed, switched) == committed_cache_entries(enforced, enforcing)
    for kind in ("data", "audit"):
        assert of_batch(committed_rows(observed, switched, kind), "b3") == of_batch(
            committed_rows(enforced, enforcing, kind), "b3")

    # (e) Each audit row's producer is its line's app_id.
    for store, config in ((enforced, enforcing), (observed, switched)):
        audit = committed_rows(store, config, "audit")
        assert [row["producer"] for row in audit] == [
            expected_producer(BATCHES[row["batch_id"]][row["line_number"] - 1]) for row in audit]
        assert {row["producer"] for row in audit} == {"web", "android", "7", "ios", None, "true"}

    # An observed batch recomputed after the switch is recomputed as it ran: observing.
    assert verify_rerun(observed, switched, "b2", spark) == []

    # The report says what observing would have dropped, batch by batch under the mode each ran.
    figures = build_report(observed, switched, datetime(2000, 1, 1, tzinfo=timezone.utc),
                           datetime(2100, 1, 1, tzinfo=timezone.utc)).figures
    assert [(b["batch_id"], b["mode"]) for b in figures["batches"]] == [
        ("b1", "observe"), ("b2", "observe"), ("b3", "enforce")]
    assert figures["settings"]["modes_in_range"] == {"observe": 2, "enforce": 1}
    observed_actions = Counter(action for batch, _, _, action, _ in ENFORCED_AUDIT if batch != "b3")
    totals = figures["totals"]
    assert (totals["would_drop_in_batch"] + totals["would_drop_cross_batch"], totals["would_rename"]) == (
        observed_actions["dropped"], observed_actions["renamed"])
    assert totals["in_batch_duplicates"] + totals["cross_batch_duplicates"] == sum(
        1 for batch, _, _, action, _ in ENFORCED_AUDIT if batch == "b3" and action == "dropped")
    assert figures["copy_lag"]["copies"] == len(ENFORCED_AUDIT)  # found alike, whatever was done with them

    # Retracting an observed batch (and b3, which decided against it) takes its output and cache
    # entries away like any batch's.
    retract_batch(observed, switched, "b2", "test", NOW + timedelta(minutes=5), cascade=True)
    assert {row["batch_id"] for row in committed_rows(observed, switched, "data")} == {"b1"}
    assert committed_cache_entries(observed, switched) == [entry for entry in observed_before_switch
                                                           if entry[0] == "b1"]
    assert load_committed_state(observed, layout).retracted.keys() == {"b2", "b3"}
