"""Differential fuzzing of eventdedup's compiled parse core against the reference parser.

Every line the core (native/parse_core.cpp, through eventdedup.parse.native_core) vouches for
must give exactly the row `parse_event` gives: key text, key digest, fingerprint, time and raw
line. An input is three header bytes that choose the batch's rules (`rules_of`), then a chunk of
lines separated by b"\\n", scanned together twice: as a list of lines and as the batch parser
splits an object (input_lines.split_input's pieces). A vouched line that parse_event refuses, or whose
row differs, raises CoreMismatch: atheris reports it and writes the input as a crash artifact.
The declared columns the core extracts (COLUMNS: every type, nested, over the lines' fields) are
held to the reference's (eventdedup.parse.columns.event_columns) for every line orjson reads as an
object (an output row's raw line is one), and a line the core finds canonical must be one.

Coverage: the Python's (parse_event and what it calls, instrumented below, and each line's
outcome) and, when EVENTDEDUP_FUZZ_CORE names a build of the core made by build_core.py (gcc's
trace-pc and trace-cmp through native/coverage_shim.c), the core's own blocks and comparisons;
that build is then scanned beside the shipped one and must agree with it. The shipped core
itself carries no instrumentation. See fuzz/README.md; `make fuzz` runs it long (with the
instrumented build), tests/unit/parse/test_native_core.py briefly (the shipped core alone).
"""
from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from types import ModuleType

import atheris
import orjson
import pyarrow as pa
from coverage import instrumented_core, register_core_coverage

with atheris.instrument_imports(include=["eventdedup"]):
    from eventdedup.column_types import declared_column
    from eventdedup.config import FINGERPRINT_BLAKE2B, FINGERPRINT_XXH3
    from eventdedup.parse import native_core
    from eventdedup.parse.columns import columns_of_events
    from eventdedup.parse.columns_fast import core_columns
    from eventdedup.parse.event_parser import MAX_JSON_DEPTH, InvalidEvent, parse_event
    from eventdedup.parse.event_parser import _nesting_depth as nesting_depth
    from eventdedup.parse.fingerprints import FingerprintRules
    from eventdedup.parse.input_lines import split_input
    from eventdedup.parse.rules import ParseRules

HEADER_BYTES = 3
KEY_FIELDS = (("event_id",), ("event_id", "user"), ("user", "event_id"), ("created_at",), ("event_id", "event_id"),
              ("\u00efd",), ("n",), ("user",))
FINGERPRINTS = (((), ()), (("event_id", "n", "p"), ()), ((), ("n", "created_at")), (("event_id", "n"), ("n",)))
MOMENT_US = int(datetime(2026, 11, 22, 4, 30, tzinfo=timezone.utc).timestamp()) * 1_000_000
WINDOW_US = (int(datetime(2000, 1, 1, tzinfo=timezone.utc).timestamp()) * 1_000_000,
             int(datetime(2026, 11, 23, tzinfo=timezone.utc).timestamp()) * 1_000_000)
INT64 = (-(2**63), 2**63 - 1)
# Declared columns of every type over the fields the corpus's lines carry (an event's "n" and "p"
# hold numbers, strings, arrays and objects), for the columns' check.
COLUMNS = tuple(declared_column(name, spec, "fuzz") for name, spec in {
    "s": {"path": "event_id", "type": "string"}, "n_long": {"path": "n", "type": "long"},
    "n_int": {"path": "n", "type": "int"}, "n_double": {"path": "n", "type": "double"},
    "p_float": {"path": "p", "type": "float"}, "p_bool": {"path": "p", "type": "boolean"},
    "t": {"path": "created_at", "type": "timestamp"}, "day": {"path": "created_at", "type": "date"},
    "n_dec": {"path": "n", "type": "decimal(9,2)"}, "p_dec": {"path": "p", "type": "decimal(38,10)"},
    "user_dec": {"path": "user", "type": "decimal(5,0)"}, "p_json": {"path": "p", "type": "json"},
    "p_times": {"path": "p", "type": "array<timestamp>"}, "p_map": {"path": "p", "type": "map<string,decimal(5,1)>"},
    "p_struct": {"path": "p", "type": "struct<n:long,p:array<string>,d:date>"},
    "p_grid": {"path": "p", "type": "array<array<int>>"}, "p_n": {"path": "p.n", "type": "string"},
    "user_t": {"path": "user", "type": "timestamp"}}.items())


