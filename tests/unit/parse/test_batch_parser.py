"""The vectorised object parser must agree with the line-by-line reference on every line:
the same rows (seq, key text, key bytes, fingerprint, time, raw, order key) and the same
quarantine (raw bytes, reason, line number)."""
from __future__ import annotations

import dataclasses
import gzip
import uuid
from datetime import datetime, timezone

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventdedup.config import FINGERPRINT_BLAKE2B, NEW_STORE_FINGERPRINT, config_from_mapping
from eventdedup.keys import key_digest
from eventdedup.parse.event_parser import InvalidEvent, dedup_key_text, normalize_event_id, parse_event
from eventdedup.parse.input_lines import iter_input_lines
from eventdedup.parse.object_parser import parse_object
from eventdedup.parse.rules import ParseRules
from eventdedup.tables import make_seq

from ...support.parse_fallback import no_line_by_line_fallback

AS_OF = datetime(2026, 11, 22, 5, 0, tzinfo=timezone.utc)
INPUT_INDEX = 3


def rules_with(events: dict | None = None, fingerprint_hash: str = NEW_STORE_FINGERPRINT, **dedup: object) -> ParseRules:
    mapping = {"s3": {"bucket": "bkt"}, "dedup": dedup, "events": events or {}}
    return ParseRules.for_batch(config_from_mapping(mapping), AS_OF, fingerprint_hash=fingerprint_hash)


RULE_SETS = {
    "default": rules_with(),
    "normalised": rules_with(normalize=["trim", "lower"]),
    "lower-cased only": rules_with(normalize=["lower"]),
    "trimmed only": rules_with(normalize=["trim"]),
    "time as key": rules_with(key_fields=["created_at"]),
    "composite": rules_with(key_fields=["event_id", "user"]),
    "composite normalised": rules_with(key_fields=["event_id", "user"], normalize=["trim", "lower"]),
    "fingerprint fields": rules_with(fingerprint_fields=["event_id", "n"], fingerprint_exclude=["n"]),
    # a cache made before the fingerprint hash was part of its identity
    "blake2b-64 cache": rules_with(fingerprint_hash=FINGERPRINT_BLAKE2B),
    "blake2b-64 cache, fingerprint fields": rules_with(fingerprint_hash=FINGERPRINT_BLAKE2B,
                                                       fingerprint_fields=["event_id", "n"]),
    "survivor max": rules_with(survivor="max:n", events={"max_line_bytes": 400}),
    "survivor by time": rules_with(survivor="min:created_at"),
    # every instant int64 microseconds hold is accepted: conversions are compared, not refusals
    "any time": dataclasses.replace(rules_with(), min_time_us=-(2**63), max_time_us=2**63 - 1),
}


def reference(body: bytes, rules: ParseRules) -> tuple[list[tuple], list[tuple]]:
    rows, bad = [], []
    for line in iter_input_lines(body):
        try:
            if line.error is not None:
                raise InvalidEvent(line.error)
            event = parse_event(line.raw, rules)
        except InvalidEvent as exc:
            bad.append((line.raw, str(exc), line.line_number))
            continue
        rows.append((make_seq(INPUT_INDEX, line.line_number), event.event_id, event.digest, event.fingerprint,
                     event.time_us, event.raw, event.order_key))
    return rows, bad


def fast(body: bytes, rules: ParseRules) -> tuple[list[tuple], list[tuple]]:
    """The batch parser's rows and findings; an exception inside the fast path (which it survives
    by parsing the chunk line by line, slow but equal) fails the test instead of hiding."""
    with no_line_by_line_fallback():
        parsed = parse_object(body, INPUT_INDEX, rules)
    table = parsed.table
    times = table.column("event_time").cast("int64").to_pylist()
    rows = list(zip(table.column("seq").to_pylist(), table.column("event_id").to_pylist(),
                    table.column("key_digest").to_pylist(), table.column("fingerprint").to_pylist(), times,
                    table.column("raw").to_pylist(), table.column("order_key").to_pylist(), strict=False))
    assert parsed.lines == sum(1 for _ in iter_input_lines(body))
    return rows, list(zip(parsed.bad_raw, parsed.bad_error, parsed.bad_line, strict=False))


