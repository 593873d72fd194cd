"""Parse a whole input object at a time: per line only a JSON load, one re-serialisation and the
fingerprint run in Python; ids, UUID bytes, timestamps (strict ISO-8601 or epoch integers) and
bounds are vectorised over Arrow and numpy arrays.

`parse_event` stays the reference. A line goes the fast way only when every step can vouch for
it, and then yields exactly what `parse_event` would; any other line (too long, not JSON, a
repeated key, an odd id or timestamp, out of range) is handed to `parse_event`, which produces
the row or the quarantine reason. tests/unit/parse/test_batch_parser.py holds the two paths equal on
hostile lines.

Why the re-serialisation vouches for a line: orjson keeps the last of repeated keys, so if
`orjson.dumps(orjson.loads(line)) == line`, every member of the line is in the parsed object
and nothing was repeated (producers that write compact JSON pay one `dumps`, ~0.2 us).
"""
from __future__ import annotations

import gc
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from eventdedup.errors import EventDedupError
from eventdedup.keys import (
    CANONICAL_UUID_PATTERN,
    DIGEST_DTYPE,
    KEY_DIGEST_BYTES,
    canonical_uuid_bytes,
    hashed_key_digests,
    key_digest,
)
from eventdedup.parse import native_core
from eventdedup.parse.columns import event_columns
from eventdedup.parse.columns_fast import refused_rows
from eventdedup.parse.event_parser import (
    EPOCH_MILLIS_THRESHOLD,
    InvalidEvent,
    JsonObject,
    ParsedEvent,
    dedup_key_text,
    order_key_for,
    parse_event,
)
from eventdedup.parse.fingerprints import fingerprint_digests
from eventdedup.parse.input_lines import InputLine, SplitInput, line_of_piece, split_input
from eventdedup.parse.rules import ParseRules
from eventdedup.tables import CHUNK_SCHEMA, make_seq

log = logging.getLogger(__name__)

# More unexpected parser exceptions than this in one object is a bug, not bad input: fail the task.
MAX_UNEXPECTED_PER_OBJECT = 10
CHUNK_LINES = 16_384  # parsed objects alive at once: bounds memory and garbage-collector work
# Only this strict ISO-8601 shape is converted by Arrow; anything else goes to parse_event.
STRICT_ISO_RE = (r"^[1-9]\d{3}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?"
                 r"(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$")
# One step from the strict shape, as datetime.fromisoformat reads it: a fraction of seconds past
# microseconds (cut to them), a space between the date and the time, an offset without its
# colon (+hhmm) or its minutes (+hh); rewritten to it (RE2's \d is ASCII only, as the shape's).
_LONG_FRACTION = r"^([^.]*\.\d{6})\d+"
_SPACE_FOR_T = r"^(\d{4}-\d{2}-\d{2}) "
_COMPACT_OFFSET = r"([+-]\d{2})(\d{2})$"
_HOURS_OFFSET = r"([+-]\d{2})$"


class ParserFailure(EventDedupError):
    """The parser itself is failing (a bug), not the input: the task must fail, loudly."""


@dataclass
class ObjectParse:
    table: pa.Table  # CHUNK_SCHEMA rows in input order
    bad_raw: list[bytes] = field(default_factory=list)
    bad_error: list[str] = field(default_factory=list)
    bad_line: list[int] = field(default_factory=list)
    lines: int = 0
    unexpected: int = 0  # lines quarantined for an exception parse_event does not name

    def quarantine(self, line: InputLine, reason: str) -> None:
        self.bad_raw.append(line.raw)
        self.bad_error.append(reason)
        self.bad_line.append(line.line_number)


def parse_object(body: bytes, input_index: int, rules: ParseRules) -> ObjectParse:
    return parse_lines(split_input(body, rules.max_object_bytes), input_index, rules)


