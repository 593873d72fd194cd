"""`eventdedup infer-columns`: a `[table.columns]` block suggested from a sample of landing lines.

Every field path the sample holds (objects are walked to their leaves; an array is one field) is
profiled: how often it is missing or null, and the kind of each value. Its suggested type is the
narrowest declared type that fits every value by the parse's own rules (eventdedup.parse.columns):
boolean, int, long, double, date, timestamp (ISO-8601 text with an offset), string, array<T> of
one of those, else json. Where no type short of json fits every value, the one that fits the most
is suggested and its mismatch rate (the values that would be null, or quarantined) printed beside
it, so a new user starts from their data, not from a guess.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from eventdedup.column_types import DEDUP_COLUMNS, WORKING_COLUMNS, ColumnTypeError, declared_column
from eventdedup.config import Config
from eventdedup.parse.columns import ColumnMismatch, converter
from eventdedup.parse.input_lines import split_input
from eventdedup.s3store import S3Store

# The scalar types suggested, narrowest first: the first that fits every value wins.
SCALAR_ORDER = ("boolean", "int", "long", "double", "date", "timestamp", "string")
MAX_COLUMNS = 1000  # a sample whose objects are maps of ids prints its most frequent paths only
_ISO = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}")


@dataclass
class FieldProfile:
    """One field path over the sample: lines where it held a value (not null), by kind; lines where
    it was null; elements of its arrays by kind."""

    values: Counter[str] = field(default_factory=Counter)
    nulls: int = 0
    elements: Counter[str] = field(default_factory=Counter)

    @property
    def present(self) -> int:
        return sum(self.values.values())


@dataclass(frozen=True)
class SuggestedColumn:
    name: str
    path: tuple[str, ...]
    data_type: str
    null_rate: float  # lines where the field is missing or null
    mismatch_rate: float  # lines whose value would not fit the type


@dataclass(frozen=True)
class Inference:
    prefix: str
    objects: int
    lines: int
    unreadable: int  # lines that are not JSON objects (they would be quarantined)
    columns: tuple[SuggestedColumn, ...]
    skipped: tuple[str, ...]  # paths of fields the output holds already (the key and time fields)
    truncated: int = 0  # paths beyond MAX_COLUMNS, least frequent, left out

    def toml(self) -> str:
        """The suggested block, each column's rates beside it."""
        lines = [f"# eventdedup infer-columns: {self.lines} line(s) sampled from {self.objects} object(s) under "
                 f"{self.prefix}" + (f"; {self.unreadable} not a JSON object (left out)" if self.unreadable else ""),
                 "# each column: the narrowest type its values fit; the rates are of the lines sampled"]
        if self.skipped:
            lines.append(f"# {', '.join(self.skipped)}: the output holds them already (event_id, event_time)")
        if self.truncated:
            lines.append(f"# {self.truncated} rarer field path(s) left out (at most {MAX_COLUMNS} are shown)")
        lines.append("[table.columns]")
        for column in self.columns:
            if column.path == (column.name,):
                spec = f'"{column.data_type}"'
            else:
                spec = f'{{ path = {_toml_path(column.path)}, type = "{column.data_type}" }}'
            entry = f"{_toml_key(column.name)} = {spec}"
            lines.append(f"{entry:<60} # null {_percent(column.null_rate)}, mismatch {_percent(column.mismatch_rate)}")
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "objects": self.objects, "lines": self.lines, "unreadable": self.unreadable,
                "skipped": list(self.skipped), "truncated": self.truncated,
                "columns": [{"name": c.name, "path": ".".join(c.path), "type": c.data_type,
                             "null_rate": c.null_rate, "mismatch_rate": c.mismatch_rate} for c in self.columns]}


def infer_columns(store: S3Store, config: Config, prefix: str, sample: int) -> Inference:
    """Read up to `sample` lines of the objects under `prefix` (in key order) and suggest columns."""
    if sample < 1:
        raise ValueError("--sample must be at least 1")
    objects = 0
    lines: list[bytes] = []
    for info in sorted(store.list(prefix), key=lambda item: item.key):
        if len(lines) >= sample:
            break
        if info.size > config.events.max_object_bytes:
            continue
        objects += 1
        split = split_input(store.get_bytes(info.key), config.events.max_object_bytes)
        lines.extend(piece for _, piece in zip(range(sample - len(lines)), split.pieces, strict=False))
    skipped = {tuple(name.split(".")) for name in (*config.key_fields, config.events.time_field)}
    return inference(prefix, objects, lines, skipped)


