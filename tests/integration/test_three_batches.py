"""The engine's acceptance: three batches on a real S3 server through real Spark, exact rows."""
from __future__ import annotations

from dataclasses import replace

import orjson
import pytest

from eventdedup.config import Config
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.pipeline import run_batch, verify_rerun
from eventdedup.promotion.promote import promote_batch
from eventdedup.s3store import S3Store

from ..support.helpers import NOW, bucket_listing, commit_counts, committed_rows, expected_renamed_id, put_lines


def ev(event_id: str, at: str, **payload: object) -> bytes:
    return orjson.dumps({"event_id": event_id, "created_at": f"2026-11-22T{at}:00Z", **payload})


E1 = ev("e1", "03:10", text="héllo wörld")
E2 = ev("e2", "03:20", n=1)
E2_OTHER = ev("e2", "03:20", n=2)  # same id, different payload
E3 = ev("e3", "04:05", city="東京")
E4 = ev("e4", "04:30", mood="🙂")
E5 = ev("e5", "03:59")
E6 = ev("e6", "04:40", v=1)
E6_OTHER = ev("e6", "04:40", v=2)
E7 = ev("e7", "05:00")
E8 = ev("e8", "05:10")
E9 = ev("e9", "05:30")
BROKEN = b'{"event_id": "e99", "created_at": '
BOOL_ID = b'{"event_id": true, "created_at": "2026-11-22T03:00:00Z"}'
NAIVE_TIME = b'{"event_id": "e10", "created_at": "2026-11-22T05:00:00"}'

BATCHES = {
    "b1": {"b1/a.jsonl": ([E1, E2, E1, BROKEN, E3, E2_OTHER], False), "b1/b.jsonl.gz": ([E4, E5, E3, BOOL_ID], True)},
    "b2": {"b2/c.jsonl": ([E6, E4, E7, b"", E8], False)},
    # e1 comes back two batches later; e2's original sits in hour 03 while this batch is at hour 05.
    "b3": {"b3/d.jsonl": ([E1, ev("e5", "03:59"), E9, E2, E6_OTHER, NAIVE_TIME, E9], False)},
}


def load_and_run(store: S3Store, config: Config, spark, batch_ids=("b1", "b2", "b3")) -> None:  # type: ignore[no-untyped-def]
    for batch_id in batch_ids:
        for rel, (lines, gz) in BATCHES[batch_id].items():
            put_lines(store, f"landing/{rel}", lines, gz=gz)
        run_batch(store, config, batch_id, InputSelector(input_prefix=f"landing/{batch_id}/"), NOW, lambda: spark)