def parse_lines(split: SplitInput, input_index: int, rules: ParseRules, first_line: int = 1) -> ObjectParse:
    """Parse split lines numbered from `first_line` (a byte range's lines are numbered locally:
    eventdedup.job.read_units)."""
    base = first_line - 1
    result = ObjectParse(CHUNK_SCHEMA.empty_table(), lines=len(split.pieces) + len(split.trailing))
    tables: list[pa.Table] = []
    slow: list[ParsedRow] = []
    collecting = gc.isenabled()
    gc.disable()  # parsed events are acyclic and freed by reference counting; GC passes only cost
    try:
        for start in range(0, len(split.pieces), CHUNK_LINES):
            chunk = split.pieces[start:start + CHUNK_LINES]
            try:
                table, deferred = _parse_chunk(chunk, base + start + 1, input_index, rules)
            except MemoryError:
                raise
            except Exception as exc:  # noqa: BLE001 -- the fast path vouches for nothing it did not finish
                log.warning("fast parse of lines %d-%d failed (%s: %s); parsing them one by one",
                            start + 1, start + len(chunk), type(exc).__name__, exc)
                table, deferred = CHUNK_SCHEMA.empty_table(), list(range(len(chunk)))
            tables.append(table)
            for offset in deferred:
                _parse_slowly(line_of_piece(base + start + 1 + offset, chunk[offset]), input_index, rules, result,
                              slow)
        for line in split.trailing:
            if line.line_number:  # line 0 is a finding about the object as a whole
                line = InputLine(base + line.line_number, line.raw, line.error)
            _parse_slowly(line, input_index, rules, result, slow)
    finally:
        if collecting:
            gc.enable()
    if slow:
        tables.append(_rows_table(slow))
    table = pa.concat_tables([result.table, *tables])
    if slow:  # deferred rows were appended after their chunk: restore input order
        table = table.take(pc.sort_indices(table, sort_keys=[("seq", "ascending")]))
    result.table = table
    return result


def quarantined_whole(reason: str, rules: ParseRules) -> ObjectParse:
    """The parse of an object judged as a whole (too large to read): one finding, line 0."""
    result = ObjectParse(CHUNK_SCHEMA.empty_table(), lines=1)
    result.quarantine(InputLine(0, b"", reason), reason)
    return result


@dataclass(frozen=True)
class ParsedRow:
    seq: int
    event: ParsedEvent


def _parse_slowly(line: InputLine, input_index: int, rules: ParseRules, result: ObjectParse,
                  rows: list[ParsedRow]) -> None:
    if line.error is not None:
        result.quarantine(line, line.error)
        return
    try:
        rows.append(ParsedRow(make_seq(input_index, line.line_number), parse_event(line.raw, rules)))
    except InvalidEvent as exc:
        result.quarantine(line, str(exc))
    except MemoryError:
        raise  # the machine's state, not the line's: the task fails and is retried
    except Exception as exc:  # noqa: BLE001 -- the contract: one odd line never fails a batch
        # parse_event names every reason it knows (tests/unit/parse/test_parser_contract.py holds it to
        # that for any JSON); an exception it does not know still quarantines only this line,
        # unless it keeps happening: then it is a bug, and quarantining every event would hide it.
        result.unexpected += 1
        if result.unexpected > MAX_UNEXPECTED_PER_OBJECT:
            raise ParserFailure(f"the event parser failed unexpectedly on more than {MAX_UNEXPECTED_PER_OBJECT} "
                                f"lines of one object (last: line {line.line_number}, {type(exc).__name__}: "
                                f"{exc}); refusing to quarantine them all") from exc
        log.error("line %d: unexpected %s from the event parser: %s", line.line_number, type(exc).__name__, exc)
        result.quarantine(line, f"unparseable event ({type(exc).__name__}: {str(exc)[:200]}); please report this line")


def _rows_table(rows: list[ParsedRow]) -> pa.Table:
    events = [row.event for row in rows]
    return pa.table({
        "seq": [row.seq for row in rows],
        "event_id": [e.event_id for e in events],
        "key_digest": [e.digest for e in events],
        "fingerprint": [e.fingerprint for e in events],
        "event_time": [e.time_us for e in events],
        "raw": [e.raw for e in events],
        "order_key": [e.order_key for e in events],
    }, schema=CHUNK_SCHEMA)


