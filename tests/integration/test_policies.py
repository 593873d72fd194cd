"""One table-driven case per dedup policy, through real Spark and the real S3 server: exact output,
audit and cache rows, with expectations written out from the documented semantics.

Ids, derived ids, key bytes and fingerprints are computed here from the documented rules
(helpers.expected_*), never by the code under test.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from eventdedup.commit.log import load_committed_state, read_commit
from eventdedup.config import Config
from eventdedup.errors import ConfigError
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.pipeline import run_batch, verify_rerun
from eventdedup.ops.retract import retract_batch
from eventdedup.s3store import S3Store

from ..support.helpers import (
    NOW,
    committed_cache_entries,
    committed_rows,
    expected_fingerprint,
    expected_renamed_id,
    make_config,
    put_lines,
)

UUID_B = "0f8fad5b-d9cb-469f-a165-70867728950e"


def ev(event_id: object, minute: int = 10, **payload: object) -> dict[str, Any]:
    return {"event_id": event_id, "created_at": f"2026-11-22T03:{minute:02d}:00Z", **payload}


A1, A2, A3, A4 = (ev("a", v=n) for n in (1, 2, 3, 4))
B1 = ev(UUID_B, v=1)


P3, P5, P7 = (ev("a", price=n) for n in (3, 5, 7))
P7_TIE = ev("a", price=7, note="a tie")


def at_hour(hour: int, **payload: object) -> dict[str, Any]:
    return {"event_id": "a", "created_at": f"2026-11-22T{hour:02d}:10:00Z", **payload}


U_0130 = at_hour(3, updated_at="2026-11-22T00:30:00-01:00")
U_0100 = at_hour(5, updated_at="2026-11-22T01:00:00Z")
U_EPOCH_0130 = at_hour(4, updated_at=1795311000)


def raw(event: dict[str, Any]) -> str:
    return orjson.dumps(event).decode()


def expected_key(key_text: str) -> bytes:
    """Canonical UUIDs are stored raw; everything else as 16-byte BLAKE2b."""
    if len(key_text) == 36 and key_text.count("-") == 4 and key_text == key_text.lower():
        return bytes.fromhex(key_text.replace("-", ""))
    return hashlib.blake2b(key_text.encode(), digest_size=16).digest()


@dataclass
class Case:
    settings: dict[str, Any]
    batches: list[list[dict[str, Any]]]  # batch i is "b<i+1>"
    # (batch, event_id, original_event_id, duplicate_of, op, supersedes_batch, input event)
    output: list[tuple[str, str, str | None, str | None, str, str | None, dict[str, Any]]]
    # (batch, line, event_id, reason, action, kept_in_batch)
    audit: list[tuple[str, int, str, str, str, str]]
    # (owner, key text, input event whose fingerprint is stored)
    cache: list[tuple[str, str, dict[str, Any]]]
    fingerprint_of: Callable[[dict[str, Any]], dict[str, Any]] = field(default=lambda event: event)


def out(batch: str, event: dict[str, Any], event_id: str | None = None, original: str | None = None,
        duplicate_of: str | None = None, op: str = "insert", supersedes: str | None = None):  # type: ignore[no-untyped-def]
    return (batch, event_id if event_id is not None else str(event["event_id"]), original, duplicate_of, op,
            supersedes, event)


CASES = {
    "synthetic=rename": Case(
        {"synthetic": "rename"},
        [[A1, A2, A1, B1], [A2, A3, B1, A3]],
        output=[out("b1", A1), out("b1", A2, expected_renamed_id("a", A2), original="a"), out("b1", B1),
                out("b2", A3, expected_renamed_id("a", A3), original="a")],
        audit=[("b1", 2, "a", "in_batch_synthetic", "renamed", "b1"), ("b1", 3, "a", "in_batch_natural", "dropped", "b1"),
               ("b2", 1, "a", "cross_batch_natural", "dropped", "b1"),
               ("b2", 2, "a", "cross_batch_synthetic", "renamed", "b1"),
               ("b2", 3, UUID_B, "cross_batch_natural", "dropped", "b1"),
               ("b2", 4, "a", "in_batch_natural", "dropped", "b2")],
        cache=[("b1", "a", A1), ("b1", "a", A2), ("b1", UUID_B, B1), ("b2", "a", A3)],
    ),
    "synthetic=drop": Case(
        {"synthetic": "drop"},
        [[A1, A2, A1, B1], [A2, A3, B1, A3]],
        output=[out("b1", A1), out("b1", B1)],
        audit=[("b1", 2, "a", "in_batch_synthetic", "dropped", "b1"), ("b1", 3, "a", "in_batch_natural", "dropped", "b1"),
               ("b2", 1, "a", "cross_batch_synthetic", "dropped", "b1"),
               ("b2", 2, "a", "cross_batch_synthetic", "dropped", "b1"),
               ("b2", 3, UUID_B, "cross_batch_natural", "dropped", "b1"),
               ("b2", 4, "a", "cross_batch_synthetic", "dropped", "b1")],
        cache=[("b1", "a", A1), ("b1", UUID_B, B1)],
    ),
    "synthetic=keep": Case(
        {"synthetic": "keep"},
        [[A1, A2, A1, B1], [A2, A3, B1, A3]],
        output=[out("b1", A1), out("b1", A2, duplicate_of="a"), out("b1", B1), out("b2", A3, duplicate_of="a")],
        audit=[("b1", 2, "a", "in_batch_synthetic", "kept", "b1"), ("b1", 3, "a", "in_batch_natural", "dropped", "b1"),
               ("b2", 1, "a", "cross_batch_natural", "dropped", "b1"),
               ("b2", 2, "a", "cross_batch_synthetic", "kept", "b1"),
               ("b2", 3, UUID_B, "cross_batch_natural", "dropped", "b1"),
               ("b2", 4, "a", "in_batch_natural", "dropped", "b2")],
        cache=[("b1", "a", A1), ("b1", "a", A2), ("b1", UUID_B, B1), ("b2", "a", A3)],
    ),
    "changelog, survivor=last": Case(
        {"changelog": True, "survivor": "last"},
        [[A1, A2, B1], [A1, A3, B1], [A2, A4]],
        output=[out("b1", A2), out("b1", B1), out("b2", A3, op="update", supersedes="b1"),
                out("b3", A4, op="update", supersedes="b2")],
        audit=[("b1", 1, "a", "in_batch_synthetic", "dropped", "b1"),
               ("b2", 1, "a", "in_batch_synthetic", "dropped", "b2"),
               ("b2", 3, UUID_B, "cross_batch_natural", "dropped", "b1"),
               ("b3", 1, "a", "cross_batch_natural", "dropped", "b1")],
        cache=[("b1", "a", A2), ("b1", UUID_B, B1), ("b2", "a", A3), ("b3", "a", A4)],
    ),
    # received_at is volatile: left out of the fingerprint, so these copies are natural
    # duplicates, and the earliest received copy is the one kept.
    "survivor=min:received_at with a fingerprint exclusion": Case(
        {"survivor": "min:received_at", "fingerprint_exclude": ["received_at"]},
        [[ev("a", received_at="2026-11-22T03:12:00Z"), ev("a", received_at="2026-11-22T03:11:00Z"),
          ev("a"), ev("a", received_at="2026-11-22T03:11:00Z")]],
        output=[out("b1", ev("a", received_at="2026-11-22T03:11:00Z"))],
        audit=[("b1", 1, "a", "in_batch_natural", "dropped", "b1"), ("b1", 3, "a", "in_batch_natural", "dropped", "b1"),
               ("b1", 4, "a", "in_batch_natural", "dropped", "b1")],
        cache=[("b1", "a", ev("a"))],
        fingerprint_of=lambda event: {k: v for k, v in event.items() if k != "received_at"},
    ),
    "survivor=max:price, synthetic=drop": Case(
        {"survivor": "max:price", "synthetic": "drop"},
        [[ev("a", price=5), ev("a"), ev("a", price=12.5), ev("a", price=12.5, note="x"), ev("a", price=-1)],
         [ev("a", price=99)]],
        output=[out("b1", ev("a", price=12.5))],
        audit=[("b1", 1, "a", "in_batch_synthetic", "dropped", "b1"), ("b1", 2, "a", "in_batch_synthetic", "dropped", "b1"),
               ("b1", 4, "a", "in_batch_synthetic", "dropped", "b1"), ("b1", 5, "a", "in_batch_synthetic", "dropped", "b1"),
               ("b2", 1, "a", "cross_batch_synthetic", "dropped", "b1")],
        cache=[("b1", "a", ev("a", price=12.5))],
    ),
    # Across batches by the event's own order (an ordered store): an older version is stale, a
    # newer one or a tie updates the current one, a version without a value never follows one.
    "changelog, survivor=max:price across batches": Case(
        {"changelog": True, "survivor": "max:price"},
        [[P5, B1], [P3, P3], [P7, P5], [P7_TIE], [ev("a")]],
        output=[out("b1", P5), out("b1", B1), out("b3", P7, op="update", supersedes="b1"),
                out("b4", P7_TIE, op="update", supersedes="b3")],
        audit=[("b2", 1, "a", "stale_version", "dropped", "b1"), ("b2", 2, "a", "stale_version", "dropped", "b1"),
               ("b3", 2, "a", "cross_batch_natural", "dropped", "b1"),
               ("b5", 1, "a", "stale_version", "dropped", "b4")],
        cache=[("b1", "a", P5), ("b1", UUID_B, B1), ("b3", "a", P7), ("b4", "a", P7_TIE)],
    ),
    # Instants, whatever their spelling, and copies in other hours: 00:30-01:00 is 01:30Z, later
    # than 01:00Z (as text it sorts first); the epoch number 1795311000 is 01:30Z too (as a value,
    # a number, it would order before every string).
    "changelog, survivor=min:updated_at as instants, copies in other hours": Case(
        {"changelog": True, "survivor": "min:updated_at", "survivor_values": "instant"},
        [[U_0130], [U_0100], [U_EPOCH_0130]],
        output=[out("b1", U_0130), out("b2", U_0100, op="update", supersedes="b1")],
        audit=[("b3", 1, "a", "stale_version", "dropped", "b2")],
        cache=[("b1", "a", U_0130), ("b2", "a", U_0100)],
    ),
    "composite key, normalised, fingerprint fields": Case(
        {"key_fields": ["user_id", "insert_id"], "normalize": ["trim", "lower"], "fingerprint_fields": ["v"]},
        [[ev(None, user_id="U1", insert_id="7", v=1), ev(None, user_id=" u1", insert_id=7, v=1),
          ev(None, user_id="u2", insert_id=7, v=1)],
         [ev(None, user_id="u1", insert_id="7", v=1), ev(None, user_id="u2", insert_id="7", v=2)]],
        output=[out("b1", ev(None, user_id="U1", insert_id="7", v=1), '["u1","7"]'),
                out("b1", ev(None, user_id="u2", insert_id=7, v=1), '["u2","7"]'),
                out("b2", ev(None, user_id="u2", insert_id="7", v=2), expected_renamed_id('["u2","7"]', {"v": 2}),
                    original='["u2","7"]')],
        audit=[("b1", 2, '["u1","7"]', "in_batch_natural", "dropped", "b1"),
               ("b2", 1, '["u1","7"]', "cross_batch_natural", "dropped", "b1"),
               ("b2", 2, '["u2","7"]', "cross_batch_synthetic", "renamed", "b1")],
        cache=[("b1", '["u1","7"]', {"v": 1}), ("b1", '["u2","7"]', {"v": 1}), ("b2", '["u2","7"]', {"v": 2})],
        fingerprint_of=lambda event: {"v": event["v"]},
    ),
}


@pytest.fixture
def run_case(s3_server, bucket, spark):  # type: ignore[no-untyped-def]
    def run(case: Case) -> tuple[S3Store, Config]:
        config = make_config(s3_server.endpoint_url, bucket, dedup=case.settings)
        store = S3Store(s3_server.client(), bucket)
        for index, events in enumerate(case.batches, start=1):
            put_lines(store, f"landing/b{index}/x.jsonl", [orjson.dumps(e) for e in events])
            run_batch(store, config, f"b{index}", InputSelector(input_prefix=f"landing/b{index}/"), NOW, lambda: spark)
        return store, config
    return run


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_policy_gives_exactly_the_documented_output_audit_and_cache(run_case, spark, case: Case) -> None:
    store, config = run_case(case)

    data = committed_rows(store, config, "data")
    assert sorted(((r["batch_id"], r["event_id"], r["original_event_id"], r["duplicate_of"], r["op"],
                    r["supersedes_batch"], r["raw"]) for r in data), key=repr) == sorted(
        ((*row[:6], raw(row[6])) for row in case.output), key=repr)

    audit = committed_rows(store, config, "audit")
    assert sorted((r["batch_id"], r["line_number"], r["event_id"], r["reason"], r["action"], r["kept_in_batch"])
                  for r in audit) == sorted(case.audit)
    inputs = {(f"b{i}", line): raw(e) for i, events in enumerate(case.batches, 1) for line, e in enumerate(events, 1)}
    assert all(r["raw"] == inputs[(r["batch_id"], r["line_number"])] for r in audit)

    assert committed_cache_entries(store, config) == sorted(
        (owner, expected_key(key), expected_fingerprint(case.fingerprint_of(event))) for owner, key, event in case.cache)

    # What each commit records it decided against (retract refuses on it): the audited rows kept
    # in another batch, and the updates of another batch's version.
    depended: dict[str, Counter[str]] = {f"b{i}": Counter() for i in range(1, len(case.batches) + 1)}
    for batch, _, _, _, _, holder in case.audit:
        if holder != batch:
            depended[batch][holder] += 1
    for batch, *_, op, supersedes, _ in case.output:
        if op == "update" and supersedes != batch:
            depended[batch][supersedes] += 1
    layout = Layout(config.layout)
    records = [read_commit(store, layout, v) for v in range(1, load_committed_state(store, layout).version + 1)]
    recorded = {record.batch_id: record.batch_change.decided_against for record in records
                if record is not None and record.batch_change is not None}
    assert recorded == {batch: dict(counts) for batch, counts in depended.items()}

    # Every policy is rerun-safe: recomputing each committed batch reproduces it byte for byte.
    for index in range(1, len(case.batches) + 1):
        assert verify_rerun(store, config, f"b{index}", spark) == []


def test_changing_what_the_cache_means_is_refused_naming_the_settings(run_case, s3_server, bucket, spark) -> None:
    store, _ = run_case(Case({}, [[A1]], [], [], []))
    changed = make_config(s3_server.endpoint_url, bucket, dedup={"fingerprint_exclude": ["v"], "synthetic": "drop"})
    put_lines(store, "landing/b2/x.jsonl", [orjson.dumps(A2)])
    with pytest.raises(ConfigError, match=r"fingerprint_exclude: recorded .*\[\].*configured .*\['v'\]"):
        run_batch(store, changed, "b2", InputSelector(input_prefix="landing/b2/"), NOW, lambda: spark)
    # The synthetic policy alone may change between batches: it does not change what entries mean.
    policy_only = make_config(s3_server.endpoint_url, bucket, dedup={"synthetic": "drop"})
    run_batch(store, policy_only, "b2", InputSelector(input_prefix="landing/b2/"), NOW, lambda: spark)
    assert [r["event_id"] for r in committed_rows(store, policy_only, "data")] == ["a"]


def test_an_ordered_store_without_changelog_audits_whether_each_version_would_have_superseded(
        run_case, spark) -> None:
    """b2's 3 is older than b1's kept 5, its 7 newer: both are renamed as before; the audit says
    which a changelog would have emitted as an update of the kept version."""
    store, config = run_case(Case({"survivor": "max:price", "synthetic": "rename"}, [[P5], [P3, P7]], [], [], []))
    assert sorted((r["batch_id"], r["line_number"], r["reason"], r["action"], r["would_supersede"])
                  for r in committed_rows(store, config, "audit")) == [
        ("b2", 1, "cross_batch_synthetic", "renamed", False), ("b2", 2, "cross_batch_synthetic", "renamed", True)]
    assert verify_rerun(store, config, "b2", spark) == []


def test_a_retracted_version_leaves_the_previous_one_current(run_case, s3_server, bucket, spark) -> None:
    """b2's 7 updated b1's 5 and is retracted: 6 then updates b1's 5 (against b2's 7 it would be
    stale), and 4 is stale against b3's 6; reruns reproduce both."""
    settings = {"changelog": True, "survivor": "max:price"}
    store, config = run_case(Case(settings, [[P5], [P7]], [], [], []))
    retract_batch(store, config, "b2", "a producer replayed a bad price", NOW)
    for number, event in ((3, ev("a", price=6)), (4, ev("a", price=4, note="late"))):
        put_lines(store, f"landing/b{number}/x.jsonl", [orjson.dumps(event)])
        run_batch(store, config, f"b{number}", InputSelector(input_prefix=f"landing/b{number}/"), NOW, lambda: spark)
    data = committed_rows(store, config, "data")
    assert sorted((r["batch_id"], r["op"], r["supersedes_batch"], r["raw"]) for r in data) == [
        ("b1", "insert", None, raw(P5)), ("b3", "update", "b1", raw(ev("a", price=6)))]
    assert sorted((r["batch_id"], r["reason"], r["kept_in_batch"]) for r in committed_rows(store, config, "audit")) == [
        ("b4", "stale_version", "b3")]
    assert verify_rerun(store, config, "b3", spark) == [] and verify_rerun(store, config, "b4", spark) == []
