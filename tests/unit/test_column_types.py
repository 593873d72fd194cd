"""Declared columns (issue 53) at start-up: their types read as Delta and Spark SQL spell them, the
names and shapes refused with a message naming the column, which type changes widen, and the class a
quarantined mismatch's reason falls in. (Values, by type: tests/integration/test_typed_columns.py.)"""
from __future__ import annotations

import pyarrow as pa
import pytest

from eventdedup.column_types import ColumnTypeError, parse_type, widens
from eventdedup.config import config_from_mapping
from eventdedup.errors import ConfigError
from eventdedup.parse.columns import ColumnMismatch, converter, event_columns
from eventdedup.parse.event_time import InvalidEvent
from eventdedup.parse.quarantine_reasons import reason_class


def columns_of(columns: object, **table: object) -> object:
    return config_from_mapping({"s3": {"bucket": "events"}, "table": {"columns": columns, **table}},
                               source="test").table


@pytest.mark.parametrize("text, canonical, arrow", [
    ("STRING", "string", pa.string()),
    ("bigint", "long", pa.int64()),
    ("Integer", "int", pa.int32()),
    ("decimal( 18 , 2 )", "decimal(18,2)", pa.decimal128(18, 2)),
    ("array< struct<a:int, `b c`:timestamp> >", "array<struct<a:int,`b c`:timestamp>>",
     pa.list_(pa.struct([("a", pa.int32()), ("b c", pa.timestamp("us", tz="UTC"))]))),
    ("map<string, array<date>>", "map<string,array<date>>", pa.map_(pa.string(), pa.list_(pa.date32()))),
    ("json", "json", pa.string()),
])
def test_types_read_as_delta_and_spark_sql_spell_them(text: str, canonical: str, arrow: pa.DataType) -> None:
    kind = parse_type(text)
    assert (str(kind), kind.arrow) == (canonical, arrow)


@pytest.mark.parametrize("text, message", [
    ("varchar", "unknown type 'varchar'"),
    ("decimal(39,2)", "1 <= p <= 38"),
    ("decimal(5,6)", "0 <= s <= p"),
    ("map<int,string>", "map<string,T>"),
    ("struct<a:int,a:long>", "named twice"),
    ("array<string", "expected '>'"),
])
def test_a_type_that_is_none_is_refused_saying_why(text: str, message: str) -> None:
    with pytest.raises(ColumnTypeError, match=message):
        parse_type(text)


def test_columns_are_read_in_declared_order_with_their_paths() -> None:
    table = columns_of({"user_id": "string", "os": {"path": "context.device.os", "type": "string"},
                        "dotted": {"path": ["a.b", "c"], "type": "bigint"}})
    assert [(c.name, c.data_type, c.path) for c in table.columns] == [  # type: ignore[attr-defined]
        ("user_id", "string", ("user_id",)), ("os", "string", ("context", "device", "os")),
        ("dotted", "long", ("a.b", "c"))]


@pytest.mark.parametrize("columns, message", [
    ({"event_id": "string"}, "column 'event_id' collides with a column eventdedup writes"),
    ({"RAW": "string"}, "column 'RAW' collides"),
    ({"Hour": "int"}, "column 'Hour' collides"),
    ({"a.b": "string"}, "column name 'a.b'"),
    ({"user": "strnig"}, "column 'user': 'strnig': unknown type"),
    ({"user": {"type": "string", "path": ""}}, "column 'user': path must be"),
    ({"user": {"kind": "string"}}, "column 'user' must be a type"),
    ({"user": "string", "USER": "string"}, "differ only in case"),
])
def test_a_column_that_cannot_be_declared_is_refused_at_start_up_naming_it(columns: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        columns_of(columns)


def test_on_mismatch_is_null_or_quarantine() -> None:
    assert columns_of({}, on_mismatch="quarantine").on_mismatch == "quarantine"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="on_mismatch must be one of"):
        columns_of({}, on_mismatch="drop")