def _parse_chunk(pieces: Sequence[bytes], first_number: int, input_index: int,
                 rules: ParseRules) -> tuple[pa.Table, list[int]]:
    """The rows the fast paths vouch for, in input order, and the offsets of the pieces they defer:
    the compiled core first (where it is built), then the Python fast path for what it left."""
    line_numbers = np.arange(first_number, first_number + len(pieces), dtype=np.int64)
    if not native_core.supports(rules):
        return _parse_chunk_python(pieces, line_numbers, input_index, rules)
    scanned = native_core.scan(pieces, rules)
    table = scanned.table(line_numbers, input_index)
    left = scanned.deferred()
    if rules.checked_columns:
        table, refused = _without_mismatches(table, pieces, scanned, rules)
        left = np.sort(np.concatenate([left, refused]))
    if not len(left):
        return table, []
    left_list = left.tolist()
    rest, deferred = _parse_chunk_python([pieces[i] for i in left_list], line_numbers[left], input_index, rules)
    if rest.num_rows:
        table = pa.concat_tables([table, rest])
        table = table.take(pc.sort_indices(table, sort_keys=[("seq", "ascending")]))
    return table, [left_list[i] for i in deferred]


def _parse_chunk_python(pieces: Sequence[bytes], line_numbers: np.ndarray, input_index: int,
                        rules: ParseRules) -> tuple[pa.Table, list[int]]:
    """The rows the Python fast path vouches for, and the offsets of the pieces it defers;
    `line_numbers[i]` is piece i's line."""
    loads, dumps = orjson.loads, orjson.dumps
    decode_error, encode_error = orjson.JSONDecodeError, orjson.JSONEncodeError
    limit = rules.max_line_bytes
    candidates: list[int] = []
    events: list[JsonObject] = []
    deferred: list[int] = []
    for offset, piece in enumerate(pieces):
        try:
            event = loads(piece) if len(piece) <= limit else None
            vouched = type(event) is dict and dumps(event) == piece
        except (decode_error, encode_error):  # not JSON, or too deep to serialise: parse_event says which
            vouched = False
        if vouched:
            candidates.append(offset)
            events.append(event)  # type: ignore[arg-type]  # vouched: a dict
        else:
            deferred.append(offset)
    keys = _keys(events, rules)
    times = _times([event.get(rules.time_field) for event in events], rules)
    accepted = keys.ok & times.ok
    order_keys = _order_keys(events, times.micros, accepted, rules)
    _check_columns(events, accepted, rules)
    rows = np.flatnonzero(accepted)
    deferred.extend(candidates[i] for i in np.flatnonzero(~accepted).tolist())
    deferred.sort()
    everything = len(rows) == len(events)  # the common case: no per-row selection below
    row_list = rows.tolist()
    chosen = events if everything else [events[i] for i in row_list]
    numbers = line_numbers[np.asarray(candidates, np.int64)[rows]]
    table = pa.table({
        "seq": pa.array(make_seq(np.full(len(numbers), input_index, np.int64), numbers), pa.int64()),
        "event_id": keys.texts_of(rows),
        "key_digest": pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(KEY_DIGEST_BYTES), len(rows), [None, pa.py_buffer(keys.digests[rows].tobytes())]),
        "fingerprint": pa.array(fingerprint_digests(chosen, rules.fingerprint), pa.uint64()),
        "event_time": pa.array(times.micros[rows], pa.int64()).cast(CHUNK_SCHEMA.field("event_time").type),
        "raw": pa.array(list(pieces) if everything and not deferred else [pieces[candidates[i]] for i in row_list],
                        pa.string()),
        "order_key": pa.nulls(len(rows), pa.binary()) if order_keys is None
        else pa.array([order_keys[i] for i in row_list], pa.binary()),
    }, schema=CHUNK_SCHEMA)
    return table, deferred


@dataclass(frozen=True)
class _Keys:
    texts: pa.Array  # the key text where it was derived natively, else null
    other_texts: dict[int, str]  # the key text of every other event whose key was derived here
    digests: np.ndarray  # S16, one per event
    ok: np.ndarray  # bool: key derived here, exactly as parse_event would

    def texts_of(self, rows: np.ndarray) -> pa.Array:
        texts = self.texts.take(pa.array(rows, pa.int64()))
        if not self.other_texts:
            return texts
        as_list = texts.to_pylist()
        for position, row in enumerate(rows.tolist()):
            if row in self.other_texts:
                as_list[position] = self.other_texts[row]
        return pa.array(as_list, pa.string())


# A string holding one of these is certainly not blank (Python's strip() removes no ASCII letter
# or digit).
_NOT_BLANK = "[0-9A-Za-z]"
# What Python's str.strip() removes from an ASCII string (str.isspace: the information
# separators \x1c-\x1f too); Unicode-wide beyond ASCII, so only ASCII ids are trimmed here.
_ASCII_STRIPPED = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"


