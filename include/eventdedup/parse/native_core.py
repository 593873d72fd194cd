"""The compiled parse core (native/parse_core.cpp), when it is built: a chunk's lines in, the
CHUNK_SCHEMA rows it vouches for out, in one pass per line with no Python object per field.

It vouches for a line only when the line is exactly what `orjson.dumps` writes of its own parse
(the rule the Python fast path applies with a `dumps` per line) and its key and time take shapes
it knows; for those, every field of parse_event's row is derived from the line's bytes, the
fingerprint from its members reordered into canonical JSON. Every other line is left to the
Python paths (object_parser), which give its row or its quarantine reason. Lines of a batch whose
survivor policy compares a field (`min:`/`max:`) are not scanned here: their order keys come
from the parsed event.

`make venv` builds it (eventdedup_dev.native). Where it is not built the Python parser runs, and
the first chunk of the process logs one warning saying so.
"""
from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import xxhash

from eventdedup import compiled
from eventdedup.column_types import ColumnType, DeclaredColumn
from eventdedup.config import FINGERPRINT_BLAKE2B, FINGERPRINT_XXH3
from eventdedup.keys import KEY_DIGEST_BYTES
from eventdedup.parse.rules import ParseRules
from eventdedup.tables import CHUNK_SCHEMA, make_seq

# The fingerprint hashes the core computes, by FingerprintRules.algorithm.
_ALGORITHMS = {FINGERPRINT_BLAKE2B: 0, FINGERPRINT_XXH3: 1}
# A declared column's kind as the core knows it (parse_core.cpp's ColumnKind).
_COLUMN_KINDS = {"string": 0, "json": 1, "long": 2, "int": 3, "double": 4, "float": 5, "boolean": 6,
                 "timestamp": 7, "date": 8, "decimal": 9, "array": 10, "map": 11, "struct": 12}
# What the core hands out of each declared column for the rows it vouched for (parse_core.cpp's
# column_of), as Arrow's buffers hold it: a uint8 status an entry (COLUMN_NULL, COLUMN_VALUE, or
# COLUMN_UNSURE: left to the reference's rules; a row is unsure when anything in its value is), the
# values (fixed-width as Arrow holds the type; or UTF-8 text: strings unescaped, json the value's
# JSON text), int32 offsets (into the text, or into an array's or map's children's entries), a
# map's keys and their int32 offsets, and the children's (an array's element, a map's value, a
# struct's members: an entry per entry of the struct).
CoreColumn = tuple[bytes, bytes, bytes, bytes, bytes, tuple[Any, ...]]
CoreSpec = tuple[list[bytes], int, int, int, list[bytes], list[Any]]
COLUMN_NULL, COLUMN_VALUE, COLUMN_UNSURE = 0, 1, 2


def _load() -> tuple[ModuleType | None, str]:
    core, why_not = compiled.load("eventdedup.parse._parse_core", "parse_core.cpp")
    if core is None:
        return None, why_not
    if core.unicode_version() != unicodedata.unidata_version:  # its key normalisation would differ
        return None, (f"built with Unicode {core.unicode_version()}'s tables, this Python has "
                      f"{unicodedata.unidata_version}'s")
    if not _hashes_agree(core):
        return None, "its BLAKE2b or XXH3 disagrees with hashlib's and xxhash's (a miscompiled core)"
    return core, ""


def _hashes_agree(core: ModuleType) -> bool:
    """The core's hashes on a few inputs equal the references' (its fingerprints and keys are only
    exact if they do), checked once at load."""
    for data in (b"", b"eventdedup", bytes(range(256)) * 3):
        if (core.digest(data, 0) != hashlib.blake2b(data, digest_size=8).digest()
                or core.digest(data, 16) != hashlib.blake2b(data, digest_size=16).digest()
                or core.digest(data, 1) != xxhash.xxh3_64_intdigest(data)):
            return False
    return True


_CORE, _WHY_NOT = _load()


def available() -> bool:
    return _CORE is not None


def why_not() -> str:
    """Why the core is not loaded ('' when it is)."""
    return _WHY_NOT


def in_use(compiled_parser: bool) -> bool:
    """Whether the core runs where [events] compiled_parser is as given: switched on and built (the
    first call of a process that finds it switched on but not built warns once)."""
    return compiled.in_use(_CORE, compiled_parser, "parse core", _WHY_NOT,
                           "lines are parsed in pure Python, several times slower",
                           "a C++ compiler and libxxhash-dev") is not None


def supports(rules: ParseRules) -> bool:
    """Whether the core scans lines under these rules (the built core, switched on, no
    field-comparing survivor)."""
    return in_use(rules.compiled) and rules.survivor_field is None and rules.fingerprint.algorithm in _ALGORITHMS