def test_three_batches_commit_exactly_one_row_per_id_with_the_first_raw(store, config, spark) -> None:
    load_and_run(store, config, spark)

    data = committed_rows(store, config, "data")
    # Default synthetic policy (rename): a same-id, different-payload copy is output under a
    # derived id, with the id it came with in original_event_id.
    e2_renamed, e6_renamed = expected_renamed_id("e2", E2_OTHER), expected_renamed_id("e6", E6_OTHER)
    assert sorted((r["event_id"], r["original_event_id"], r["op"], r["batch_id"], r["raw"]) for r in data) == sorted([
        ("e1", None, "insert", "b1", E1.decode()), ("e2", None, "insert", "b1", E2.decode()),
        (e2_renamed, "e2", "insert", "b1", E2_OTHER.decode()),
        ("e3", None, "insert", "b1", E3.decode()),
        ("e4", None, "insert", "b1", E4.decode()), ("e5", None, "insert", "b1", E5.decode()),
        ("e6", None, "insert", "b2", E6.decode()),
        ("e7", None, "insert", "b2", E7.decode()), ("e8", None, "insert", "b2", E8.decode()),
        ("e9", None, "insert", "b3", E9.decode()), (e6_renamed, "e6", "insert", "b3", E6_OTHER.decode()),
    ])
    assert {(r["duplicate_of"], r["supersedes_batch"]) for r in data} == {(None, None)}
    assert {r["event_id"]: r["event_time"].isoformat() for r in data}["e3"] == "2026-11-22T04:05:00+00:00"

    audit = committed_rows(store, config, "audit")
    assert sorted((r["batch_id"], r["source_object"], r["line_number"], r["event_id"], r["reason"], r["action"],
                   r["kept_in_batch"], r["raw"]) for r in audit) == sorted([
        ("b1", "landing/b1/a.jsonl", 3, "e1", "in_batch_natural", "dropped", "b1", E1.decode()),
        ("b1", "landing/b1/a.jsonl", 6, "e2", "in_batch_synthetic", "renamed", "b1", E2_OTHER.decode()),
        ("b1", "landing/b1/b.jsonl.gz", 3, "e3", "in_batch_natural", "dropped", "b1", E3.decode()),
        ("b2", "landing/b2/c.jsonl", 2, "e4", "cross_batch_natural", "dropped", "b1", E4.decode()),
        ("b3", "landing/b3/d.jsonl", 1, "e1", "cross_batch_natural", "dropped", "b1", E1.decode()),
        ("b3", "landing/b3/d.jsonl", 2, "e5", "cross_batch_natural", "dropped", "b1", E5.decode()),
        ("b3", "landing/b3/d.jsonl", 4, "e2", "cross_batch_natural", "dropped", "b1", E2.decode()),
        ("b3", "landing/b3/d.jsonl", 5, "e6", "cross_batch_synthetic", "renamed", "b2", E6_OTHER.decode()),
        ("b3", "landing/b3/d.jsonl", 7, "e9", "in_batch_natural", "dropped", "b3", E9.decode()),
    ])

    quarantine = committed_rows(store, config, "quarantine")
    assert sorted((r["batch_id"], r["source_object"], r["line_number"], r["raw"]) for r in quarantine) == sorted([
        ("b1", "landing/b1/a.jsonl", 4, BROKEN), ("b1", "landing/b1/b.jsonl.gz", 4, BOOL_ID),
        ("b2", "landing/b2/c.jsonl", 4, b""), ("b3", "landing/b3/d.jsonl", 6, NAIVE_TIME),
    ])
    errors = {(r["source_object"].split("/")[-1], r["line_number"]): r["error"] for r in quarantine}
    assert errors[("a.jsonl", 4)].startswith("malformed JSON")
    assert errors[("b.jsonl.gz", 4)] == "event_id is a boolean, not an id"
    assert errors[("c.jsonl", 4)] == "blank line"
    assert "has no UTC offset" in errors[("d.jsonl", 6)]

    base: dict[str, int] = {}
    counts = commit_counts(store, config)
    for batch_id, expected in {
        "b1": dict(input_lines=10, malformed=2, in_batch_duplicates=2, cross_batch_duplicates=0, output_rows=6,
                   cache_keys_written=6, in_batch_natural=2, in_batch_synthetic=1, renamed=1),
        "b2": dict(input_lines=5, malformed=1, in_batch_duplicates=0, cross_batch_duplicates=1, output_rows=3,
                   cache_keys_written=3, cross_batch_natural=1),
        "b3": dict(input_lines=7, malformed=1, in_batch_duplicates=1, cross_batch_duplicates=3, output_rows=2,
                   cache_keys_written=2, in_batch_natural=1, cross_batch_natural=3, cross_batch_synthetic=1, renamed=1),
    }.items():
        want = {**{k: 0 for k in counts[batch_id]}, **base, **expected}
        assert counts[batch_id] == want, batch_id


def test_output_files_live_in_hive_folders_and_the_load_manifest_lists_them(store, config, spark) -> None:
    load_and_run(store, config, spark, ("b1",))
    keys = sorted(k for k in bucket_listing(store) if k.startswith("deduped/") and "/_delta_log/" not in k)
    assert {k.rsplit("/", 1)[0] for k in keys} == {"deduped/date=2026-11-22/hour=03", "deduped/date=2026-11-22/hour=04"}
    # Beside them, the Delta table's log: its table version 0 created before the store's first commit, 1 projecting it.
    assert sorted(k for k in bucket_listing(store) if "/_delta_log/" in k) == [
        f"deduped/_delta_log/{version:020d}.json" for version in (0, 1)]
    assert all(k.rsplit("/", 1)[1].startswith("b1-part-") for k in keys)
    manifest = orjson.loads(store.get_bytes(Layout(config.layout).redshift_manifest("b1")))
    assert sorted(e["url"] for e in manifest["entries"]) == [f"s3://{config.s3.bucket}/{k}" for k in keys]
    assert all(e["mandatory"] for e in manifest["entries"])