def _keys(events: list[JsonObject], rules: ParseRules) -> _Keys:
    """Key text and digest per event, natively where each key field's value is a string or an
    integer (_field_texts): a one-field key that is a canonical UUID is its own 16 bytes; any
    other key text, a composite key's JSON array included, is hashed in one tight loop (the
    reference's per-event path cost 1.5-4 us an event more). Everything else (blank, huge or
    non-string ids, non-ASCII ids to normalise, composite parts JSON must escape) goes through
    dedup_key_text, as parse_event does."""
    count = len(events)
    digests = np.zeros(count, DIGEST_DTYPE)
    parts = [_field_texts([event.get(field) for event in events], rules) for field in rules.key_fields]
    if len(parts) == 1:
        texts = parts[0]
        is_uuid = pc.fill_null(pc.match_substring_regex(texts, CANONICAL_UUID_PATTERN), False)
        uuid_rows = np.flatnonzero(is_uuid.to_numpy(zero_copy_only=False))
        digests[uuid_rows] = canonical_uuid_bytes(texts.take(pa.array(uuid_rows, pa.int64()))).view(DIGEST_DTYPE)[:, 0]
        hashed = pc.and_(pc.invert(is_uuid), pc.is_valid(texts))
    else:
        # dedup_key_text's JSON array of the parts, spelt here where no part needs JSON escaping
        # (orjson escapes only '"', '\\' and U+0000-U+001F); never a canonical UUID.
        plain = [pc.if_else(pc.fill_null(pc.match_substring_regex(part, _JSON_ESCAPED), True),
                            pa.scalar(None, pa.string()), part) for part in parts]
        texts = pc.binary_join_element_wise(pa.scalar('["'), pc.binary_join_element_wise(*plain, '","'),
                                            pa.scalar('"]'), "")
        hashed = pc.is_valid(texts)
    hashed_rows = np.flatnonzero(hashed.to_numpy(zero_copy_only=False))
    digests[hashed_rows] = _hashed_keys(texts.take(pa.array(hashed_rows, pa.int64())))
    ok = pc.is_valid(texts).to_numpy(zero_copy_only=False).copy()
    other_texts: dict[int, str] = {}
    for i in np.flatnonzero(~ok).tolist():
        try:
            text = dedup_key_text(events[i], rules)
        except InvalidEvent:
            continue  # parse_event reports it
        other_texts[i], digests[i], ok[i] = text, key_digest(text), True
    return _Keys(texts, other_texts, digests, ok)


# A character orjson escapes in a string (so a composite key's text is not the parts as they are).
_JSON_ESCAPED = r'["\\\x00-\x1f]'


def _field_texts(values: list[Any], rules: ParseRules) -> pa.Array:
    """normalize_event_id's text of each value where it is derived natively, else null: a string
    that is not blank, normalised (when the key is, and only if it is ASCII), and an integer's
    decimal digits (under any normalisation, as normalize_event_id says)."""
    strings = _normalised(_string_array(values), rules)
    not_blank = pc.fill_null(pc.match_substring_regex(strings, _NOT_BLANK), False)
    texts = pc.if_else(not_blank, strings, pa.scalar(None, pa.string()))
    integer_rows = [row for row in np.flatnonzero(pc.is_null(texts).to_numpy(zero_copy_only=False)).tolist()
                    if type(values[row]) is int and -(2**63) <= values[row] < 2**63]
    if integer_rows:
        mask = np.zeros(len(values), bool)
        mask[integer_rows] = True
        decimal = pa.array([values[row] for row in integer_rows], pa.int64()).cast(pa.string())
        texts = pc.replace_with_mask(texts, pa.array(mask), decimal)
    return texts


def _normalised(strings: pa.Array, rules: ParseRules) -> pa.Array:
    """Key strings as normalize_event_id normalises them, for ASCII strings; any other string of
    a normalised key becomes null (its line goes the reference way). A string holding no ASCII
    letter or digit may be blank and is refused later by _NOT_BLANK, as before normalising."""
    if not (rules.trim or rules.lower):
        return strings
    strings = pc.if_else(pc.fill_null(pc.string_is_ascii(strings), False), strings, pa.scalar(None, pa.string()))
    if rules.trim:
        strings = pc.ascii_trim(strings, characters=_ASCII_STRIPPED)
    return pc.ascii_lower(strings) if rules.lower else strings