UUID_TEXT = st.uuids().map(str)
IDS = st.one_of(
    UUID_TEXT, UUID_TEXT.map(str.upper), UUID_TEXT.map(lambda u: f" {u} "), UUID_TEXT.map(lambda u: u.replace("-", "")),
    st.text(max_size=6), st.integers(-5, 2**63 - 1), st.booleans(), st.none(), st.floats(allow_nan=False),
    st.integers(-(2**63), 2**64 - 1), st.sampled_from([2**63 - 1, 2**63, -(2**63), 0, -1]),  # int64 and past it
    st.lists(st.integers(-9, 9), max_size=2), st.just("   "),
    # blank or not by Python's strip(): Unicode and ASCII separators around letters, or alone
    st.text(alphabet=" \t\x1c\x85\u2003\u3000aZ9é-", max_size=5),
    # ASCII ids to trim and lower-case: every ASCII character Python's strip() removes, around
    # mixed-case text, and an upper-case UUID that is canonical only once normalised
    st.builds(lambda left, core, right: left + core + right, st.text(alphabet=" \t\n\r\x0b\x0c\x1c\x1f", max_size=2),
              st.text(alphabet="aZ9_ -\x1d", min_size=1, max_size=6), st.text(alphabet=" \t\x1e\x85", max_size=2)),
    UUID_TEXT.map(lambda u: f"\t{u.upper()}\x1c"),
)
TIMES = st.one_of(
    st.datetimes(min_value=datetime(1999, 1, 1), max_value=datetime(2026, 11, 23, 12),
                 timezones=st.sampled_from([timezone.utc])).map(lambda d: d.isoformat()),
    st.datetimes(min_value=datetime(2026, 11, 20), max_value=datetime(2026, 11, 22)).map(lambda d: d.isoformat() + "Z"),
    st.sampled_from(["2026-11-22T04:30:00.5+02:00", "2026-02-30T01:00:00Z", "2026-11-22 04:30:00Z",
                     "2026-11-22T04:30:00", "0000-01-01T00:00:00Z", "2026-11-22T24:00:00Z", "2026-11-22T04:30:00+24:00",
                     "2026-11-22T04:30:60Z", "1795321800", "2026-11-22T04:30:00.1234567Z", "２０２６-11-22T04:30:00Z"]),
    st.integers(0, 2 * 10**12), st.floats(allow_nan=True), st.none(), st.text(max_size=5),
    # epoch integers: both units, negative, at the seconds/milliseconds threshold and at and past
    # the bound of what the fast path converts; booleans are integers to Python but not times
    st.integers(-2 * 10**16, 2 * 10**16), st.integers(-(2**63), 2**64 - 1),  # all the JSON writer holds
    # epoch floats of both units, halves of a microsecond (rounding), and past the bound
    st.floats(-2e16, 2e16), st.integers(-(10**16), 10**16).map(lambda half_micros: half_micros / 2_000_000),
    st.integers(10**17, 10**19).map(lambda half_micros: half_micros / 2_000),
    # nanosecond fractions (Go, Java): cut to microseconds as the reference cuts them, valid or not
    st.builds(lambda moment, extra, zone: moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + extra + zone,
              st.datetimes(min_value=datetime(2026, 11, 20), max_value=datetime(2026, 11, 22)),
              st.text(alphabet="0123456789", min_size=1, max_size=14), st.sampled_from(["Z", "+05:30", "-00:00", ""])),
    st.sampled_from(["2026-02-30T04:30:00.1234567Z", "2026-11-22T04:30:00.1234567 Z", "2026-11-22T04:30:00.12345٦7Z"]),
    # a space or another character for the T (fromisoformat takes any one), nanoseconds or not
    st.builds(lambda moment, separator, zone: moment.date().isoformat() + separator + moment.time().isoformat() + zone,
              st.datetimes(min_value=datetime(2026, 11, 20), max_value=datetime(2026, 11, 22)),
              st.sampled_from([" ", "x", "  ", "\u3000"]), st.sampled_from(["Z", "+05:30", "", "123Z"])),
    # offsets without a colon (+hhmm) or without minutes (+hh), as fromisoformat reads them, valid or not
    st.builds(lambda moment, zone: moment.isoformat() + zone,
              st.datetimes(min_value=datetime(2026, 11, 20), max_value=datetime(2026, 11, 22)),
              st.sampled_from(["+0000", "-0530", "+1400", "+00", "-05", "+2400", "+0560", "+053", "+05:3", "+0530Z",
                               "+00:00:00", "+0530.5", "+٠٥٣٠", "+24", "-99", "+0599", "+05:60"])),
    st.sampled_from(["2026-11-22 04:30:00.123456789+0100", "2026-02-30T04:30:00-0000", "2026-11-22T04:30-0530",
                     "2026-11-22T04:30:00-05 ", "2026-11-22T04:30:00+05-05"]),
    # epoch digits as strings: both units, signs, spaces around, leading zeros, past the bound
    st.integers(-(10**17), 10**17).map(str), st.integers(0, 2 * 10**12).map(lambda n: f" {n}"),
    st.sampled_from(["0", "-0", "+1795321800", "0001795321800", "١٧٩٥٣٢١٨٠٠", "9000000000000000", "9000000000000001",
                     "-9000000000000000", "99999999999", "100000000000", "1795321800123 "]),
    st.sampled_from([99_999_999_999, 100_000_000_000, -99_999_999_999, -100_000_000_000, 9 * 10**15, 9 * 10**15 + 1,
                     -9 * 10**15, -9 * 10**15 - 1, 2**63, -(2**63), True, False, 1e11, -1e11, 99_999_999_999.5, 9e15]),
)


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    event: dict = {}
    for name in draw(st.permutations(["event_id", "created_at", "user", "n", "nested"])):
        if name == "event_id" and draw(st.integers(0, 9)):
            event[name] = draw(IDS)
        elif name == "created_at" and draw(st.integers(0, 9)):
            event[name] = draw(TIMES)
        elif name == "user" and draw(st.booleans()):
            # a composite key's part: what JSON escapes (quote, backslash, control characters) too
            event[name] = draw(st.one_of(st.text(max_size=4), IDS, st.text(alphabet='aZ"\\\x01\x1f é', max_size=4)))
        elif name == "n" and draw(st.booleans()):
            event[name] = draw(st.one_of(st.integers(-3, 3), st.floats(allow_nan=False), st.text(max_size=3),
                                         st.none(), st.lists(st.integers(-9, 9), max_size=1)))
        elif name == "nested" and draw(st.booleans()):
            event[name] = {"é": draw(st.text(max_size=3)), "list": [1, {"a": None}]}
    text = orjson.dumps(event)
    flavour = draw(st.sampled_from(["compact", "compact", "compact", "spaced", "repeat", "crlf", "garbage",
                                    "blank", "bad utf8", "array", "escaped", "long"]))
    if flavour == "spaced":
        return orjson.dumps(event, option=orjson.OPT_INDENT_2).replace(b"\n", b" ")
    if flavour == "repeat" and event:
        first = next(iter(event))
        return text[:-1] + b',"' + first.encode() + b'":1}'
    if flavour == "crlf":
        return text + b"\r"
    if flavour == "garbage":
        return text[:draw(st.integers(0, max(len(text) - 1, 0)))]
    if flavour == "blank":
        return draw(st.sampled_from([b"", b"  ", b"\t"]))
    if flavour == "bad utf8":
        return text.replace(b"{", b"{\xff", 1)
    if flavour == "array":
        return b"[" + text + b"]"
    if flavour == "escaped":
        return text.replace(b'"event_id"', b'"event\\u005fid"')
    if flavour == "long":
        return text[:-1] + b',"pad":"' + b"x" * 500 + b'"}' if len(text) > 2 else text
    return text


