"""Cold start (`eventdedup populate`): an existing dataset committed to the cache, emitting nothing.

Expected rows and cache entries are computed here from the documented rules: a key is BLAKE2b-16
of the id (none of these ids is a UUID), a fingerprint XXH3-64 of the event as canonical JSON (a
new store's hash).
"""
from __future__ import annotations

import hashlib
import io
from datetime import datetime, timedelta, timezone

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from eventdedup.commit.log import read_commit
from eventdedup.delta.projection import APP_ID
from eventdedup.delta.storage import storage_options, table_location
from eventdedup.errors import InvalidNameError
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.pipeline import run_batch, verify_rerun
from eventdedup.ops.populate import plan_populate, populate_selector, run_populate
from eventdedup.ops.retract import retract_batch
from eventdedup.s3store import S3Store
from eventdedup.tables import OUTPUT_SCHEMA

from ..support.helpers import (
    NOW,
    bucket_listing,
    committed_cache_entries,
    committed_rows,
    expected_fingerprint,
    make_config,
    put_lines,
)

DAYS = 3
EVENTS_PER_HOUR = 20


def _event(index: int, at: datetime) -> bytes:
    return orjson.dumps({"event_id": f"old-{index}", "created_at": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                         "n": index})


def _three_days() -> dict[tuple[str, str], list[bytes]]:
    """Events of the 3 days before NOW, by (date, hour) of their time, as deduped/ holds them."""
    start = NOW - timedelta(days=DAYS)
    by_hour: dict[tuple[str, str], list[bytes]] = {}
    index = 0
    for hour in range(DAYS * 24):
        at = start + timedelta(hours=hour)
        for minute in range(EVENTS_PER_HOUR):
            by_hour.setdefault((at.strftime("%Y-%m-%d"), at.strftime("%H")), []).append(
                _event(index, at + timedelta(minutes=minute)))
            index += 1
    return by_hour


def _output_parquet(lines: list[bytes], batch_id: str) -> bytes:
    """An output file as eventdedup writes them (OUTPUT_SCHEMA): what another store's deduped/ holds."""
    docs = [orjson.loads(line) for line in lines]
    table = pa.table({
        "event_id": [doc["event_id"] for doc in docs], "original_event_id": [None] * len(docs),
        "duplicate_of": [None] * len(docs), "op": ["insert"] * len(docs), "supersedes_batch": [None] * len(docs),
        "event_time": [datetime.fromisoformat(doc["created_at"]) for doc in docs],
        "batch_id": [batch_id] * len(docs), "raw": [line.decode() for line in lines],
    }, schema=OUTPUT_SCHEMA)
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _key(event_id: str) -> bytes:
    return hashlib.blake2b(event_id.encode(), digest_size=16).digest()


@pytest.fixture
def dataset(store: S3Store) -> list[bytes]:
    """A 3-day dataset of an earlier pipeline's output, moved over beside this store's own
    (`previous/deduped/`): no commit of this store names it. (Under this store's own output prefix,
    populate reads only what this store committed: test_populate_of_the_output_reads_the_committed_view.)"""
    lines: list[bytes] = []
    for (day, hour), hour_lines in sorted(_three_days().items()):
        store.put_bytes(f"previous/deduped/date={day}/hour={hour}/legacy-part-00000.parquet",
                        _output_parquet(hour_lines, "legacy"))
        lines += hour_lines
    return lines