def _hashed_keys(strings: pa.Array) -> np.ndarray:
    """keys.key_digest of key texts that are not canonical UUIDs, from their UTF-8 bytes."""
    return hashed_key_digests(strings.cast(pa.binary()).to_pylist())


def _string_array(values: list[Any]) -> pa.Array:
    """Strings stay, anything else becomes null (its line goes the reference way)."""
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([v if type(v) is str else None for v in values], pa.string())


@dataclass(frozen=True)
class _Times:
    micros: np.ndarray  # int64 microseconds since the epoch, UTC
    ok: np.ndarray  # bool: parsed here, inside [min, max]


def _times(values: list[Any], rules: ParseRules) -> _Times:
    """Microseconds per value: natively for strict ISO-8601 strings (and those one step from it:
    a longer fraction, a space for the T, an offset without its colon) and for epoch numbers,
    JSON's or written as digits (seconds or milliseconds, by the reference's threshold);
    anything else is left to parse_event."""
    strings = _string_array(values)
    strict = pc.fill_null(pc.match_substring_regex(strings, STRICT_ISO_RE), False)
    micros = np.zeros(len(values), np.int64)
    ok = strict.to_numpy(zero_copy_only=False).copy()
    _convert_strict(strings, np.flatnonzero(ok), micros, ok)
    others = np.flatnonzero(~ok)
    if len(others):
        _near_strict(strings, others, micros, ok)
        others = np.flatnonzero(~ok)
    if len(others):
        epoch_rows, epoch_micros = _epoch_numbers(values, others)
        micros[epoch_rows], ok[epoch_rows] = epoch_micros, True
    ok &= (micros >= rules.min_time_us) & (micros <= rules.max_time_us)
    return _Times(micros, ok)


def _near_strict(strings: pa.Array, rows: np.ndarray, micros: np.ndarray, ok: np.ndarray) -> None:
    """Of `rows`, ISO-8601 strings one step from the strict shape, as datetime.fromisoformat reads
    them: a space between date and time (it takes any one character there), a fraction of
    seconds past microseconds (Go's and Java's nanoseconds), cut to 6 digits as it cuts it, and
    an offset written +hhmm or +hh. Each is rewritten to the strict shape and converted as that
    is."""
    near = strings.take(pa.array(rows, pa.int64()))
    near = pc.replace_substring_regex(near, _SPACE_FOR_T, r"\1T", max_replacements=1)
    near = pc.replace_substring_regex(near, _LONG_FRACTION, r"\1", max_replacements=1)
    near = pc.replace_substring_regex(near, _COMPACT_OFFSET, r"\1:\2", max_replacements=1)
    near = pc.replace_substring_regex(near, _HOURS_OFFSET, r"\1:00", max_replacements=1)
    strict = pc.fill_null(pc.match_substring_regex(near, STRICT_ISO_RE), False).to_numpy(zero_copy_only=False)
    found = np.flatnonzero(strict)
    found_micros, found_ok = np.zeros(len(rows), np.int64), np.zeros(len(rows), bool)
    _convert_strict(near, found, found_micros, found_ok)
    micros[rows[found_ok]], ok[rows[found_ok]] = found_micros[found_ok], True