@pytest.mark.parametrize("name", list(RULE_SETS))
@given(body_lines=st.lists(lines(), max_size=25), ending=st.sampled_from([b"\n", b"", b"\n\n"]),
       packed=st.sampled_from(["plain", "gzip", "bom"]))
def test_fast_parse_equals_the_line_by_line_reference(name: str, body_lines: list[bytes], ending: bytes,
                                                      packed: str) -> None:
    rules = RULE_SETS[name]
    body = b"\n".join(body_lines) + ending
    if packed == "gzip":
        body = gzip.compress(body, mtime=0)
    elif packed == "bom":
        body = b"\xef\xbb\xbf" + body
    assert fast(body, rules) == reference(body, rules)


def test_a_large_clean_object_goes_the_fast_way_and_keeps_input_order() -> None:
    ids = [str(uuid.UUID(int=i * 7919 + 1, version=4)) for i in range(40_000)]
    body = b"".join(orjson.dumps({"event_id": i, "created_at": "2026-11-22T04:30:00.000001Z", "k": n}) + b"\n"
                    for n, i in enumerate(ids))
    rows, bad = fast(body, RULE_SETS["default"])
    assert bad == []
    assert [row[1] for row in rows] == ids
    assert [row[2] for row in rows] == [uuid.UUID(i).bytes for i in ids]
    assert rows == reference(body, RULE_SETS["default"])[0]


