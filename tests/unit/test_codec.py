"""The one codec: records to documents and back, derived from their type hints."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import ClassVar, NamedTuple

import pytest

from eventdedup import codec
from eventdedup.codec import TRANSIENT, CodecError, json_name


class Entry(NamedTuple):
    etag: str
    version: int


@dataclass(frozen=True)
class Add:
    KIND: ClassVar[str] = "add"
    rows: int
    note: str | None = None


@dataclass(frozen=True)
class Drop:
    KIND: ClassVar[str] = "drop"
    names: tuple[str, ...]


@dataclass(frozen=True)
class Record:
    name: str
    change: Add | Drop
    at: datetime
    entries: Mapping[str, Entry] = field(default_factory=dict)
    pair: tuple[int, int] | None = None
    owners: frozenset[str] = frozenset()
    renamed: int = field(default=0, metadata=json_name("was_called"))
    scratch: int = field(default=0, compare=False, metadata=TRANSIENT)


AT = datetime(2026, 11, 22, 5, tzinfo=timezone(timedelta(hours=1)))


def test_a_record_and_its_document() -> None:
    record = Record("r", Drop(("a", "b")), AT, {"k": Entry('"e"', 3)}, (1, 2), frozenset({"y", "x"}), 7, scratch=9)
    doc = codec.to_doc(record)
    assert doc == {"name": "r", "change": {"kind": "drop", "names": ["a", "b"]}, "at": "2026-11-22T04:00:00+00:00",
                   "entries": {"k": ['"e"', 3]}, "pair": [1, 2], "owners": ["x", "y"], "was_called": 7}
    assert codec.from_doc(Record, doc) == record  # the transient field is neither written nor read


def test_defaults_are_left_out_and_read_back_from_absence() -> None:
    record = Record("r", Add(5), AT)
    assert codec.to_doc(record) == {"name": "r", "change": {"kind": "add", "rows": 5}, "at": "2026-11-22T04:00:00+00:00"}
    assert codec.loads(Record, codec.dumps(record)) == record


@pytest.mark.parametrize("doc, where", [
    ({"name": "r", "change": {"kind": "rename"}, "at": "2026-11-22T05:00:00Z"}, "$.change: kind 'rename'"),
    ({"name": "r", "change": {"kind": "add", "rows": True}, "at": "2026-11-22T05:00:00Z"}, "$.change.rows: expected an integer"),
    ({"name": "r", "change": {"kind": "add"}, "at": "2026-11-22T05:00:00Z"}, "$.change: no 'rows'"),
    ({"name": 3, "change": {"kind": "add", "rows": 1}, "at": "2026-11-22T05:00:00Z"}, "$.name: expected str"),
    ({"name": "r", "change": {"kind": "add", "rows": 1}, "at": "yesterday"}, "$.at: Invalid isoformat"),
    ({"name": "r", "change": {"kind": "add", "rows": 1}, "at": "2026-11-22T05:00:00Z",
      "entries": {"k": ['"e"', 3], "m": ['"e"']}}, "$.entries.m: 1 items, expected 2"),
    ({"name": "r", "change": {"kind": "drop", "names": ["a", 4]}, "at": "2026-11-22T05:00:00Z"},
     r"\$.change.names\[1\]: expected str"),
    ([], "$: expected dict"),
])
def test_a_document_holding_something_else_names_where(doc: object, where: str) -> None:
    with pytest.raises(CodecError, match=where if where.startswith("\\") else f"^{where.replace('$', '[$]')}"):
        codec.from_doc(Record, doc)


def test_garbage_bytes_are_a_codec_error() -> None:
    with pytest.raises(CodecError, match="not JSON"):
        codec.loads(Record, b"{nope")


def test_a_mapping_whose_key_does_not_decode_names_the_key() -> None:
    @dataclass(frozen=True)
    class ByHour:
        hours: Mapping[int, str]

    with pytest.raises(CodecError, match=r"^\$\.hours\.x: expected an integer"):
        codec.from_doc(ByHour, {"hours": {"x": "y"}})


@pytest.mark.parametrize("doc, current, oldest, older", [
    ({"format": 2, "x": 1}, 2, None, False),  # the current format: read as it is
    ({"x": 1}, 2, None, True),  # unnumbered, the reader's one older format
    ({"format": 1, "x": 1}, 2, 1, True),
    ([1, 2], 2, 1, False),  # not an object: decoding says what is wrong
])
def test_a_document_of_the_one_older_format_is_upgraded_and_the_current_one_is_not(doc, current, oldest,
                                                                                  older) -> None:
    assert codec.is_older_format(doc, current, oldest) is older


@pytest.mark.parametrize("doc, oldest, named", [
    ({"format": 3}, None, "3"),  # a newer release's
    ({"format": 3}, 1, "3"),
    ({"format": None}, None, "None"),  # numbered, though by no number: not the unnumbered format
    ({"x": 1}, 1, "None"),  # unnumbered where the older format was numbered
])
def test_any_other_format_is_refused_never_read_as_an_older_one(doc, oldest, named) -> None:
    with pytest.raises(CodecError, match=f"unknown checkpoint format {named}"):
        codec.is_older_format(doc, 2, oldest, "checkpoint format")