def test_populate_from_deduped_then_a_resend_of_1000_emits_none_of_them(store, config, spark, dataset) -> None:
    outcome = run_populate(store, config, "previous/deduped/", NOW, lambda: spark)
    assert outcome.newly_committed and outcome.batch_id.startswith("populate-")
    assert outcome.counts["populated"] == len(dataset) == DAYS * 24 * EVENTS_PER_HOUR
    assert outcome.counts["output_rows"] == 0 and outcome.counts["input_lines"] == len(dataset)
    layout = Layout(config.layout)
    record = read_commit(store, layout, outcome.version)
    assert record is not None and {obj.kind for obj in record.objects} == {"cache"}
    assert orjson.loads(store.get_bytes(layout.redshift_manifest(outcome.batch_id))) == {"entries": []}
    assert committed_rows(store, config, "data") == [] and committed_rows(store, config, "audit") == []
    # The Delta table: populate adds no file; its one Delta commit only names it.
    table = DeltaTable(table_location(store, config), storage_options=storage_options(store, config.s3))
    assert table.count() == 0 and table.transaction_version(APP_ID) == outcome.version
    assert table.history(1)[0]["eventdedup.batch_id"] == outcome.batch_id
    expected_entries = sorted((outcome.batch_id, _key(orjson.loads(line)["event_id"]), expected_fingerprint(line))
                              for line in dataset)
    assert committed_cache_entries(store, config) == expected_entries

    # Populate again: the same dataset is the same, committed batch; nothing changes.
    before = bucket_listing(store)
    again = run_populate(store, config, "previous/deduped/", NOW, lambda: spark)
    assert (again.batch_id, again.version, again.newly_committed) == (outcome.batch_id, outcome.version, False)
    assert bucket_listing(store) == before

    # A batch re-sending 1,000 of those events (their original lines) and 30 new ones.
    resent = dataset[::2][:1000]
    new = [orjson.dumps({"event_id": f"new-{i}", "created_at": "2026-11-22T05:30:00Z"}) for i in range(30)]
    lines = [line for pair in zip(resent[:30], new, strict=True) for line in pair] + resent[30:]
    put_lines(store, "landing/resend/1.jsonl", lines)
    run_batch(store, config, "resend", InputSelector(input_prefix="landing/resend/"), NOW, lambda: spark)
    data = committed_rows(store, config, "data")
    assert sorted((row["event_id"], row["raw"]) for row in data) == sorted(
        (orjson.loads(line)["event_id"], line.decode()) for line in new)
    table = DeltaTable(table_location(store, config), storage_options=storage_options(store, config.s3))
    assert sorted(table.to_pyarrow_table(columns=["event_id"]).column(0).to_pylist()) == sorted(
        orjson.loads(line)["event_id"] for line in new)
    audit = committed_rows(store, config, "audit")
    assert sorted((row["event_id"], row["reason"], row["action"], row["kept_in_batch"]) for row in audit) == sorted(
        (orjson.loads(line)["event_id"], "cross_batch_natural", "dropped", outcome.batch_id) for line in resent)
    assert verify_rerun(store, config, outcome.batch_id, spark) == []


def test_populate_id_follows_the_dataset_and_a_grown_dataset_takes_only_its_new_objects(
        store, config, spark, dataset) -> None:
    first = run_populate(store, config, "previous/deduped/", NOW, lambda: spark)
    assert first.batch_id == plan_populate(store, config, "previous/deduped/").batch_id
    extra = [_event(10_000 + i, NOW - timedelta(hours=1)) for i in range(5)]
    store.put_bytes("previous/deduped/date=2026-11-22/hour=05/legacy-part-00001.parquet",
                    _output_parquet(extra, "legacy"))
    grown = run_populate(store, config, "previous/deduped/", NOW, lambda: spark)
    assert grown.batch_id != first.batch_id and grown.newly_committed
    assert grown.counts["populated"] == 5 and grown.counts["inputs_already_consumed"] == DAYS * 24
    assert grown.counts["input_lines"] == 5