def test_common_id_and_time_shapes_take_the_fast_path_and_one_bad_date_defers_only_its_line() -> None:
    """Which lines the fast path defers to the reference: none of the shapes real streams send
    (a cliff of ~4x a line otherwise, which equality alone cannot see), only the impossible date."""
    from eventdedup.parse.object_parser import _parse_chunk

    ids = ["2565efed-5f98-4e0f-974f-5ba728b56b59", "2565EFED-5F98-4E0F-974F-5BA728B56B59", "evt_01HZX3", 4711, -3]
    times = ["2026-11-22T04:30:00.123456Z", "2026-11-22T04:30:00.123456789+01:00", "2026-11-22T04:30:00Z",
             "2026-11-22 04:30:00.123Z", 1795321800, 1795321800123, 1795321800.25, "1795321800123"]
    pieces = [orjson.dumps({"event_id": key, "created_at": moment, "n": n})
              for n, (key, moment) in enumerate((key, moment) for key in ids for moment in times)]
    bad = len(pieces) // 2
    pieces[bad] = orjson.dumps({"event_id": "x", "created_at": "2026-02-30T04:30:00Z"})
    rules = RULE_SETS["default"]
    table, deferred = _parse_chunk(pieces, 1, INPUT_INDEX, rules)
    assert deferred == [bad]
    assert table.num_rows == len(pieces) - 1


@pytest.mark.parametrize("name", ["normalised", "lower-cased only", "trimmed only"])
def test_normalised_ascii_ids_and_offsets_without_a_colon_take_the_fast_path(name: str) -> None:
    """Normalised keys and compact offsets are common in real streams; each used to cost ~4x a
    line on the reference path (dedup_key_text per event; parse_event per line). Non-ASCII ids
    still go that way (Python's strip() and lower() are Unicode-wide)."""
    from eventdedup.parse.object_parser import _keys, _parse_chunk

    ascii_ids = [" 2565EFED-5F98-4E0F-974F-5BA728B56B59\t", "Evt_01HZX3", "\x1cUser-42 ", "abc"]
    times = ["2026-11-22T04:30:00+0000", "2026-11-22T04:30:00.5-0530", "2026-11-22T04:30:00+01",
             "2026-11-22 04:30:00.123456789+0100"]
    events = [{"event_id": key, "created_at": moment} for key in ascii_ids for moment in times]
    events.append({"event_id": " Évt ", "created_at": times[0]})
    rules = RULE_SETS[name]
    keys = _keys(events, rules)
    assert keys.ok.all()
    assert keys.other_texts == {len(events) - 1: normalize_event_id(" Évt ", "event_id", rules.trim, rules.lower)}
    table, deferred = _parse_chunk([orjson.dumps(event) for event in events], 1, INPUT_INDEX, rules)
    assert deferred == []
    body = b"\n".join(orjson.dumps(event) for event in events)
    assert fast(body, rules) == reference(body, rules)