class CoreMismatch(AssertionError):
    """The core vouched for a line whose row is not parse_event's."""


def rules_of(header: bytes) -> ParseRules:
    """The batch's rules from three header bytes.

    Byte 0: bits 0-2 the key fields (KEY_FIELDS), bit 3 trim, bit 4 lower, bits 5-6 the
    fingerprint's fields and exclusions (FINGERPRINTS), bit 7 the second hash (XXH3-64).
    Byte 1: bits 0-1 the time bounds: all of int64, [2000-01-01, 2026-11-23], MOMENT_US plus or
    minus byte 2 microseconds, or plus or minus byte 2 seconds; bit 2 a max_line_bytes of
    32 + 4 x byte 2; bit 4 the declared columns' check (check_columns: a quarter of the harness's
    time without it, four times with it), bit 3 under on_mismatch = "quarantine".
    """
    flags, bounds, amount = header[0], header[1], header[2]
    fields, exclude = FINGERPRINTS[(flags >> 5) & 3]
    fingerprint = FingerprintRules(fields, exclude, FINGERPRINT_XXH3 if flags & 128 else FINGERPRINT_BLAKE2B)
    kind = bounds & 3
    if kind == 0:
        low, high = INT64
    elif kind == 1:
        low, high = WINDOW_US
    else:
        spread = amount * (1 if kind == 2 else 1_000_000)
        low, high = MOMENT_US - spread, MOMENT_US + spread
    return ParseRules(
        key_fields=KEY_FIELDS[flags & 7], time_field="created_at", min_time_us=low, max_time_us=high,
        max_line_bytes=32 + 4 * amount if bounds & 4 else 1_048_576, fingerprint=fingerprint,
        trim=bool(flags & 8), lower=bool(flags & 16))


@contextmanager
def scanning_with(core: ModuleType) -> Iterator[None]:
    """native_core's scans made by `core` (its module global, swapped for the harness alone)."""
    shipped = native_core._CORE
    native_core._CORE = core
    try:
        yield
    finally:
        native_core._CORE = shipped


INSTRUMENTED: ModuleType | None = None  # set by main()
_registered = False


def rows_of(scanned: native_core.NativeScan) -> list[tuple[object, ...]]:
    table = scanned.table_without_seq
    return list(zip(scanned.offsets.tolist(), table.column("event_id").to_pylist(),
                    table.column("key_digest").to_pylist(), table.column("fingerprint").to_pylist(),
                    table.column("event_time").cast("int64").to_pylist(), table.column("raw").to_pylist(), strict=True))


def check_chunk(lines: Sequence[bytes], rules: ParseRules) -> int:
    """Scan `lines` with the core and hold every vouched line to parse_event; the lines vouched.

    parse_event runs on every line, vouched or not: its branches (the instrumented Python), each
    line's outcome (`_outcome`) and, with INSTRUMENTED, the core's own edges and comparisons are
    the coverage that steers the search. The instrumented build must vouch for exactly what the
    shipped one does, with the same rows."""
    scanned = native_core.scan(lines, rules)
    if INSTRUMENTED is not None:
        with scanning_with(INSTRUMENTED):
            traced = native_core.scan(lines, rules)
        if rows_of(traced) != rows_of(scanned):
            raise CoreMismatch(f"the instrumented build of the core and the shipped one disagree on {list(lines)!r} "
                               f"under {rules}:\n  instrumented {rows_of(traced)}\n  shipped {rows_of(scanned)}")
    offsets = scanned.offsets.tolist()
    table = scanned.table_without_seq
    try:
        table.validate(full=True)  # its string columns must hold UTF-8
    except pa.ArrowInvalid as exc:
        raise CoreMismatch(f"the core's table is not valid Arrow ({exc}) for {list(lines)!r} under {rules}") from None
    if table.num_rows != len(offsets) or offsets != sorted(set(offsets)) or not all(
            0 <= offset < len(lines) for offset in offsets):
        raise CoreMismatch(f"the core's offsets {offsets} do not index {len(lines)} lines with one row each "
                           f"({table.num_rows} rows)")
    vouched = dict(zip(offsets, zip(
        table.column("event_id").to_pylist(), table.column("key_digest").to_pylist(),
        table.column("fingerprint").to_pylist(), table.column("event_time").cast("int64").to_pylist(),
        table.column("raw").to_pylist(), table.column("order_key").to_pylist(), strict=True), strict=True))
    for offset, line in enumerate(lines):
        row = vouched.get(offset)
        try:
            event = parse_event(line, rules)
        except InvalidEvent as exc:
            if row is not None:
                raise CoreMismatch(f"the core vouched for a line parse_event refuses ({exc}):\n  line  {line!r}\n"
                                   f"  rules {rules}\n  core  {row}") from None
            _outcome(False, str(exc))
            continue
        expected = (event.event_id, event.digest, event.fingerprint, event.time_us, event.raw, event.order_key)
        if row is not None and row != expected:
            raise CoreMismatch(f"the core's row differs from parse_event's:\n  line  {line!r}\n  rules {rules}\n"
                               f"  core  {row}\n  parse_event {expected}")
        _outcome(row is not None, None)
    return len(offsets)