def test_rerun_of_a_committed_batch_changes_nothing_and_drops_nothing(store, config, spark) -> None:
    load_and_run(store, config, spark)
    before = bucket_listing(store)
    outcome = run_batch(store, config, "b2", InputSelector(input_prefix="landing/b2/"), NOW, lambda: spark)
    assert (outcome.version, outcome.newly_committed) == (2, False)
    assert bucket_listing(store) == before
    # Recomputing from scratch must reproduce every committed object byte for byte: the rerun
    # does not see its own claims, nor those of b3 committed after it.
    for batch_id in ("b1", "b2", "b3"):
        assert verify_rerun(store, config, batch_id, spark) == []
    assert bucket_listing(store) == before


def test_rerun_after_a_crashed_job_reproduces_the_same_job_result(store, config, spark) -> None:
    from eventdedup.inputs.manifest import freeze_batch_inputs
    from eventdedup.job.driver import run_dedup_job

    for rel, (lines, gz) in BATCHES["b1"].items():
        put_lines(store, f"landing/{rel}", lines, gz=gz)
    layout = Layout(config.layout)
    freeze_batch_inputs(store, config, "b1", InputSelector(input_prefix="landing/b1/"), NOW)
    first = run_dedup_job(spark, config, "b1")
    first_bytes = store.get_bytes(layout.job_result("b1"))
    # A crash half-way leaves some staged objects, a stray one and no job result.
    staged = [k for k in bucket_listing(store) if k.startswith(layout.staging_root("b1"))]
    store.delete_keys([k for k in staged[::2]] + [layout.job_result("b1")])
    store.put_bytes(layout.staging_root("b1") + "data/date=2026-11-22/hour=03/part-09999.parquet", b"junk")
    second = run_dedup_job(spark, config, "b1")
    # The same result but for where it was staged: each attempt stages under its own root
    # (eventdedup.layout.Layout.attempt_root); what is promoted (final keys, bytes, counts) is equal.
    assert replace(second, objects=()) == replace(first, objects=())
    assert [(o.kind, o.final_key, o.staged.size, o.staged.etag, o.rows, o.cache_key) for o in second.objects] == [
        (o.kind, o.final_key, o.staged.size, o.staged.etag, o.rows, o.cache_key) for o in first.objects]
    assert first_bytes != store.get_bytes(layout.job_result("b1"))  # it names the second attempt's objects
    roots = {o.staged.key.split("/attempt-", 1)[1].split("/", 1)[0] for o in second.objects}
    assert len(roots) == 1
    for obj in second.objects:  # every object it names is there, as staged
        head = store.head(obj.staged.key)
        assert head is not None and (head.size, head.etag) == (obj.staged.size, obj.staged.etag)
    promote_batch(store, config, "b1")
    assert [k for k in bucket_listing(store) if k.startswith(layout.staging_root("b1"))] == []  # junk too


def test_a_batch_computed_before_another_commit_must_be_recomputed(store, config, spark) -> None:
    from eventdedup.errors import StaleBatchError
    from eventdedup.inputs.manifest import freeze_batch_inputs
    from eventdedup.job.driver import run_dedup_job
    from eventdedup.promotion.promote import promote_batch

    put_lines(store, "landing/x/1.jsonl", [E1, E2])
    put_lines(store, "landing/y/1.jsonl", [E1, E3])
    freeze_batch_inputs(store, config, "x", InputSelector(input_prefix="landing/x/"), NOW)
    freeze_batch_inputs(store, config, "y", InputSelector(input_prefix="landing/y/"), NOW)
    run_dedup_job(spark, config, "x")
    run_dedup_job(spark, config, "y")  # computed without x's ids
    promote_batch(store, config, "y")
    with pytest.raises(StaleBatchError, match="computed against log version 0, but the log is at version 1"):
        promote_batch(store, config, "x")
    run_dedup_job(spark, config, "x")
    promote_batch(store, config, "x")
    assert sorted((r["event_id"], r["batch_id"]) for r in committed_rows(store, config, "data")) == [
        ("e1", "y"), ("e2", "x"), ("e3", "y")]