@pytest.mark.parametrize("old, new, widened", [
    ("int", "long", True), ("int", "double", True), ("float", "double", True),
    ("decimal(10,2)", "decimal(12,3)", True), ("decimal(10,2)", "decimal(12,2)", True),
    ("decimal(10,2)", "decimal(11,3)", True),  # 8 digits before the point in both, one more after
    ("decimal(10,2)", "decimal(10,3)", False),  # 8 digits before the point, then 7
    ("long", "int", False), ("int", "string", False), ("double", "float", False), ("long", "double", False),
    ("array<int>", "array<long>", True), ("map<string,float>", "map<string,double>", True),
    ("struct<a:int,b:string>", "struct<a:long,b:string>", True), ("struct<a:int>", "struct<b:int>", False),
    ("string", "string", False),  # the same type: nothing widens
])
def test_which_type_changes_widen(old: str, new: str, widened: bool) -> None:
    assert widens(parse_type(old), parse_type(new)) is widened


def test_a_mismatch_names_its_column_and_its_reason_falls_in_the_column_mismatch_class() -> None:
    columns = columns_of({"when": "timestamp", "amount": "map<string,decimal(10,2)>"}).columns  # type: ignore[attr-defined]
    for event in ({"when": "10000-01-01T00:00:00Z"}, {"when": 1e300}, {"amount": {"k": "1.234"}}):
        with pytest.raises(InvalidEvent) as refused:
            event_columns(event, columns, quarantine=True)
        assert str(refused.value).startswith(("column when (timestamp): ", "column amount (map<string,decimal(10,2)>)"))
        assert reason_class(str(refused.value)) == "column_mismatch"
    values, mismatched = event_columns({"when": "soon", "amount": {"k": "1.5"}}, columns, quarantine=False)
    assert (values[0], mismatched) == (None, (0,))
    with pytest.raises(ColumnMismatch):
        converter("long")(True)


def test_a_decimal_of_more_than_28_digits_is_judged_by_its_digits_not_a_rounded_abs() -> None:
    """decimal(38,10) holds 28 digits before the point: 28 nines and a half fit; 29 nines do not
    (abs() in Python's default 28-digit context once rounded the first up to 10^28 and refused it)."""
    from decimal import Decimal

    fits = converter("decimal(38,10)")
    assert fits("9999999999999999999999999999.5") == Decimal("9999999999999999999999999999.5000000000")
    assert fits("-9999999999999999999999999999.5") == Decimal("-9999999999999999999999999999.5000000000")
    with pytest.raises(ColumnMismatch, match="more than 28 digits before the point"):
        fits("99999999999999999999999999999.5")


def test_names_delta_would_take_for_one_and_the_batchs_working_column_are_refused_at_start_up() -> None:
    with pytest.raises(ColumnTypeError, match="struct member 'LAT' is named twice"):
        parse_type("struct<lat:double,LAT:double>")
    with pytest.raises(ConfigError, match="'Mismatched' collides with a column eventdedup writes itself"):
        config_from_mapping({"s3": {"bucket": "b"}, "table": {"columns": {"Mismatched": "string"}}})


def test_a_columns_field_cannot_change_under_it() -> None:
    """The files written hold the old field's values: a new path is refused, naming both as
    [table.columns] spells them (a list where a key holds a dot)."""
    from eventdedup.column_types import DeclaredColumn
    from eventdedup.commit.gate import refuse_incompatible_columns
    from eventdedup.errors import ColumnsRefusedError

    old = DeclaredColumn("width", "long", ("screen.width",))
    moved = DeclaredColumn("width", "long", ("screen", "width"))
    with pytest.raises(ColumnsRefusedError, match=r'column width is read from "screen.width" now, but the output\'s '
                                                  r'files hold the values of \["screen.width"\]'):
        refuse_incompatible_columns((old,), (moved,), "auto", "batch b2")
    refuse_incompatible_columns((old,), (old,), "auto", "batch b2")  # the same column: nothing to refuse


def test_types_nest_at_most_sixty_four_deep() -> None:
    """Deeper than any event's shape (the compiled core takes 200): refused at start-up, not left
    to switch the fast parse off batch after batch."""
    assert parse_type("array<" * 64 + "long" + ">" * 64).kind == "array"
    with pytest.raises(ColumnTypeError, match="types nest at most 64 deep"):
        parse_type("array<" * 65 + "long" + ">" * 65)
    with pytest.raises(ColumnTypeError, match="types nest at most 64 deep"):
        parse_type("struct<a:" * 65 + "long" + ">" * 65)