def inference(prefix: str, objects: int, lines: Iterable[bytes], skipped: set[tuple[str, ...]]) -> Inference:
    """The suggestion for lines already read (the command's, or a test's)."""
    profiles: dict[tuple[str, ...], FieldProfile] = {}
    sampled = unreadable = 0
    for line in lines:
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            event = None
        if type(event) is not dict:
            unreadable += 1
            continue
        sampled += 1
        for path, value in _leaves(event, ()):
            profile = profiles.setdefault(path, FieldProfile())
            if value is None:
                profile.nulls += 1
                continue
            kind = value_kind(value)
            profile.values[kind] += 1
            if kind == "array":
                profile.elements.update(value_kind(item) for item in value if item is not None)
    ranked = sorted(profiles.items(), key=lambda item: (-item[1].present, item[0]))
    kept = sorted(ranked[:MAX_COLUMNS])
    columns, names = [], set(DEDUP_COLUMNS + WORKING_COLUMNS)
    for path, profile in kept:
        if path in skipped:
            continue
        data_type, fitting = suggested_type(profile)
        name = _column_name(path, names)
        names.add(name.lower())
        columns.append(SuggestedColumn(name, path, data_type, 1 - profile.present / sampled if sampled else 0.0,
                                       (profile.present - fitting) / sampled if sampled else 0.0))
    return Inference(prefix, objects, sampled + unreadable, unreadable, tuple(columns),
                     tuple(".".join(path) for path, _ in kept if path in skipped), max(0, len(ranked) - MAX_COLUMNS))


def _leaves(value: dict[str, Any], path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every field path to a value that is not an object (an empty object counts as a value)."""
    for key, item in value.items():
        here = (*path, key)
        if type(item) is dict and item:
            yield from _leaves(item, here)
        else:
            yield here, item


def value_kind(value: Any) -> str:
    """The narrowest kind a JSON value has: a scalar type of SCALAR_ORDER, or array, or object."""
    if type(value) is bool:
        return "boolean"
    if type(value) is int:
        return "int" if -(2**31) <= value < 2**31 else "long" if -(2**63) <= value < 2**63 else "double"
    if type(value) is float:
        return "double"
    if type(value) is str:
        if _fits("date", value):
            return "date"
        if _ISO.match(value) and _fits("timestamp", value):
            return "timestamp"
        return "string"
    return "array" if type(value) is list else "object"


def _fits(type_text: str, value: Any) -> bool:
    try:
        converter(type_text)(value)
    except ColumnMismatch:
        return False
    return True


# Which value kinds each scalar type takes, by the parse's rules (eventdedup.parse.columns).
_TAKES = {"boolean": {"boolean"}, "int": {"int"}, "long": {"int", "long"}, "double": {"int", "long", "double"},
          "date": {"date"}, "timestamp": {"timestamp"}, "string": {"date", "timestamp", "string"}}


def suggested_type(profile: FieldProfile) -> tuple[str, int]:
    """The type for a field, and how many of its values fit it."""
    present = profile.present
    if set(profile.values) == {"array"}:
        element, fitting = _scalar_choice(profile.elements)
        if element is not None and fitting == sum(profile.elements.values()):
            return f"array<{element}>", present
        return "json", present
    if set(profile.values) & {"array", "object"}:
        return "json", present
    chosen, fitting = _scalar_choice(profile.values)
    return (chosen or "json"), (fitting if chosen else present)


def _scalar_choice(kinds: Counter[str]) -> tuple[str | None, int]:
    """The narrowest scalar type taking every kind, else the one taking the most values."""
    if not kinds or set(kinds) & {"array", "object"}:
        return None, 0
    scored = [(sum(n for kind, n in kinds.items() if kind in _TAKES[name]), -rank, name)
              for rank, name in enumerate(SCALAR_ORDER)]
    total = sum(kinds.values())
    whole = [name for fitting, _, name in scored if fitting == total]
    if whole:
        return whole[0], total
    fitting, _, name = max(scored)
    return name, fitting


def _column_name(path: tuple[str, ...], taken: set[str]) -> str:
    """A column name from a path: its keys joined by "_", other characters than letters, digits and
    "_" made "_"; suffixed where it would collide with the output's own or another's."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", "_".join(path)) or "field"
    name, number = base, 1
    while name.lower() in taken:
        name = f"{base}_field" if number == 1 else f"{base}_field{number}"
        number += 1
    try:
        declared_column(name, "string", "infer-columns")
    except ColumnTypeError:
        name = f"field_{number}"
    return name


def _toml_path(path: tuple[str, ...]) -> str:
    """A path as [table.columns] reads it: keys joined by "." as a TOML string, or a list of TOML
    strings where a key holds a dot (joined, it would read as two keys)."""
    if any("." in key for key in path):
        return "[" + ", ".join(orjson.dumps(key).decode() for key in path) + "]"
    return orjson.dumps(".".join(path)).decode()


def _toml_key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else orjson.dumps(name).decode()


def _percent(rate: float) -> str:
    return f"{rate * 100:.1f}%" if rate == 0 or rate >= 0.001 else f"{rate * 100:.3f}%"