EPOCH_EDGES = [0, 1, -1, 99_999_999_999, 100_000_000_000, -99_999_999_999, -100_000_000_000, 9 * 10**15, -9 * 10**15,
               0.0, -0.0, 0.5e-6, 1.5e-6, 2.5e-6, 1e11, -1e11, 99_999_999_999.5, 99_999_999_999.9999, 1795321800.0000005,
               1795321800123.4995, 1795321800123.5005, 9e15, -9e15, "99999999999", "100000000000", "-0",
               "0001795321800", "9000000000000000", "-9000000000000000"]


@pytest.mark.parametrize("moment", EPOCH_EDGES)
def test_an_epoch_number_at_an_edge_is_converted_natively_as_the_reference_converts_it(moment: float | str) -> None:
    """Deterministic edges of the native epoch path (the unit threshold, rounding halves, the
    bound) on top of the property test's random draws."""
    from eventdedup.parse.object_parser import _parse_chunk

    line = orjson.dumps({"event_id": "2565efed-5f98-4e0f-974f-5ba728b56b59", "created_at": moment})
    rules = RULE_SETS["any time"]
    table, deferred = _parse_chunk([line], 1, INPUT_INDEX, rules)
    assert deferred == []
    assert table.column("event_time").cast("int64").to_pylist() == [parse_event(line, rules).time_us]


@pytest.mark.parametrize("name", ["composite", "composite normalised"])
def test_composite_keys_of_plain_parts_are_spelt_natively(name: str) -> None:
    """A composite key's text is the JSON array of its parts (dedup_key_text); spelt natively
    unless a part is one JSON escapes (a quote, a backslash, a control character) or is derived
    per event for a one-field key too (non-ASCII under normalize)."""
    from eventdedup.parse.object_parser import _keys

    parts = [("2565efed-5f98-4e0f-974f-5ba728b56b59", "u1"), ("Evt-1", 42), (7, " Ünï "), (" A ", "x\x1f"),
             ("q\"uote", "b"), ("back\\slash", "c"), ("é\u2028x", "d")]
    events = [{"event_id": key, "user": user} for key, user in parts]
    rules = RULE_SETS[name]
    keys = _keys(events, rules)
    # the quote and the backslash always; the control character unless trimmed away; non-ASCII
    # parts (Ünï, U+2028, which JSON does not escape) only under normalisation
    per_event = {2, 4, 5, 6} if rules.lower else {3, 4, 5}
    assert set(keys.other_texts) == per_event
    assert keys.ok.all()
    texts = keys.texts_of(np.arange(len(events)))
    assert texts.to_pylist() == [dedup_key_text(event, rules) for event in events]
    assert [bytes(d) for d in keys.digests] == [key_digest(dedup_key_text(event, rules)) for event in events]


# Parts that are ids (an ASCII letter first) holding what JSON escapes, Unicode and spaces.
ESCAPED_PARTS = st.builds(lambda first, rest: first + rest, st.sampled_from(["a", "Z", " 9"]),
                          st.text(alphabet='"\\\x01\x1f é\u2028aZ', max_size=4))


@pytest.mark.parametrize("name", ["composite", "composite normalised"])
@given(parts=st.lists(st.tuples(st.one_of(IDS, ESCAPED_PARTS), ESCAPED_PARTS), min_size=1, max_size=20))
def test_composite_keys_of_any_parts_equal_the_reference(name: str, parts: list[tuple]) -> None:
    """The whole-line property test rarely draws a valid line whose parts JSON escapes; here
    every line is valid but for its key's parts."""
    body = b"\n".join(orjson.dumps({"event_id": key, "user": user, "created_at": "2026-11-22T04:30:00Z"})
                      for key, user in parts)
    rules = RULE_SETS[name]
    assert fast(body, rules) == reference(body, rules)