@dataclass(frozen=True)
class NativeScan:
    """The rows the core vouched for in a chunk of `pieces` lines."""

    offsets: npt.NDArray[np.int64]  # which pieces, ascending
    table_without_seq: pa.Table  # CHUNK_SCHEMA columns but seq, one row per offset
    pieces: int
    columns: tuple[CoreColumn, ...]  # each checked column's (ParseRules.checked_columns), one row per offset

    def deferred(self) -> npt.NDArray[np.int64]:
        """The offsets of the pieces the core left to the Python parsers."""
        left = np.ones(self.pieces, bool)
        left[self.offsets] = False
        return np.flatnonzero(left).astype(np.int64)

    def table(self, line_numbers: npt.NDArray[np.int64], input_index: int) -> pa.Table:
        """The rows, numbered: `line_numbers[i]` is piece i's line."""
        numbers = line_numbers[self.offsets]
        seq = make_seq(np.full(len(numbers), input_index, np.int64), numbers)
        return self.table_without_seq.add_column(0, CHUNK_SCHEMA.field("seq"), pa.array(seq, pa.int64()))


def newline_positions(text: bytes, start: int) -> npt.NDArray[np.int64] | None:
    """Where each "\n" of `text` from `start` lies (memchr), or None without the core."""
    if _CORE is None:
        return None
    return np.frombuffer(_CORE.newlines(text, start), np.int64)


def scan(pieces: Sequence[bytes], rules: ParseRules) -> NativeScan:
    """The core's rows for a chunk of lines (a list of bytes, or spans of one text: LinePieces,
    read in place); `supports(rules)` must hold."""
    assert _CORE is not None
    fingerprint = rules.fingerprint
    arguments = ([name.encode() for name in rules.key_fields], rules.time_field.encode(), rules.min_time_us,
                 rules.max_time_us, rules.max_line_bytes, [name.encode() for name in fingerprint.fields],
                 [name.encode() for name in fingerprint.exclude], rules.trim, rules.lower,
                 _ALGORITHMS[fingerprint.algorithm], column_specs(rules.checked_columns))
    spans = getattr(pieces, "text", None)  # LinePieces (input_lines imports this module: no isinstance)
    if spans is not None:
        starts = np.ascontiguousarray(pieces.starts, np.int64)  # type: ignore[attr-defined]
        ends = np.ascontiguousarray(pieces.ends, np.int64)  # type: ignore[attr-defined]
        found = _CORE.scan_spans(spans, starts, ends, *arguments)
    else:
        found = _CORE.scan(pieces, *arguments)
    (offsets, digests, fingerprints, times, key_offsets, key_data, raw_offsets, raw_data, columns) = found
    rows = len(offsets) // 8
    buffer = pa.py_buffer
    table = pa.table({
        "event_id": pa.StringArray.from_buffers(rows, buffer(key_offsets), buffer(key_data)),
        "key_digest": pa.FixedSizeBinaryArray.from_buffers(pa.binary(KEY_DIGEST_BYTES), rows, [None, buffer(digests)]),
        "fingerprint": pa.Array.from_buffers(pa.uint64(), rows, [None, buffer(fingerprints)]),
        "event_time": pa.Array.from_buffers(pa.int64(), rows, [None, buffer(times)])
        .cast(CHUNK_SCHEMA.field("event_time").type),
        "raw": pa.StringArray.from_buffers(rows, buffer(raw_offsets), buffer(raw_data)),
        "order_key": pa.nulls(rows, pa.binary()),
    }, schema=pa.schema([field for field in CHUNK_SCHEMA if field.name != "seq"]))
    return NativeScan(np.frombuffer(offsets, np.int64), table, len(pieces), columns)


def column_specs(columns: Sequence[DeclaredColumn]) -> list[CoreSpec]:
    """The declared columns as the core takes them (parse_core.cpp's spec_of)."""
    return [_spec([key.encode() for key in column.path], column.column_type) for column in columns]


def _spec(path: list[bytes], kind: ColumnType) -> CoreSpec:
    if kind.kind in ("array", "map"):
        assert kind.element is not None
        children = [_spec([], kind.element)]
    else:
        children = [_spec([], member) for _, member in kind.fields]
    return (path, _COLUMN_KINDS[kind.kind], kind.precision, kind.scale, [name.encode() for name, _ in kind.fields],
            children)


def columns(lines: pa.Array | Sequence[bytes],
            declared: Sequence[DeclaredColumn]) -> tuple[npt.NDArray[np.int64], tuple[CoreColumn, ...]]:
    """The core's declared columns of the lines (an Arrow string or binary array, read in place, or
    bytes), an entry per line in every column: which lines it found canonical, and the columns
    (COLUMN_UNSURE in every column of the others). Lines of one call hold less than 2 GiB between
    them (Arrow's int32 offsets): a caller with more slices them."""
    assert _CORE is not None
    array = lines if isinstance(lines, pa.Array) else pa.array(lines, pa.binary())
    if not (pa.types.is_string(array.type) or pa.types.is_binary(array.type)):
        raise TypeError(f"lines must be an Arrow string or binary array, not {array.type}")
    data = array.buffers()[2]
    rows, found = _CORE.columns(b"" if data is None else data, line_offsets(array), column_specs(declared))
    return np.frombuffer(rows, np.int64), found


def line_offsets(array: pa.Array) -> npt.NDArray[np.int32]:
    """A string or binary array's int32 offsets as its lines have them (its own offset applied, one
    more than the lines; their bytes lie in its data buffer between each two), read in place."""
    if not len(array):
        return np.zeros(1, np.int32)
    return np.frombuffer(array.buffers()[1], np.int32, count=len(array) + 1, offset=array.offset * 4)