def _convert_strict(strings: pa.Array, rows: np.ndarray, micros: np.ndarray, ok: np.ndarray) -> None:
    """Arrow's conversion of strict ISO-8601 `rows` into `micros`, each marked in `ok` or not. A
    string of the strict shape can still be no instant (30 February): Arrow then refuses the
    whole array, so the rows are halved until the refused ones are alone, and those are left
    unmarked for the reference parser to name; one bad date no longer sends its whole chunk
    the slow way."""
    if not len(rows):
        return
    try:
        parsed = pc.cast(strings.take(pa.array(rows, pa.int64())), pa.timestamp("us", tz="UTC"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        ok[rows] = False
        if len(rows) > 1:
            half = len(rows) // 2
            _convert_strict(strings, rows[:half], micros, ok)
            _convert_strict(strings, rows[half:], micros, ok)
        return
    micros[rows] = parsed.cast(pa.int64()).to_numpy(zero_copy_only=False)
    ok[rows] = True


# Epoch numbers converted here: beyond this magnitude (in milliseconds) microseconds would leave
# int64's 9.22e18 (no such instant is accepted anyway); those lines go the reference way.
_MAX_EPOCH_NUMBER = 9 * 10**15
# Epoch digits as the reference reads them (ASCII only), short enough to be within the bound or
# just past it; longer ones go the reference way.
_EPOCH_DIGITS = re.compile(r"-?[0-9]{1,16}")


def _epoch_numbers(values: list[Any], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of `rows`, those whose value is an epoch number within bounds, and each one's microseconds
    exactly as parse_event_time computes them: milliseconds from EPOCH_MILLIS_THRESHOLD in
    magnitude up, seconds below. A JSON integer (not a boolean) or a string of its digits with
    no space around (the reference strips spaces, and then reads the same digits) is exact; a
    finite float is scaled in float64 and rounded half to even, as Python's round() does."""
    integers: list[int] = []
    whole_values: list[int] = []
    floats: list[int] = []
    for row in rows.tolist():
        value = values[row]
        if type(value) is str and _EPOCH_DIGITS.fullmatch(value):
            value = int(value)
        if type(value) is int and -_MAX_EPOCH_NUMBER <= value <= _MAX_EPOCH_NUMBER:
            integers.append(row)
            whole_values.append(value)
        elif type(value) is float and -_MAX_EPOCH_NUMBER <= value <= _MAX_EPOCH_NUMBER:  # NaN, inf fail it
            floats.append(row)
    whole = np.array(whole_values, np.int64)
    millis = np.abs(whole) >= EPOCH_MILLIS_THRESHOLD
    whole_micros = np.empty(len(whole), np.int64)  # each unit's product only where it stays in int64
    whole_micros[millis] = whole[millis] * 1_000
    whole_micros[~millis] = whole[~millis] * 1_000_000
    fractional = np.array([values[row] for row in floats], np.float64)
    scaled = np.where(np.abs(fractional) >= EPOCH_MILLIS_THRESHOLD, fractional * 1_000.0, fractional * 1_000_000.0)
    return (np.array(integers + floats, np.intp),
            np.concatenate([whole_micros, np.rint(scaled).astype(np.int64)]))


def _without_mismatches(table: pa.Table, pieces: Sequence[bytes], scanned: native_core.NativeScan,
                        rules: ParseRules) -> tuple[pa.Table, npt.NDArray[np.int64]]:
    """Under on_mismatch = "quarantine": the compiled core's rows (one per offset) less those with a
    declared value that does not fit, and those rows' offsets, for the reference parser to
    quarantine with the reason (the core checked each value as it vouched for the line:
    eventdedup.parse.columns_fast.refused_rows)."""
    offsets = scanned.offsets

    def event_of(row: int) -> Any:  # the rows the reference decides: parsed again (few)
        return orjson.loads(pieces[int(offsets[row])])

    refused = refused_rows(scanned.columns, len(offsets), rules.checked_columns, event_of)
    if not refused:
        return table, offsets[:0]
    return table.take(pa.array(np.delete(np.arange(table.num_rows), refused), pa.int64())), offsets[refused]


def _check_columns(events: list[JsonObject], accepted: np.ndarray, rules: ParseRules) -> None:
    """Under on_mismatch = "quarantine", an accepted event with a declared value that does not fit is
    not accepted here (parse_event quarantines it with the reason); else nothing to check."""
    if not rules.checked_columns:
        return
    for i in np.flatnonzero(accepted).tolist():
        try:
            event_columns(events[i], rules.checked_columns, quarantine=True)
        except InvalidEvent:
            accepted[i] = False


def _order_keys(events: list[JsonObject], micros: np.ndarray, accepted: np.ndarray,
                rules: ParseRules) -> list[bytes | None] | None:
    if rules.survivor_field is None:
        return None
    keys: list[bytes | None] = [None] * len(events)
    for i in np.flatnonzero(accepted).tolist():
        try:
            keys[i] = order_key_for(events[i], int(micros[i]), rules)
        except InvalidEvent:
            accepted[i] = False  # parse_event quarantines it with the reason
    return keys
