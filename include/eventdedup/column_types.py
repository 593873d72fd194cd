"""Declared columns: the typed columns `[table.columns]` adds to the output beside the dedup
columns and `raw`, their types as Delta and Spark SQL spell them, and which type changes widen.

A column is declared by name, with the JSON path it is read from (its name by default) and its
type: `string`, `long` (`bigint`), `int` (`integer`), `float`, `double`, `boolean`, `timestamp`,
`date`, `decimal(p,s)`, `array<T>`, `struct<name:T,...>`, `map<string,T>`, or `json` (the value's
JSON text, for a field whose shape varies). How a JSON value becomes a column's value, and when
it does not fit (a mismatch), is the parse's (eventdedup.parse.columns); how a batch's columns may
differ from the ones the log recorded before it, the promotion gate's (eventdedup.commit.gate),
using `widens` below.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

import pyarrow as pa

from eventdedup.codec import json_name

# The output's own columns (eventdedup.tables.OUTPUT_SCHEMA, which checks it agrees at import) and
# the Delta table's partition columns: a declared column may take none of these names.
DEDUP_COLUMNS = ("event_id", "original_event_id", "duplicate_of", "op", "supersedes_batch", "event_time",
                 "batch_id", "raw", "date", "hour")
# Names the batch's own working columns take beside the declared ones (eventdedup.tables.MISMATCHED).
WORKING_COLUMNS = ("mismatched",)
ON_MISMATCH = ("null", "quarantine")

SCALAR_KINDS = ("string", "long", "int", "float", "double", "boolean", "timestamp", "date", "json")
_ALIASES = {"bigint": "long", "integer": "int"}
# decimal128: what Parquet, Delta and Spark hold a decimal of at most 38 digits in.
MAX_DECIMAL_PRECISION = 38
# Arrays, maps and structs inside one another: far beyond any event's shape (the compiled parse
# core takes 200, a JSON line at most 254).
MAX_TYPE_DEPTH = 64


class ColumnTypeError(ValueError):
    """A type that is not one a declared column may have; the message says why."""


@dataclass(frozen=True)
class ColumnType:
    """A column's type: a scalar kind, a decimal's precision and scale, an array's element or a
    map's value type (`element`), a struct's fields."""

    kind: str
    precision: int = 0
    scale: int = 0
    element: ColumnType | None = None
    fields: tuple[tuple[str, ColumnType], ...] = ()

    def __str__(self) -> str:
        """The canonical spelling: what commits record and messages show."""
        if self.kind == "decimal":
            return f"decimal({self.precision},{self.scale})"
        if self.kind == "array":
            return f"array<{self.element}>"
        if self.kind == "map":
            return f"map<string,{self.element}>"
        if self.kind == "struct":
            return "struct<" + ",".join(f"{_field_name_text(name)}:{kind}" for name, kind in self.fields) + ">"
        return self.kind

    @property
    def is_complex(self) -> bool:
        return self.kind in ("array", "struct", "map")

    @property
    def arrow(self) -> pa.DataType:
        """The Arrow type of its values, as the output's Parquet and the Delta table hold them."""
        return _arrow_type(self)


def _field_name_text(name: str) -> str:
    return name if _PLAIN_NAME.fullmatch(name) else f"`{name}`"


@cache
def _arrow_type(kind: ColumnType) -> pa.DataType:
    simple = {"string": pa.string(), "json": pa.string(), "long": pa.int64(), "int": pa.int32(),
              "float": pa.float32(), "double": pa.float64(), "boolean": pa.bool_(),
              "timestamp": pa.timestamp("us", tz="UTC"), "date": pa.date32()}
    if kind.kind in simple:
        return simple[kind.kind]
    if kind.kind == "decimal":
        return pa.decimal128(kind.precision, kind.scale)
    if kind.kind == "array" and kind.element is not None:
        return pa.list_(_arrow_type(kind.element))
    if kind.kind == "map" and kind.element is not None:
        return pa.map_(pa.string(), _arrow_type(kind.element))
    return pa.struct([pa.field(name, _arrow_type(sub)) for name, sub in kind.fields])


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOKEN = re.compile(r"\s*(?:(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<number>\d+)|`(?P<quoted>[^`]+)`|(?P<sign>[<>(),:]))")