@atheris.instrument_func
def _outcome(vouched: bool, reason: str | None) -> int:
    """One branch per outcome of a line (vouched, deferred and accepted, or the kind of refusal):
    the core's decisions become coverage, so inputs that move a line across the core's boundary
    are kept in the corpus."""
    if reason is None:
        return 1 if vouched else 2
    if reason.startswith("line of"):
        return 3
    if reason.startswith("invalid UTF-8"):
        return 4
    if reason.startswith("malformed JSON"):
        return 5
    if reason.startswith("not a JSON object"):
        return 6
    if reason.startswith("JSON nested deeper"):
        return 7
    if reason.startswith("repeated key"):
        return 8
    if "outside the accepted range" in reason:
        return 9
    if "is not ISO-8601" in reason:
        return 10
    if "has no UTC offset" in reason:
        return 11
    if "not a timestamp" in reason or "not a finite number" in reason:
        return 12
    if "is empty" in reason:
        return 13
    if "missing or null" in reason:
        return 14
    return 15


def check_columns(lines: Sequence[bytes], quarantine: bool) -> None:
    """The core's declared columns of any lines orjson reads as an object no deeper than the parse
    accepts (the lines a batch's output rows hold, and more) are the reference's; a line it finds
    canonical is one of those."""
    rows, _ = native_core.columns(lines, COLUMNS)
    events, objects = [], []
    for line in lines:
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if type(event) is dict and nesting_depth(event) <= MAX_JSON_DEPTH:
            events.append(event)
            objects.append(line)
    canonical = {lines[row] for row in rows.tolist()}
    if not canonical <= set(objects):
        raise CoreMismatch(f"the core found lines canonical that orjson refuses: {sorted(canonical - set(objects))!r}")
    _, found = native_core.columns(objects, COLUMNS)
    fast, refused = core_columns(found, len(objects), COLUMNS, events.__getitem__, quarantine)
    slow, slow_refused = columns_of_events(events, COLUMNS, quarantine)
    for name, array in slow.items():
        try:
            fast[name].validate(full=True)
        except pa.ArrowInvalid as exc:
            raise CoreMismatch(f"the core's column {name} is not valid Arrow ({exc}) for {list(lines)!r}") from None
        if refused != slow_refused or not fast[name].equals(array):
            raise CoreMismatch(f"the core's column {name} differs from the reference's for {list(lines)!r} "
                               f"(quarantine {quarantine}):\n  core {fast[name].to_pylist()} refused {refused}\n"
                               f"  reference {array.to_pylist()} refused {slow_refused}")


def test_one_input(data: bytes) -> None:
    """The chunk as a list of lines, then as the batch parser splits an object (split_input's
    pieces: spans of one text where it reads them so), each held to parse_event."""
    global _registered
    if INSTRUMENTED is not None and not _registered:
        register_core_coverage(INSTRUMENTED)
        _registered = True
    if len(data) < HEADER_BYTES:
        return
    rules, chunk = rules_of(data[:HEADER_BYTES]), data[HEADER_BYTES:]
    check_chunk(chunk.split(b"\n"), rules)
    check_chunk(split_input(chunk).pieces, rules)
    if data[1] & 16:
        check_columns(chunk.split(b"\n"), quarantine=bool(data[1] & 8))


def main() -> None:
    global INSTRUMENTED
    if not native_core.available():
        sys.exit(f"the compiled parse core is not built ({native_core.why_not()}): run `make venv`")
    INSTRUMENTED = instrumented_core("_parse_core")
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
