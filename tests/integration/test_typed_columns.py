"""Typed columns (issue 53): the declared columns of [table.columns] written beside the dedup columns
and `raw`, each value computed here from the event's JSON by the rules docs/delta-table.md states
("Typed columns"), never by the code under test; a mismatch null and counted, or quarantined with
its reason under on_mismatch = "quarantine"; the Delta table read with delta-rs and pyarrow, a filter
on a typed column skipping files by their statistics; the schema evolving between batches.
"""
from __future__ import annotations

import math
import re
import struct
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable

from eventdedup.commit.changes import BatchChange
from eventdedup.commit.log import load_committed_state, read_commit
from eventdedup.commit.view import committed_objects
from eventdedup.config import Config
from eventdedup.delta.projection import table_files
from eventdedup.delta.storage import storage_options, table_location
from eventdedup.errors import ColumnsRefusedError
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.pipeline import run_batch
from eventdedup.ops.status import batch_metrics, format_status, store_status
from eventdedup.report.build import build_report
from eventdedup.s3store import S3Store
from eventdedup.tables import OUTPUT_SCHEMA, parquet_to_table

from ..support.helpers import NOW, committed_rows, make_config, put_lines

COLUMNS: dict[str, Any] = {
    "user_id": "string",
    "amount": "decimal(18,2)",
    "client_time": "timestamp",
    "os": {"path": "context.device.os", "type": "string"},
    "tags": "array<string>",
    "geo": "struct<lat:double,lon:double>",
    "n": "long",
    "small": "int",
    "ratio": "double",
    "f": "float",
    "ok": "boolean",
    "day": "date",
    "attrs": "map<string,long>",
    "extra": "json",
}

# Each type as Arrow (and so Parquet and Delta) holds it.
ARROW_TYPES = {
    "user_id": pa.string(), "amount": pa.decimal128(18, 2), "client_time": pa.timestamp("us", tz="UTC"),
    "os": pa.string(), "tags": pa.list_(pa.string()), "geo": pa.struct([("lat", pa.float64()), ("lon", pa.float64())]),
    "n": pa.int64(), "small": pa.int32(), "ratio": pa.float64(), "f": pa.float32(), "ok": pa.bool_(),
    "day": pa.date32(), "attrs": pa.map_(pa.string(), pa.int64()), "extra": pa.string(),
}


def ev(event_id: str, hour: int, **fields: Any) -> bytes:
    return orjson.dumps({"event_id": event_id, "created_at": f"2026-11-22T0{hour}:10:00Z", **fields})


# Every value fits: hour 3's users are "u3...", hour 4's "u4..." (a filter on user_id skips a file).
GOOD = [
    ev("g1", 3, user_id="u3-a", amount=12.5, client_time="2026-11-22T03:04:05.123456+01:00",
       context={"device": {"os": "ios"}}, tags=["x", None, "y"], geo={"lat": 48.1, "lon": 11, "alt": 3},
       n=-(2**63), small=2**31 - 1, ratio=7, f=0.1, ok=True, day="2024-02-29", attrs={"a": 1, "b": None},
       extra={"z": [1, {"q": None}], "a": "é"}),
    ev("g2", 3, user_id="u3-b", amount="-12.30", client_time=1764000000123, context={"device": {}},
       tags=[], geo={"lat": None}, n=2**63 - 1, small=-(2**31), ratio=1e308, f=3.4028234663852886e38, ok=False,
       day="0001-01-01", attrs={}, extra="text"),
    ev("g3", 4, user_id="u4-a", amount=7, client_time="1764000000", context=None, geo={}, ratio=-0.0,
       extra=None, attrs={"k": -5}),
    ev("g4", 4, user_id="u4-b", amount=1e15, client_time=1764000000.5, extra=12.75),
    ev("g5", 4, user_id="u4-c", amount="9999999999999999.99", client_time="2026-11-22T04:00:00Z", extra=[]),
    ev("g6", 4),  # every field missing: every column null, nothing mismatched
]
# Each line holds a value of each column that does not fit it.
MISFITS = [
    ev("m1", 3, user_id=5, amount="12.345", client_time="yesterday", context={"device": "phone"}, tags=["a", 1],
       geo={"lat": "x"}, n=5.0, small=2**31, ratio="1.5", f=1e39, ok="true", day="2026-02-30", attrs={"k": "v"}),
    ev("m2", 4, user_id=["u"], amount=12345678901234567, client_time="2026-11-22T04:00:00", context="ios",
       tags="a", geo=[1, 2], n="5", small=1.5, ratio=True, f="1", ok=1, day=20261122, attrs=[1]),
    ev("m3", 4, user_id={"id": 1}, amount="1e3", client_time=True, context={"device": {"os": 10}}, tags=[[]],
       geo={"lat": 1, "lon": "E"}, n=2**64 - 1, small=-(2**31) - 1, ratio=[1], ok=None, day="2026-1-02",
       attrs={"k": 1.5}),
    ev("m4", 4, amount=0.001, client_time="10000-01-01T00:00:00Z", day="20261122", f=-1e300),
    # A JSON number is read as binary64 first: 9999999999999999.99 is 1e16, beyond decimal(18,2).
    ev("m5", 4, amount=9999999999999999.99, client_time=-62135596800000001),
]