@cache
def parse_type(text: str) -> ColumnType:
    """A type from its Delta/Spark SQL spelling (case-insensitive keywords, any spaces); a
    ColumnTypeError says what is wrong."""
    tokens = _tokens(text)
    parsed, rest = _parse(tokens, 0, text)
    if rest != len(tokens):
        raise ColumnTypeError(f"{text!r}: unexpected {tokens[rest][1]!r} after {parsed}")
    return parsed


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens, at = [], 0
    while at < len(text.rstrip()):
        match = _TOKEN.match(text, at)
        if match is None:
            raise ColumnTypeError(f"{text!r}: cannot read {text[at:].strip()!r}")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        at = match.end()
    return tokens


def _parse(tokens: list[tuple[str, str]], at: int, text: str, depth: int = 0) -> tuple[ColumnType, int]:
    if depth > MAX_TYPE_DEPTH:
        raise ColumnTypeError(f"{text[:80]!r}...: types nest at most {MAX_TYPE_DEPTH} deep")

    def expect(sign: str, where: int) -> int:
        if where >= len(tokens) or tokens[where] != ("sign", sign):
            found = "the end" if where >= len(tokens) else repr(tokens[where][1])
            raise ColumnTypeError(f"{text!r}: expected {sign!r}, found {found}")
        return where + 1

    if at >= len(tokens) or tokens[at][0] != "word":
        found = "the end" if at >= len(tokens) else repr(tokens[at][1])
        raise ColumnTypeError(f"{text!r}: expected a type, found {found}; types: {', '.join(SCALAR_KINDS)}, "
                              "decimal(p,s), array<T>, struct<name:T,...>, map<string,T>")
    word = _ALIASES.get(tokens[at][1].lower(), tokens[at][1].lower())
    at += 1
    if word in SCALAR_KINDS:
        return ColumnType(word), at
    if word == "decimal":
        at = expect("(", at)
        numbers: list[int] = []
        while at < len(tokens) and tokens[at][0] == "number" and len(numbers) < 2:
            numbers.append(int(tokens[at][1]))
            at += 1
            if len(numbers) == 1 and at < len(tokens) and tokens[at] == ("sign", ","):
                at += 1
        at = expect(")", at)
        if len(numbers) != 2 or not (1 <= numbers[0] <= MAX_DECIMAL_PRECISION and 0 <= numbers[1] <= numbers[0]):
            raise ColumnTypeError(f"{text!r}: decimal(p,s) needs 1 <= p <= {MAX_DECIMAL_PRECISION} and 0 <= s <= p")
        return ColumnType("decimal", numbers[0], numbers[1]), at
    if word == "array":
        element, at = _parse(tokens, expect("<", at), text, depth + 1)
        return ColumnType("array", element=element), expect(">", at)
    if word == "map":
        key, at = _parse(tokens, expect("<", at), text, depth + 1)
        if key.kind != "string":
            raise ColumnTypeError(f"{text!r}: a map's keys are JSON object keys, so map<string,T>, not map<{key},...>")
        value, at = _parse(tokens, expect(",", at), text, depth + 1)
        return ColumnType("map", element=value), expect(">", at)
    if word == "struct":
        at = expect("<", at)
        members: list[tuple[str, ColumnType]] = []
        while True:
            if at >= len(tokens) or tokens[at][0] not in ("word", "quoted"):
                raise ColumnTypeError(f"{text!r}: a struct's members are written name:type")
            name = tokens[at][1]
            member, at = _parse(tokens, expect(":", at + 1), text, depth + 1)
            if name.lower() in (known.lower() for known, _ in members):  # Delta matches them without case
                raise ColumnTypeError(f"{text!r}: struct member {name!r} is named twice (names differing only in "
                                      "case are one name to Delta and Spark)")
            members.append((name, member))
            if at < len(tokens) and tokens[at] == ("sign", ","):
                at += 1
                continue
            return ColumnType("struct", fields=tuple(members)), expect(">", at)
    raise ColumnTypeError(f"{text!r}: unknown type {tokens[at - 1][1]!r}; types: {', '.join(SCALAR_KINDS)}, "
                          "decimal(p,s), array<T>, struct<name:T,...>, map<string,T>")