def test_populate_from_a_plain_table_and_json_lines_quarantines_what_it_cannot_read(
        s3_server, bucket, spark) -> None:
    # Not eventdedup's output: rows become JSON objects; the fingerprint covers `user`, which
    # survives the round trip (the time's spelling does not), so a resend matches exactly.
    config = make_config(s3_server.endpoint_url, bucket, dedup={"fingerprint_fields": ["user"]})
    store = S3Store(s3_server.client(), bucket)
    times = [datetime(2026, 11, 20, hour, 5, tzinfo=timezone.utc) for hour in range(6)]
    table = pa.table({"event_id": ["t0", "t1", None, "t3", "t4", "t5"], "created_at": times,
                      "user": [f"u{i}" for i in range(6)], "amount": pa.array([1, 2, 3, 4, 5, 6], pa.decimal128(5, 2))})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    store.put_bytes("legacy/table/part-0.parquet", sink.getvalue())
    store.put_bytes("legacy/table/part-1.parquet", b"PAR1 this is not parquet")
    put_lines(store, "legacy/table/extra.jsonl",
              [b'{"event_id":"j0","created_at":"2026-11-21T01:00:00Z","user":"v0"}', b"{not json"], gz=True)
    outcome = run_populate(store, config, "legacy/table/", NOW, lambda: spark)
    assert outcome.counts["populated"] == 6  # t0, t1, t3, t4, t5, j0
    quarantine = committed_rows(store, config, "quarantine")
    reasons = {(row["source_object"], row["line_number"]): row["error"] for row in quarantine}
    assert set(reasons) == {("legacy/table/part-0.parquet", 3), ("legacy/table/part-1.parquet", 0),
                            ("legacy/table/extra.jsonl", 2)}
    assert "not a readable Parquet file" in reasons[("legacy/table/part-1.parquet", 0)]
    resend = [orjson.dumps({"event_id": f"t{i}", "created_at": times[i].strftime("%Y-%m-%dT%H:%M:%SZ"),
                            "user": f"u{i}"}) for i in (0, 1, 3)]
    put_lines(store, "landing/r/1.jsonl", [*resend, b'{"event_id":"j0","created_at":"2026-11-21T01:00:00Z",'
                                           b'"user":"v0"}', b'{"event_id":"t2","created_at":"2026-11-20T02:05:00Z"}'])
    run_batch(store, config, "r", InputSelector(input_prefix="landing/r/"), NOW, lambda: spark)
    assert [row["event_id"] for row in committed_rows(store, config, "data")] == ["t2"]
    assert sorted(row["event_id"] for row in committed_rows(store, config, "audit")) == ["j0", "t0", "t1", "t3"]


def test_populate_may_read_the_output_prefix_but_nothing_else_of_ours(config) -> None:
    layout = Layout(config.layout)
    assert populate_selector(layout, "deduped/date=2026-11-21/").input_prefix == "deduped/date=2026-11-21/"
    for prefix in ("_eventdedup/cache/", "audit/", "quarantine/", "_eventdedup/"):
        with pytest.raises(InvalidNameError):
            populate_selector(layout, prefix)
        with pytest.raises(InvalidNameError):  # before any S3 request: the store is not even used
            plan_populate(None, config, prefix)  # type: ignore[arg-type]
    with pytest.raises(InvalidNameError):  # an ordinary batch still may not read our output
        run_batch(None, config, "x", InputSelector(input_prefix="deduped/"), NOW, lambda: None)  # type: ignore[arg-type]


def test_populate_of_the_output_reads_the_committed_view_not_a_listing(store, config, spark) -> None:
    """Issue 38, item 7: populate of deduped/ listed the prefix, so a retracted batch's files (which
    stay in place: their commit names them) became "seen", and the retracted input processed again
    under a new id came out as duplicates of itself (0 of 100 emitted, through the CLI). Populate
    of our own output reads the committed view: X's files are not read, Y's are."""
    x_lines = [orjson.dumps({"event_id": f"x{i}", "created_at": "2026-11-22T05:10:00Z"}) for i in range(6)]
    y_lines = [orjson.dumps({"event_id": f"y{i}", "created_at": "2026-11-22T04:10:00Z"}) for i in range(4)]
    put_lines(store, "landing/x/1.jsonl", x_lines)
    put_lines(store, "landing/y/1.jsonl", y_lines)
    run_batch(store, config, "x", InputSelector(input_prefix="landing/x/"), NOW, lambda: spark)
    run_batch(store, config, "y", InputSelector(input_prefix="landing/y/"), NOW, lambda: spark)
    retract_batch(store, config, "x", "bad input", NOW)
    populated = run_populate(store, config, "deduped/", NOW, lambda: spark)
    # y's 4 events were committed by y: the populate finds them as cross-batch duplicates; x's
    # files (retracted) are not part of the dataset.
    assert (populated.counts["input_lines"], populated.counts["cross_batch_duplicates"]) == (4, 4)
    again = run_batch(store, config, "x-again", InputSelector(input_prefix="landing/x/", reprocess=True), NOW,
                      lambda: spark)
    assert again.counts["output_rows"] == 6
    assert sorted(row["event_id"] for row in committed_rows(store, config, "data") if row["batch_id"] == "x-again") == [
        f"x{i}" for i in range(6)]