# --- The documented rules, written out again -----------------------------------------------------

class Misfit(Exception):
    pass


def as_string(value: Any) -> str:
    if not isinstance(value, str):
        raise Misfit
    return value


def as_integer(bits: int) -> Any:
    def convert(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            raise Misfit
        return value
    return convert


def as_double(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Misfit
    return float(value)


def as_float(value: Any) -> float:
    number = as_double(value)
    if abs(number) > 3.4028234663852886e38:  # beyond binary32's largest finite value
        raise Misfit
    return float(struct.unpack("f", struct.pack("f", number))[0])


def as_boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Misfit
    return value


def as_timestamp(value: Any) -> datetime:
    """As the time field is read: ISO-8601 with an offset, else epoch seconds (milliseconds from 1e11),
    as a number or a string of digits; within the years 1 to 9999."""
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise Misfit
    if isinstance(value, str) and not re.fullmatch(r"-?[0-9]+", value.strip()):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise Misfit from None
        if moment.tzinfo is None:
            raise Misfit
        return moment.astimezone(timezone.utc)
    number = float(value) if isinstance(value, float) else int(value)
    micros = round(number * 1000) if abs(number) >= 1e11 else round(number * 1_000_000)
    try:
        return epoch + timedelta(microseconds=micros)
    except OverflowError:
        raise Misfit from None


def as_date(value: Any) -> date:
    if not isinstance(value, str) or not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
        raise Misfit
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise Misfit from None


def as_decimal(precision: int, scale: int) -> Any:
    def convert(value: Any) -> Decimal:
        if isinstance(value, str) and re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", value):
            number = Decimal(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            number = Decimal(repr(value))  # the JSON number's shortest spelling
        else:
            raise Misfit
        if -number.normalize().as_tuple().exponent > scale or abs(number) >= 10 ** (precision - scale):
            raise Misfit
        return number.quantize(Decimal(1).scaleb(-scale))
    return convert


def as_json(value: Any) -> str:
    return orjson.dumps(value).decode()


def as_array(element: Any) -> Any:
    def convert(value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise Misfit
        return [None if item is None else element(item) for item in value]
    return convert


def as_struct(**members: Any) -> Any:
    def convert(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise Misfit
        return {name: None if value.get(name) is None else member(value[name]) for name, member in members.items()}
    return convert


def as_map(member: Any) -> Any:
    def convert(value: Any) -> list[tuple[str, Any]]:
        if not isinstance(value, dict):
            raise Misfit
        return [(key, None if item is None else member(item)) for key, item in value.items()]
    return convert


# The converter of each type the tests declare, by its spelling.
CONVERTERS: dict[str, Any] = {
    "string": as_string, "long": as_integer(64), "int": as_integer(32), "double": as_double, "float": as_float,
    "boolean": as_boolean, "timestamp": as_timestamp, "date": as_date, "json": as_json,
    "decimal(18,2)": as_decimal(18, 2), "decimal(10,2)": as_decimal(10, 2), "decimal(12,3)": as_decimal(12, 3),
    "array<string>": as_array(as_string), "struct<lat:double,lon:double>": as_struct(lat=as_double, lon=as_double),
    "map<string,long>": as_map(as_integer(64)),
}


def expected_value(event: dict[str, Any], spec: Any, name: str) -> tuple[Any, bool]:
    """A column's value in an event and whether it mismatched: a missing key or a null on the way is
    null; a value on the way that is not an object is a mismatch."""
    path = (name,) if isinstance(spec, str) else tuple(spec["path"].split("."))
    convert = CONVERTERS[spec if isinstance(spec, str) else spec["type"]]
    value: Any = event
    for key in path:
        if not isinstance(value, dict):
            return None, True
        value = value.get(key)
        if value is None:
            return None, False
    try:
        return convert(value), False
    except Misfit:
        return None, True


def expected_rows(lines: list[bytes], columns: dict[str, Any] = COLUMNS) -> dict[str, dict[str, Any]]:
    return {orjson.loads(line)["event_id"]: {name: expected_value(orjson.loads(line), spec, name)[0]
                                             for name, spec in columns.items()} for line in lines}


def expected_figures(lines: list[bytes]) -> dict[str, dict[str, int]]:
    figures = {name: {"mismatched": 0, "nulls": 0} for name in COLUMNS}
    for line in lines:
        for name, spec in COLUMNS.items():
            value, misfit = expected_value(orjson.loads(line), spec, name)
            figures[name]["mismatched"] += misfit
            figures[name]["nulls"] += value is None
    return figures


# --- Running batches -----------------------------------------------------------------------------

def typed_config(config: Config, columns: dict[str, Any] = COLUMNS, **table: Any) -> Config:
    return make_config(config.s3.endpoint_url or "", config.s3.bucket, table={"columns": columns, **table})


def run(store: S3Store, config: Config, spark: Any, batch_id: str, lines: list[bytes]) -> None:
    put_lines(store, f"landing/{batch_id}/1.jsonl", lines)
    run_batch(store, config, batch_id, InputSelector(input_prefix=f"landing/{batch_id}/"), NOW, lambda: spark)


def open_delta(store: S3Store, config: Config, version: int | None = None) -> DeltaTable:
    return DeltaTable(table_location(store, config), version=version, storage_options=storage_options(store, config.s3))


def batch_change(store: S3Store, config: Config, batch_id: str) -> BatchChange:
    layout = Layout(config.layout)
    record = read_commit(store, layout, load_committed_state(store, layout).batches[batch_id])
    assert record is not None and isinstance(record.change, BatchChange)
    return record.change


def same(found: Any, expected: Any) -> bool:
    """Equal, a NaN-free float compared exactly, -0.0 told from 0.0."""
    if isinstance(expected, float):
        return isinstance(found, float) and found == expected and math.copysign(1, found) == math.copysign(1, expected)
    return bool(found == expected)


def test_every_declared_type_holds_its_value_by_the_documented_rules_and_a_mismatch_is_null_and_counted(
        store, config, spark) -> None:
    typed = typed_config(config)
    lines = GOOD + MISFITS
    run(store, typed, spark, "b1", lines)
    expected = expected_rows(lines)
    raws = {orjson.loads(line)["event_id"]: line.decode() for line in lines}

    rows = {row["event_id"]: row for row in committed_rows(store, typed, "data")}
    assert sorted(rows) == sorted(expected)
    for event_id, values in expected.items():
        assert rows[event_id]["raw"] == raws[event_id]  # raw byte for byte
        for name, value in values.items():
            assert same(rows[event_id][name], value), (event_id, name, rows[event_id][name], value)
    # The files: the output's own columns, then the declared ones in declared order, each of its type.
    files = list(committed_objects(store, Layout(typed.layout), "data"))
    written = parquet_to_table(store.get_bytes(files[0].key)).schema
    assert written.names == [*OUTPUT_SCHEMA.names, *COLUMNS]
    assert [written.field(name).type for name in COLUMNS] == [ARROW_TYPES[name] for name in COLUMNS]

    # The commit records the columns and, per column, its mismatched and null rows.
    change = batch_change(store, typed, "b1")
    assert [(c.name, c.data_type, c.path_text) for c in change.columns] == [
        (name, spec if isinstance(spec, str) else spec["type"], name if isinstance(spec, str) else spec["path"])
        for name, spec in COLUMNS.items()]
    assert change.column_figures is not None
    assert {name: {"mismatched": f.mismatched, "nulls": f.nulls} for name, f in change.column_figures.items()} == \
        expected_figures(lines)
    assert change.on_mismatch == "null"
    # status (each batch's figures, and each column's rates over them) and the metrics say the same.
    status = store_status(store, typed, NOW)
    assert [column["name"] for column in status["columns"]] == list(COLUMNS)
    assert status["batches"][-1]["columns"] == expected_figures(lines)
    figures, rows = expected_figures(lines)["amount"], len(lines)
    assert (f"amount decimal(18,2) (from amount): mismatched {figures['mismatched']} "
            f"({100 * figures['mismatched'] / rows:.1f}%), null {figures['nulls']} ({100 * figures['nulls'] / rows:.1f}%)"
            ) in format_status(status)
    report = build_report(store, typed, NOW, NOW, last=1)  # the report: a table of the columns and their rates
    assert [(c["name"], c["type"], c["output_rows"], c["mismatched"], c["nulls"]) for c in report.figures["columns"]] == [
        (name, spec if isinstance(spec, str) else spec["type"], rows, figures["mismatched"], figures["nulls"])
        for (name, spec), figures in zip(COLUMNS.items(), expected_figures(lines).values(), strict=True)]
    assert "<h2>Declared columns</h2>" in report.html
    counters = batch_metrics(store, typed, "b1")["counters"]
    assert {name: value for name, value in counters.items() if ".columns." in name} == {
        f"eventdedup.columns.{name}.{kind}": float(count)
        for name, counted in expected_figures(lines).items() for kind, count in counted.items()}

    # The Delta table: the same rows with their types, read by delta-rs and by a pyarrow dataset.
    table = open_delta(store, typed)
    schema = pa.schema(table.schema().to_arrow())
    assert schema.field("amount").type == pa.decimal128(18, 2)
    assert schema.field("client_time").type == pa.timestamp("us", tz="UTC")
    assert schema.field("geo").type == pa.struct([("lat", pa.float64()), ("lon", pa.float64())])
    read = {row["event_id"]: row for row in table.to_pyarrow_table().to_pylist()}
    for event_id, values in expected.items():
        for name, value in values.items():
            found = read[event_id][name]
            if name == "attrs" and found is not None:
                found = [tuple(pair) if not isinstance(pair, tuple) else pair for pair in found]
            assert same(found, value), (event_id, name, found, value)
    # A filter on a typed column: the files of hour 3 (users u3-...) are skipped by their statistics.
    dataset = table.to_pyarrow_dataset()
    wanted = ds.field("user_id") >= "u4"
    fragments = list(dataset.get_fragments(filter=wanted))
    assert 0 < len(fragments) < len(list(dataset.get_fragments()))
    assert all("hour=04" in fragment.path for fragment in fragments)
    found = dataset.to_table(filter=wanted, columns=["event_id"]).column(0).to_pylist()
    assert sorted(found) == sorted(i for i, v in expected.items() if v["user_id"] is not None and v["user_id"] >= "u4")
    small = dataset.to_table(filter=ds.field("amount") < Decimal("0"), columns=["event_id"]).column(0).to_pylist()
    assert small == ["g2"]


def test_under_on_mismatch_quarantine_each_mismatch_sends_its_line_to_the_quarantine_with_its_reason(
        store, config, spark) -> None:
    typed = typed_config(config, on_mismatch="quarantine")
    run(store, typed, spark, "b1", GOOD + MISFITS)
    rows = {row["event_id"]: row for row in committed_rows(store, typed, "data")}
    assert sorted(rows) == sorted(orjson.loads(line)["event_id"] for line in GOOD)
    quarantined = {orjson.loads(row["raw"])["event_id"]: row["error"]
                   for row in committed_rows(store, typed, "quarantine")}
    # The reason names the first column, in declared order, whose value does not fit.
    first_misfit = {}
    for line in MISFITS:
        event = orjson.loads(line)
        name = next(name for name, spec in COLUMNS.items() if expected_value(event, spec, name)[1])
        spec = COLUMNS[name]
        first_misfit[event["event_id"]] = f"column {name} ({spec if isinstance(spec, str) else spec['type']}): "
    assert sorted(quarantined) == sorted(first_misfit)
    for event_id, reason in quarantined.items():
        assert reason.startswith(first_misfit[event_id]), (event_id, reason)
    change = batch_change(store, typed, "b1")
    assert change.on_mismatch == "quarantine"
    assert all(f.mismatched == 0 for f in (change.column_figures or {}).values())
    assert read_commit(store, Layout(typed.layout), 1).counts["malformed"] == len(MISFITS)  # type: ignore[union-attr]


# --- The schema evolving as the configuration does -----------------------------------------------

LATER = [ev("h1", 5, user_id="u5-a", n=1, day="2026-11-22"), ev("h2", 5, user_id="u5-b", n=2**40, day="2026-11")]


def test_a_column_added_between_batches_joins_the_table_and_reruns_and_retractions_keep_their_own_columns(
        store, config, spark) -> None:
    first = typed_config(config, {"user_id": "string", "n": "int"})
    run(store, first, spark, "b1", GOOD)
    added = typed_config(config, {"user_id": "string", "n": "int", "day": "date"})
    run(store, added, spark, "b2", LATER)
    layout = Layout(added.layout)
    assert [c.name for c in load_committed_state(store, layout).columns] == ["user_id", "n", "day"]

    # The table gains `day` in a commit of its own; b1's files, written without it, read it as null.
    table = open_delta(store, added)
    assert pa.schema(table.schema().to_arrow()).names[-3:] == ["user_id", "n", "day"]
    rows = {row["event_id"]: row for row in table.to_pyarrow_table().to_pylist()}
    expected = {**expected_rows(GOOD, {"user_id": "string", "n": "int"}),
                **expected_rows(LATER, {"user_id": "string", "n": "int", "day": "date"})}
    assert {i: {name: rows[i][name] for name in ("user_id", "n", "day")} for i in rows} == {
        i: {"day": None, **values} for i, values in expected.items()}
    # Newest first: b2's commit follows the one adding `day`, b1's the one adding its columns.
    history = [(entry.get("eventdedup.operation"), entry.get("eventdedup.columns")) for entry in table.history()]
    assert history[:4] == [("batch", None), ("add_columns", ["day"]), ("batch", None), ("add_columns", ["user_id", "n"])]
    # A rerun of b1 writes the columns its commit recorded, whatever the configuration says since.
    from eventdedup.ops.pipeline import verify_rerun
    assert verify_rerun(store, added, "b1", spark) == []

    # A removal, a type change that is no widening, and (with the Delta table kept) a widening are
    # refused before the job reads anything, naming the column and the way out.
    refusals = [
        ({"user_id": "string", "day": "date"}, r"column n \(int\) is in the output's schema.*Declare it again"),
        ({"user_id": "long", "n": "int", "day": "date"}, r"column user_id is declared long.*may only widen"),
        ({"user_id": "string", "n": "long", "day": "date"}, r"column n would widen from int to long.*Delta table"),
    ]
    for number, (columns, message) in enumerate(refusals, start=3):
        with pytest.raises(ColumnsRefusedError, match=message):
            run(store, typed_config(config, columns), spark, f"b{number}", LATER)
    assert [c.name for c in load_committed_state(store, layout).columns] == ["user_id", "n", "day"]

    # A retraction takes b2's rows out of the table in one commit; the column stays.
    from eventdedup.ops.retract import retract_batch
    retract_batch(store, added, "b2", "test", NOW)
    table = open_delta(store, added)
    assert sorted(table.to_pyarrow_table(columns=["event_id"]).column(0).to_pylist()) == sorted(
        expected_rows(GOOD, {}))
    assert "day" in pa.schema(table.schema().to_arrow()).names


def test_without_the_delta_table_a_column_widens_in_place_and_never_narrows(store, config, spark) -> None:
    narrow = typed_config(config, {"n": "int", "amount": "decimal(10,2)"}, delta="off")
    run(store, narrow, spark, "b1", GOOD)
    wide = typed_config(config, {"n": "long", "amount": "decimal(12,3)"}, delta="off")
    run(store, wide, spark, "b2", LATER)
    assert [c.data_type for c in load_committed_state(store, Layout(wide.layout)).columns] == ["long",
                                                                                              "decimal(12,3)"]
    # b1's files hold n as int32, b2's as int64: each row its value by the type its batch declared.
    rows = {row["event_id"]: (row["n"], row["amount"]) for row in committed_rows(store, wide, "data")}
    expected = {i: (v["n"], v["amount"]) for i, v in expected_rows(GOOD, {"n": "int", "amount": "decimal(10,2)"}).items()}
    expected.update({i: (v["n"], v["amount"])
                     for i, v in expected_rows(LATER, {"n": "long", "amount": "decimal(12,3)"}).items()})
    assert rows == expected
    with pytest.raises(ColumnsRefusedError, match=r"column n is declared int, but the output's schema holds it as long"):
        run(store, narrow, spark, "b3", LATER)


# --- Operations with declared columns ------------------------------------------------------------

def test_populate_reshard_and_observe_mode_work_with_declared_columns(store, config, spark) -> None:
    import io

    import pyarrow.parquet as pq

    from eventdedup.ops.populate import run_populate
    from eventdedup.ops.reshard import reshard

    # An earlier pipeline's output; one of its events holds a value that fits no declared column.
    old = [ev("p1", 2, user_id="u2-a"), ev("p2", 2, user_id=7), ev("p3", 2)]
    docs = [orjson.loads(line) for line in old]
    sink = io.BytesIO()
    pq.write_table(pa.table({
        "event_id": [doc["event_id"] for doc in docs], "original_event_id": [None] * 3, "duplicate_of": [None] * 3,
        "op": ["insert"] * 3, "supersedes_batch": [None] * 3,
        "event_time": [datetime.fromisoformat(doc["created_at"]) for doc in docs], "batch_id": ["legacy"] * 3,
        "raw": [line.decode() for line in old]}, schema=OUTPUT_SCHEMA), sink)
    store.put_bytes("previous/deduped/date=2026-11-22/hour=02/legacy-part-00000.parquet", sink.getvalue())

    strict = typed_config(config, on_mismatch="quarantine")
    # A populate writes no data file: it fills the cache with every event, whatever its columns hold.
    populated = run_populate(store, strict, "previous/deduped/", NOW, lambda: spark)
    assert (populated.counts["populated"], populated.counts["malformed"]) == (3, 0)
    assert batch_change(store, strict, populated.batch_id).columns == ()
    reshard(store, strict, 8, NOW)

    # Observe mode: every event output as it arrived, each with its columns, duplicates audited only.
    observing = make_config(config.s3.endpoint_url or "", config.s3.bucket, dedup={"mode": "observe", "buckets": 8},
                            table={"columns": COLUMNS})
    lines = [GOOD[0], GOOD[1], GOOD[0], old[0], MISFITS[0]]
    run(store, observing, spark, "b1", lines)
    rows = sorted(((row["event_id"], *(row[name] for name in COLUMNS)) for row in committed_rows(store, observing,
                                                                                                    "data")), key=str)
    assert rows == sorted(((orjson.loads(line)["event_id"], *expected_rows([line])[orjson.loads(line)["event_id"]]
                            .values()) for line in lines), key=str)
    audit = sorted((row["event_id"], row["reason"]) for row in committed_rows(store, observing, "audit"))
    assert audit == [("g1", "in_batch_natural"), ("p1", "cross_batch_natural")]
    change = batch_change(store, observing, "b1")
    assert change.column_figures is not None
    assert {name: (f.mismatched, f.nulls) for name, f in change.column_figures.items()} == {
        name: (sum(expected_value(orjson.loads(line), spec, name)[1] for line in lines),
               sum(expected_value(orjson.loads(line), spec, name)[0] is None for line in lines))
        for name, spec in COLUMNS.items()}


def test_infer_columns_suggests_the_narrowest_type_of_each_field_with_its_rates(tmp_path, store, config, capsys) -> None:
    import tomllib

    from bench.workload import event_line
    from eventdedup.cli import main
    from eventdedup.config import load_config

    # The bench's workload (its events' own fields), then lines holding each kind of value.
    bench_lines = [event_line(bytes([i]) * 16, 1_795_000_000_000_000 + i) for i in range(6)]
    lines = [
        ev("x1", 3, count=1, big=2**40, price=1.5, flag=True, day="2026-11-22", at="2026-11-22T05:00:00Z",
           tags=["a", "b"], mixed=1, device={"os": "ios", "version": 17}),
        ev("x2", 3, count=-2, big=3, price=2, flag=None, at="2026-11-22T06:00:00+01:00", tags=[], mixed="x",
           device={"os": "android"}),
    ]
    put_lines(store, "landing/a/1.jsonl", bench_lines)
    put_lines(store, "landing/b/1.jsonl", [*lines, b"not json"])
    path = tmp_path / "eventdedup.toml"
    path.write_text(f'[s3]\nendpoint_url = "{config.s3.endpoint_url}"\nbucket = "{config.s3.bucket}"\n')

    assert main(["infer-columns", "--config", str(path), "--input-prefix", "landing/"]) == 0
    printed = capsys.readouterr().out
    suggested = tomllib.loads(printed)["table"]["columns"]
    assert suggested == {
        # the bench's: every value a string; props is walked to its leaves
        "user_id": "string", "type": "string",
        "props_path": {"path": "props.path", "type": "string"}, "props_pad": {"path": "props.pad", "type": "string"},
        # the narrowest type each field's values all fit
        "count": "int", "big": "long", "price": "double", "flag": "boolean", "day": "date", "at": "timestamp",
        "tags": "array<string>", "device_os": {"path": "device.os", "type": "string"},
        "device_version": {"path": "device.version", "type": "int"},
        # an int and a string: no type short of json takes both; the narrowest taking the most
        "mixed": "int",
    }
    by_name = {line.split(" = ")[0]: line.split("#")[-1].strip() for line in printed.splitlines()
               if " = " in line and not line.startswith("#")}
    assert by_name["flag"] == "null 87.5%, mismatch 0.0%"  # 8 objects sampled: 1 true, 1 null, 6 missing
    assert by_name["mixed"] == "null 75.0%, mismatch 12.5%"
    assert by_name["user_id"] == "null 25.0%, mismatch 0.0%"
    assert "1 not a JSON object" in printed
    # The block is a configuration as it stands.
    path.write_text(path.read_text() + printed)
    assert [column.name for column in load_config(str(path), environ={}).table.columns] == list(suggested)

    assert main(["infer-columns", "--config", str(path), "--input-prefix", "landing/a/", "--sample", "2",
                 "--json"]) == 0
    inferred = orjson.loads(capsys.readouterr().out)
    assert (inferred["lines"], inferred["objects"]) == (2, 1)


# --- Backfilling a column into committed hours ---------------------------------------------------

BEFORE = [ev("a1", 3, user_id="u3-x", n=1), ev("a2", 3, n="two"), ev("a3", 4, user_id="u4-x", n=3)]
AFTER = [ev("c1", 4, user_id="u4-y", n=4), ev("c2", 5, user_id="u5-y", n=5)]
USER_ONLY = {"user_id": "string"}
WITH_N = {"user_id": "string", "n": "long"}


def table_rows(store: S3Store, config: Config) -> dict[str, tuple[Any, ...]]:
    rows = open_delta(store, config).to_pyarrow_table().to_pylist()
    assert len(rows) == len({row["event_id"] for row in rows}), "a row appears twice in the table"
    return {row["event_id"]: (row["user_id"], row["n"], row["raw"]) for row in rows}


def view_rows(store: S3Store, config: Config) -> dict[str, tuple[Any, ...]]:
    rows = committed_rows(store, config, "data")
    assert len(rows) == len({row["event_id"] for row in rows}), "a row appears twice in the view"
    return {row["event_id"]: (row["user_id"], row.get("n"), row["raw"]) for row in rows}


def filled(lines: list[bytes], columns: dict[str, Any] = WITH_N) -> dict[str, tuple[Any, ...]]:
    return {i: (v["user_id"], v.get("n"), next(line.decode() for line in lines if orjson.loads(line)["event_id"] == i))
            for i, v in expected_rows(lines, columns).items()}


def test_backfill_fills_an_added_column_into_committed_hours_one_table_commit_an_hour_and_again_is_a_no_op(
        tmp_path, store, config, spark, capsys) -> None:
    from eventdedup.ops.backfill_columns import backfill_columns

    before, after = typed_config(config, USER_ONLY), typed_config(config, WITH_N)
    run(store, before, spark, "b1", BEFORE)
    run(store, after, spark, "b2", AFTER)
    # Before: b1's rows read n as null.
    assert view_rows(store, after) == {**filled(BEFORE, USER_ONLY), **filled(AFTER)}
    table_version = open_delta(store, after).version()
    b1_files = sorted(obj.key for obj in committed_objects(store, Layout(after.layout), "data") if "/b1-part-" in obj.key)

    hours = backfill_columns(store, after, datetime(2026, 11, 22, 3, tzinfo=timezone.utc), None, NOW)
    # Hours 3 and 4 held b1's files without n (hour 4 b2's too, which holds it); hour 5 only b2's.
    assert [(h.hour_text, h.newly_committed, h.change is not None) for h in hours] == [
        ("2026-11-22T03:00Z", True, True), ("2026-11-22T04:00Z", True, True), ("2026-11-22T05:00Z", False, False)]
    replaced = sorted(r.key for h in hours if h.change for r in h.change.replaced)
    assert replaced == b1_files
    assert {h.hour_text: (h.change.rows, h.change.column_figures["n"].mismatched) for h in hours if h.change} == {
        "2026-11-22T03:00Z": (2, 1), "2026-11-22T04:00Z": (1, 0)}
    assert view_rows(store, after) == table_rows(store, after) == {**filled(BEFORE), **filled(AFTER)}
    table = open_delta(store, after)
    assert [entry["eventdedup.operation"] for entry in table.history(table.version() - table_version)] == [
        "column_backfill"] * 2
    # Each hour's commit removes its old file and adds its copy: a reader sees one or the other.
    prefix = after.layout.output_prefix
    newer, older = set(table_files(table)), set(table_files(open_delta(store, after, table.version() - 1)))
    hour_4 = {key[len(prefix):] for key in b1_files if "/hour=04/" in key}
    assert older - newer == hour_4
    assert newer - older == {r.by[len(prefix):] for r in hours[1].change.replaced}  # type: ignore[union-attr]

    # Again, from the command line: every hour is done; nothing is written.
    from eventdedup.cli import main

    from ..support.helpers import bucket_listing
    listing = bucket_listing(store)
    path = tmp_path / "eventdedup.toml"
    path.write_text(f'[s3]\nendpoint_url = "{config.s3.endpoint_url}"\nbucket = "{config.s3.bucket}"\n'
                    '[dedup]\nbuckets = 4\n[table.columns]\nuser_id = "string"\nn = "long"\n')
    assert main(["backfill-columns", "--config", str(path), "--since", "2026-11-22T03:30:00Z"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"2026-11-22T03:00Z: {hours[0].backfill_id} already committed as log version {hours[0].version}: "
        f'{{"hour":{hours[0].hour},"files_rewritten":{len(hours[0].change.replaced)},"rows":2,"mismatched":1}}',
        f"2026-11-22T04:00Z: {hours[1].backfill_id} already committed as log version {hours[1].version}: "
        f'{{"hour":{hours[1].hour},"files_rewritten":{len(hours[1].change.replaced)},"rows":1,"mismatched":0}}',
        "2026-11-22T05:00Z: every file already holds the columns",
        "3 hour(s) of committed output in the range; 0 backfilled now"]
    assert bucket_listing(store) == listing

    # A retraction of b1 takes its copies out of the view and the table.
    from eventdedup.ops.retract import retract_batch
    retract_batch(store, after, "b1", "test", NOW)
    assert view_rows(store, after) == table_rows(store, after) == filled(AFTER)


def test_backfill_beside_a_compaction_a_concurrent_batch_and_a_retraction_leaves_each_row_once(
        store, config, spark, monkeypatch) -> None:
    from eventdedup.delta.upkeep import maintain_table
    from eventdedup.ops import backfill_columns as backfill
    from eventdedup.ops.retract import retract_batch

    upkeep = {"compact_min_files": 2, "compact_after_hours": 0}
    before, after = typed_config(config, USER_ONLY, **upkeep), typed_config(config, WITH_N, **upkeep)
    run(store, before, spark, "b1", BEFORE)
    run(store, after, spark, "b2", AFTER)
    # Compaction merges hour 4's files, b1's (without n) with b2's (with it).
    assert "2026-11-22/04" in maintain_table(store, after).compacted
    assert table_rows(store, after) == view_rows(store, after) == {**filled(BEFORE, USER_ONLY), **filled(AFTER)}

    # While hour 3 is staged a batch commits (into hour 3), and while hour 4 is staged b2 is retracted:
    # each time the staged hour is stale, and staged again from the view as it is then.
    late = [ev("d1", 3, user_id="u3-z", n=6)]
    meanwhile = {"backfill-20261122T03": lambda: run(store, after, spark, "b3", late),
                 "backfill-20261122T04": lambda: retract_batch(store, after, "b2", "test", NOW)}
    promoted: list[str] = []
    real_promote = backfill.promote_batch

    def promote_after_a_commit(store_: S3Store, config_: Config, bid: str) -> Any:
        hour = bid.rsplit("-", 1)[0]
        if hour in meanwhile:
            meanwhile.pop(hour)()
        promoted.append(hour)
        return real_promote(store_, config_, bid)

    monkeypatch.setattr(backfill, "promote_batch", promote_after_a_commit)
    hours = backfill.backfill_columns(store, after, datetime(2026, 11, 22, 3, tzinfo=timezone.utc),
                                      datetime(2026, 11, 22, 5, tzinfo=timezone.utc), NOW)
    assert promoted == ["backfill-20261122T03"] * 2 + ["backfill-20261122T04"] * 2
    assert [h.newly_committed for h in hours] == [True, True]
    # Only b1's files: b3's hold n already, b2's left the view.
    assert {r.batch_id for h in hours if h.change for r in h.change.replaced} == {"b1"}
    assert table_rows(store, after) == view_rows(store, after) == {**filled(BEFORE), **filled(late)}