def widens(old: ColumnType, new: ColumnType) -> bool:
    """Whether values of `old` always fit `new` with their value kept, as Delta's type widening
    defines it: int to long or double, float to double, decimal(p,s) to decimal(p+k1,s+k2) with
    k1 >= k2 >= 0; an array's, a map's or a struct's members each the same or widened. The same
    type does not widen (nothing changes)."""
    if old == new:
        return False
    return _same_or_wider(old, new)


def _same_or_wider(old: ColumnType, new: ColumnType) -> bool:
    if old == new:
        return True
    if (old.kind, new.kind) in (("int", "long"), ("int", "double"), ("float", "double")):
        return True
    if old.kind == new.kind == "decimal":
        return new.precision - old.precision >= new.scale - old.scale >= 0
    if old.kind == new.kind and old.kind in ("array", "map"):
        return old.element is not None and new.element is not None and _same_or_wider(old.element, new.element)
    if old.kind == new.kind == "struct":
        return ([name for name, _ in old.fields] == [name for name, _ in new.fields]
                and all(_same_or_wider(a, b) for (_, a), (_, b) in zip(old.fields, new.fields, strict=True)))
    return False


@dataclass(frozen=True)
class DeclaredColumn:
    """One declared column: its name in the output, its type (canonical spelling), and the JSON
    path of the field it is read from (object keys from the top). Recorded in each batch's commit
    (eventdedup.commit.changes.BatchChange.columns), so a rerun writes the same columns."""

    name: str
    data_type: str = field(metadata=json_name("type"))
    path: tuple[str, ...]

    @property
    def column_type(self) -> ColumnType:
        return parse_type(self.data_type)

    @property
    def path_text(self) -> str:
        return ".".join(self.path)


def declared_column(name: str, spec: object, where: str) -> DeclaredColumn:
    """A column from its configuration entry: a type (`"long"`, the path being its name) or a table
    `{path = "a.b", type = "long"}` (a path as a string of dot-separated keys, or a list of keys for
    keys that hold a dot). ColumnTypeError names what is wrong."""
    if name.lower() in DEDUP_COLUMNS + WORKING_COLUMNS:  # Spark and Athena match names without regard to case
        raise ColumnTypeError(f"{where}: column {name!r} collides with a column eventdedup writes itself "
                              f"({', '.join(DEDUP_COLUMNS + WORKING_COLUMNS)}); declare it under another name, e.g. "
                              f'{name}_field = {{ path = "{name}", type = ... }}')
    if not name or any(ch in name for ch in ",;{}()\n\t=.`") or name != name.strip():
        raise ColumnTypeError(f"{where}: column name {name!r} holds a character a Delta or Parquet column name "
                              "may not, or that engines read as a path (space at either end, or one of "
                              ",;{}()=.`, tab, newline); name it otherwise and give its field as path")
    path: tuple[str, ...]
    if isinstance(spec, str):
        type_text, path = spec, (name,)
    elif isinstance(spec, dict) and set(spec) <= {"path", "type"} and "type" in spec:
        type_text = spec["type"]
        raw_path = spec.get("path", name)
        if isinstance(raw_path, str) and raw_path:
            path = tuple(raw_path.split("."))
        elif isinstance(raw_path, list) and raw_path and all(isinstance(key, str) for key in raw_path):
            path = tuple(raw_path)
        else:
            raise ColumnTypeError(f"{where}: column {name!r}: path must be a non-empty string (keys joined by '.') "
                                  f"or a list of keys, got {raw_path!r}")
        if any(not key for key in path):
            raise ColumnTypeError(f"{where}: column {name!r}: path {raw_path!r} has an empty key")
    else:
        raise ColumnTypeError(f"{where}: column {name!r} must be a type (\"long\") or a table with type and "
                              f"optionally path ({{ path = \"a.b\", type = \"long\" }}), got {spec!r}")
    if not isinstance(type_text, str):
        raise ColumnTypeError(f"{where}: column {name!r}: type must be a string, got {type_text!r}")
    try:
        canonical = str(parse_type(type_text))
    except ColumnTypeError as exc:
        raise ColumnTypeError(f"{where}: column {name!r}: {exc}") from None
    return DeclaredColumn(name, canonical, path)
