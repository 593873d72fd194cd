"""The compiled parse core (native/parse_core.cpp) against the reference parser: every line the
core vouches for must give exactly parse_event's row (key text, key digest, fingerprint, time,
raw line), for any bytes and any rules. The expectation is always parse_event's, never the
core's. The core may leave any line to the Python paths; the coverage tests hold it to vouching
for the shapes it documents, so these tests cannot pass by vouching for nothing.

Hypothesis draws arbitrary bytes, mutated valid lines, JSON events serialised by orjson and by
json in several spellings, key and time values in every shape near the ones the core accepts,
deep nesting, repeated keys, floats at the edges of fixed notation and escapes; rules vary the
key (one field or composite), normalisation, the fingerprint's fields, exclusions and hash, the
time bounds and the line limit. fuzz/ runs the same check coverage-guided; a short run of it is
test_atheris_short_run.
"""
from __future__ import annotations

import dataclasses
import json
import random
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from unittest import mock

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventdedup.config import FINGERPRINT_HASHES
from eventdedup.parse import native_core, object_parser
from eventdedup.parse.event_parser import InvalidEvent, parse_event
from eventdedup.parse.fingerprints import FingerprintRules
from eventdedup.parse.input_lines import iter_input_lines, split_input
from eventdedup.parse.rules import ParseRules
from eventdedup.tables import make_seq

from ...support.parse_fallback import no_line_by_line_fallback

pytestmark = pytest.mark.skipif(
    not native_core.available(),
    reason=f"the compiled parse core is not built ({native_core.why_not()}); `make venv` builds it")

REPO = Path(__file__).resolve().parents[3]
KEY, TIME = "event_id", "created_at"
INT64 = (-(2**63), 2**63 - 1)
WINDOW = (int(datetime(2000, 1, 1, tzinfo=timezone.utc).timestamp()) * 10**6,
          int(datetime(2026, 11, 23, tzinfo=timezone.utc).timestamp()) * 10**6)
ALGORITHMS = FINGERPRINT_HASHES  # BLAKE2b-64 and XXH3-64: the core computes both
KEY_FIELD_SETS = [(KEY,), (KEY, "user"), ("user", KEY), (TIME,), (KEY, KEY), ("\u00efd",), ("n",)]
FINGERPRINT_SETS = [((), ()), ((KEY, "n", "p"), ()), ((), ("n", TIME)), ((KEY, "n"), ("n",)), (("absent",), ())]
UUID_TEXT = "0190f3a4-5b6c-7d8e-9f01-23456789abcd"
AT = "2026-11-22T04:30:00Z"
MAIN_LINE = orjson.dumps({
    KEY: UUID_TEXT, TIME: AT, "user": "u-42", "type": "page_view",
    "page": {"url": "https://example.com/a?b=1", "title": 'Caf\u00e9 "menu"'},
    "ctx": {"z": 1, "a": [1.5, -0.25, None, True]}, "n": 7})

Row = tuple[str, bytes, int, int, str]


def rules_of(key_fields: tuple[str, ...] = (KEY,), *, trim: bool = False, lower: bool = False,
             fingerprint: tuple[tuple[str, ...], tuple[str, ...]] = ((), ()), algorithm: str = "blake2b-64",
             bounds: tuple[int, int] = WINDOW, max_line_bytes: int = 1_048_576) -> ParseRules:
    return ParseRules(key_fields=key_fields, time_field=TIME, min_time_us=bounds[0], max_time_us=bounds[1],
                      max_line_bytes=max_line_bytes, fingerprint=FingerprintRules(*fingerprint, algorithm),
                      trim=trim, lower=lower)


RULES = st.builds(rules_of, key_fields=st.sampled_from(KEY_FIELD_SETS), trim=st.booleans(), lower=st.booleans(),
                  fingerprint=st.sampled_from(FINGERPRINT_SETS), algorithm=st.sampled_from(ALGORITHMS),
                  bounds=st.sampled_from([INT64, WINDOW]), max_line_bytes=st.sampled_from([1_048_576, 1_048_576, 120]))
RULE_SETS = {
    "default": rules_of(), "composite": rules_of((KEY, "user")), "trim and lower": rules_of(trim=True, lower=True),
    "lower": rules_of(lower=True), "fingerprint fields": rules_of(fingerprint=((KEY, "n", "p"), ())),
    "fingerprint exclude": rules_of(fingerprint=((), ("n", TIME))),
    **{f"{algorithm}, any time": rules_of(algorithm=algorithm, bounds=INT64) for algorithm in ALGORITHMS}}


def core_rows(lines: Sequence[bytes], rules: ParseRules) -> dict[int, Row]:
    """The rows the core vouches for, by the offset of their line."""
    assert native_core.supports(rules)
    scanned = native_core.scan(lines, rules)
    table = scanned.table_without_seq
    table.validate(full=True)  # UTF-8 in its string columns
    offsets = scanned.offsets.tolist()
    assert offsets == sorted(set(offsets)) and table.num_rows == len(offsets)
    assert table.column("order_key").null_count == table.num_rows
    return dict(zip(offsets, zip(
        table.column("event_id").to_pylist(), table.column("key_digest").to_pylist(),
        table.column("fingerprint").to_pylist(), table.column("event_time").cast("int64").to_pylist(),
        table.column("raw").to_pylist(), strict=True), strict=True))


def reference_row(line: bytes, rules: ParseRules) -> Row:
    event = parse_event(line, rules)
    return event.event_id, event.digest, event.fingerprint, event.time_us, event.raw


def assert_core_agrees(lines: list[bytes], rules: ParseRules) -> set[int]:
    """Every line the core vouches for has parse_event's row; the offsets it vouched for."""
    vouched = core_rows(lines, rules)
    for offset, row in vouched.items():
        line = lines[offset]
        try:
            expected = reference_row(line, rules)
        except InvalidEvent as exc:
            pytest.fail(f"the core vouched for a line parse_event refuses ({exc}): {line!r} under {rules}")
        assert row == expected, f"the core's row for {line!r} under {rules}"
    return set(vouched)


def assert_bounds_decide_alone(line: bytes, rules: ParseRules) -> None:
    """Around the instant parse_event reads from `line`, the bounds decide alone: the core vouches
    under [t, t] exactly where it does under the widest bounds, and never a microsecond outside."""
    wide = dataclasses.replace(rules, min_time_us=INT64[0], max_time_us=INT64[1])
    try:
        moment = parse_event(line, wide).time_us
    except InvalidEvent:
        return
    vouched_wide = bool(assert_core_agrees([line], wide))
    for low, high in ((moment, moment), (moment + 1, INT64[1]), (INT64[0], moment - 1)):
        if low <= high:
            vouched = bool(assert_core_agrees([line], dataclasses.replace(rules, min_time_us=low, max_time_us=high)))
            assert vouched == (vouched_wide and low == moment == high), (line, low, high)


# ---------------------------------------------------------------------------------------------
# What the core must vouch for: the main workload line and each shape it documents.

@pytest.mark.parametrize("name", RULE_SETS)
def test_the_main_workload_line_is_vouched_for_with_parse_events_row(name: str) -> None:
    assert assert_core_agrees([MAIN_LINE], RULE_SETS[name]) == {0}


def event_line(time: str = f'"{AT}"', key: str = f'"{UUID_TEXT}"', rest: str = ',"user":"u-42","n":7') -> bytes:
    return f'{{"event_id":{key},"created_at":{time}{rest}}}'.encode()


def nested(depth: int, inner: str = "1") -> str:
    return '{"b":2,"a":' * depth + inner + "}" * depth


DOCUMENTED_SHAPES = {
    "iso Z": (event_line(), rules_of()),
    "iso +hh:mm": (event_line('"2026-11-22T10:00:00+05:30"'), rules_of()),
    "iso -hhmm": (event_line('"2026-11-21T23:00:00-0530"'), rules_of()),
    "iso +hh": (event_line('"2026-11-22T09:30:00+05"'), rules_of()),
    "iso space": (event_line('"2026-11-22 04:30:00Z"'), rules_of()),
    **{f"iso fraction of {size}": (event_line(f'"2026-11-22T04:30:00.{"987654321012"[:size]}Z"'), rules_of())
       for size in range(1, 13)},
    "iso year 1000": (event_line('"1000-01-01T00:00:00Z"'), rules_of(bounds=INT64)),
    "iso year 9999": (event_line('"9999-12-31T23:59:59Z"'), rules_of(bounds=INT64)),
    "iso leap day": (event_line('"2024-02-29T00:00:00Z"'), rules_of()),
    "epoch seconds text": (event_line('"1795321800"'), rules_of()),
    "epoch milliseconds text": (event_line('"1795321800123"'), rules_of()),
    "epoch seconds": (event_line("1795321800"), rules_of()),
    "epoch milliseconds": (event_line("1795321800123"), rules_of()),
    "epoch below the threshold": (event_line("99999999999"), rules_of(bounds=INT64)),
    "epoch at the threshold": (event_line("100000000000"), rules_of(bounds=INT64)),
    "epoch at 9e15": (event_line("9000000000000000"), rules_of(bounds=INT64)),
    "epoch negative": (event_line("-100000000000"), rules_of(bounds=INT64)),
    "epoch float seconds": (event_line("1795321800.123456"), rules_of()),
    "epoch float half": (event_line("1795321800.0000005"), rules_of()),
    "epoch float milliseconds": (event_line("1795321800123.5"), rules_of()),
    "integer key": (event_line(key="12345"), rules_of()),
    "u64 key": (event_line(key="18446744073709551615"), rules_of()),
    "i64 min key": (event_line(key="-9223372036854775808"), rules_of()),
    "upper-case uuid": (event_line(key=f'"{UUID_TEXT.upper()}"'), rules_of()),
    "upper-case uuid lowered": (event_line(key=f'"{UUID_TEXT.upper()}"'), rules_of(lower=True)),
    "ulid": (event_line(key='"01ARZ3NDEKTSV4RRFFQ69G5FAV"'), rules_of()),
    "trimmed": (event_line(key='"  Abc-1  "'), rules_of(trim=True)),
    "trimmed and lowered": (event_line(key='" Abc-1 "'), rules_of(trim=True, lower=True)),
    "non-ascii key": (event_line(key='"\u00e9t\u00e9-1"'), rules_of()),
    "non-ascii trimmed and lowered": (event_line(key='"\u3000\u00c9T\u00c9-\u0130-\U00010400\u00a0"'),
                                      rules_of(trim=True, lower=True)),
    "composite": (event_line(), rules_of((KEY, "user"))),
    "composite with an integer": (event_line(key="12"), rules_of(("user", KEY))),
    "time as key": (event_line(), rules_of((TIME,))),
    "unsorted nested payload": (event_line(rest=',"p":{"z":[{"y":1,"x":2}],"a":null},"b":false'), rules_of()),
    "escapes": (event_line(rest=',"s":"\\"\\\\\\b\\t\\n\\f\\r\\u0000\\u001f\x7f"'), rules_of()),
    "non-ascii payload": (event_line(rest=',"\u00e9":"\u4e2d\U0001f600","\u00e8":1'), rules_of()),
    "floats": (event_line(rest=',"f":[0.00001,9999999999999998.0,-0.0,0.30000000000000004,1.0]'), rules_of()),
    "fingerprint fields": (event_line(rest=',"p":{"b":1,"a":2},"n":3,"x":4'), rules_of(fingerprint=((KEY, "n", "p"), ()))),
    "fingerprint exclude": (event_line(rest=',"p":{"b":1,"a":2},"n":3'), rules_of(fingerprint=((), ("n", TIME)))),
    "same key in sibling objects": (event_line(rest=',"p":[{"a":1},{"a":2}],"q":{"a":{"a":1}}'), rules_of()),
    "nested 150 deep": (event_line(rest=',"p":' + nested(150)), rules_of()),
}


@pytest.mark.parametrize("name", DOCUMENTED_SHAPES)
def test_each_documented_shape_is_vouched_for_with_parse_events_row(name: str) -> None:
    line, rules = DOCUMENTED_SHAPES[name]
    for algorithm in ALGORITHMS:
        fingerprint = dataclasses.replace(rules.fingerprint, algorithm=algorithm)
        assert assert_core_agrees([line], dataclasses.replace(rules, fingerprint=fingerprint)) == {0}, name


def test_most_valid_lines_written_by_orjson_are_vouched_for() -> None:
    """Events a producer writes with orjson, keys and times in the documented shapes, varied
    payloads: the core vouches for nearly all of them (all when this was written), each with
    parse_event's row."""
    generator = random.Random(43)
    lines = [orjson.dumps(_valid_event(generator)) for _ in range(400)]
    for rules in RULE_SETS.values():
        vouched = assert_core_agrees(lines, rules)
        assert len(vouched) >= 0.98 * len(lines), (rules, [lines[i] for i in range(len(lines)) if i not in vouched][:3])


def _valid_event(generator: random.Random) -> dict[str, object]:
    moment = datetime(2026, 11, 22, tzinfo=timezone.utc) + timedelta(seconds=generator.uniform(0, 86_000))
    times: list[object] = [
        moment.isoformat().replace("+00:00", "Z"), moment.astimezone(timezone(timedelta(hours=-3))).isoformat(),
        moment.isoformat(sep=" ", timespec="milliseconds"), str(int(moment.timestamp())),
        int(moment.timestamp() * 1000), round(moment.timestamp(), 3)]
    ids: list[object] = [str(uuid.UUID(int=generator.getrandbits(128), version=4)), generator.randrange(2**63),
                         f"Order-{generator.randrange(10**6)}", "".join(generator.choices("0123456789ABCDEFGHJKMNPQRSTVWXYZ", k=26))]

    def payload(depth: int) -> object:
        kind = generator.randrange(8 if depth < 4 else 5)
        if kind == 0:
            return generator.choice(["plain", "caf\u00e9", 'q"uote', "tab\tnew\nline", "\u4e2d\u6587", ""])
        if kind == 1:
            return generator.randrange(-(2**63), 2**64)
        if kind == 2:
            return generator.uniform(-1e6, 1e6)
        if kind == 3:
            return generator.choice([None, True, False])
        if kind == 4:
            return generator.randrange(100)
        if kind in (5, 6):
            return {generator.choice("zyxabc") + str(k): payload(depth + 1) for k in range(generator.randrange(4))}
        return [payload(depth + 1) for _ in range(generator.randrange(4))]

    event: dict[str, object] = {"n": payload(0), "user": generator.choice(ids), "p": payload(0), "\u00efd": "x"}
    event.update({KEY: generator.choice(ids), TIME: generator.choice(times)})
    members = list(event.items())
    generator.shuffle(members)
    return dict(members)


CALENDAR_EDGES = ["1900-02-29", "2100-02-29", "1600-02-29", "2000-02-29", "2024-02-29", "2023-02-29", "2026-02-30",
                  "2026-04-31", "2026-12-31", "2026-13-01", "2026-00-01", "2026-01-00", "2026-01-32", "0999-12-31",
                  "1000-01-01", "9999-12-31"]
CLOCK_EDGES = ["00:00:00", "23:59:59", "24:00:00", "23:59:60", "23:60:00", "12:00:00.5", "12:00:00.9999999"]
OFFSET_EDGES = ["Z", "+00:00", "-00:00", "+23:59", "-23:59", "+24:00", "+00:60", "+0530", "-05", "z", ""]


@pytest.mark.parametrize("date", CALENDAR_EDGES)
def test_calendar_and_clock_edges_give_parse_events_row_where_vouched(date: str) -> None:
    """Invalid days (02-30, 02-29 of 1900 and 2100), leap days, hour 24, second 60, offsets at and
    past their range, years 0999-9999: every instant int64 holds accepted, and the window."""
    lines = [event_line(f'"{date}{separator}{clock}{offset}"') for separator in "T " for clock in CLOCK_EDGES
             for offset in OFFSET_EDGES]
    for bounds in (INT64, WINDOW):
        assert_core_agrees(lines, rules_of(bounds=bounds))


@pytest.mark.parametrize("number", ["99999999999", "100000000000", "100000000001", "9000000000000000", "9000000000000001",
                                    "9223372036854775", "9223372036854776", "10000000000000000", "99999999999.5",
                                    "100000000000.5", "0.0000005", "0.0000015", "1e11", "1.0e11", "9.0e15", "0", "-0"])
@pytest.mark.parametrize("sign", ["", "-"])
def test_epoch_edges_give_parse_events_row_where_vouched(number: str, sign: str) -> None:
    """Epoch numbers and digit strings at the seconds/milliseconds threshold, at the core's 9e15
    limit and where microseconds leave int64, halves (rounded to even)."""
    lines = [event_line(sign + number), event_line(f'"{sign}{number}"')]
    for bounds in (INT64, WINDOW):
        assert_core_agrees(lines, rules_of(bounds=bounds))


# ---------------------------------------------------------------------------------------------
# Differential properties: whatever the core vouches for is parse_event's row.

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
UUIDS = st.uuids().map(str)
# Code points where str.strip() and str.lower() are not ASCII's: Unicode spaces (and look-alikes
# that are not spaces), a lower() that grows (U+0130), the final sigma lower() reads by context,
# letters lowered to ASCII (Kelvin) or outside the BMP, titlecase and roman numerals.
UNICODE_ID_TEXT = st.text(alphabet="Ab-9 \u0085\u00a0\u1680\u2000\u2028\u202f\u205f\u3000\u180e\u200b\ufeff"
                                   "\u0130\u03a3\u03c3\u03c2\u0391\u1e9e\u212a\u2126\u01c5\u216b\u24b6\U00010400\u00c9",
                          min_size=1, max_size=6)
ID_VALUES = st.one_of(
    UUIDS, UUIDS.map(str.upper), UUIDS.map(lambda u: f" {u} "), st.text(CROCKFORD, min_size=26, max_size=26),
    st.integers(-(2**63), 2**64 - 1), st.integers(min_value=2**64, max_value=10**30), st.integers(max_value=-(2**63) - 1),
    st.sampled_from([0, -1, 2**63 - 1, 2**63, -(2**63), 2**64 - 1, 2**64]),
    st.booleans(), st.none(), st.floats(), st.lists(st.integers(), max_size=2),
    st.sampled_from(["", " ", "   ", "\t", "\u3000", "\x1c", "\x7f", "\u00a0", " a ", "A"]),
    st.text(alphabet=" \t\x1cAbZ9\u00e9\u4e2d\u3000\u2003-_\x7f", max_size=6),
    st.text(alphabet='a"\\\n\x00\x1f/', min_size=1, max_size=4), st.text(max_size=8), UNICODE_ID_TEXT)


@st.composite
def iso_texts(draw: st.DrawFn) -> str:
    """ISO-8601 text near the shapes the core reads: every offset form, fractions of 0-12 digits,
    invalid dates (02-30, month 13), leap days, hour 24, second 60, years 0999 to 9999."""
    year = draw(st.sampled_from([999, 1000, 1001, 1970, 2000, 2023, 2024, 2026, 9999]) | st.integers(1000, 9999))
    month = draw(st.integers(1, 12) | st.sampled_from([0, 2, 13]))
    day = draw(st.integers(1, 28) | st.sampled_from([0, 29, 30, 31, 32]))
    clock = (draw(st.integers(0, 23) | st.just(24)), draw(st.integers(0, 59) | st.just(60)),
             draw(st.integers(0, 59) | st.sampled_from([60, 61])))
    separator = draw(st.sampled_from("TTT t_"))
    fraction = draw(st.just("") | st.text("0123456789", max_size=12).map(lambda d: "." + d) | st.just(",5"))
    offset = draw(st.sampled_from(["Z", "Z", "z", "", "+00:00", "-00:00", "+05:30", "-05:30", "+0530", "-0530", "+05", "-05",
                                   "+23:59", "-23:59", "+24:00", "+00:60", "+05:30:00", "+5:30", " Z", "+05:30:00.5"]))
    text = f"{year:04d}-{month:02d}-{day:02d}{separator}{clock[0]:02d}:{clock[1]:02d}:{clock[2]:02d}{fraction}{offset}"
    return draw(st.sampled_from(["", "", "", " ", "\t"])) + text


EDGE_EPOCHS = [10**11 - 1, 10**11, 10**11 + 1, -(10**11), -(10**11) + 1, 9 * 10**15, 9 * 10**15 + 1, -(9 * 10**15),
               10**16, 0, 1795321800, 1795321800000]
EPOCH_INTEGERS = st.sampled_from(EDGE_EPOCHS) | st.integers(-2 * 10**16, 2 * 10**16) | st.integers(1_700_000_000, 1_800_000_000)
TIME_VALUES = st.one_of(
    iso_texts(),
    st.datetimes(min_value=datetime(1000, 1, 2), max_value=datetime(9999, 12, 30),
                 timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=5, minutes=30)),
                                            timezone(-timedelta(hours=23, minutes=59))]))
    .map(lambda moment: moment.isoformat()),
    EPOCH_INTEGERS, EPOCH_INTEGERS.map(str), EPOCH_INTEGERS.map(lambda n: f"{n:017d}"),
    EPOCH_INTEGERS.map(lambda n: f"+{n}"), EPOCH_INTEGERS.map(lambda n: f" {n}"),
    st.floats(), st.integers(-(10**13), 10**13).map(lambda k: (k + 0.5) / 1e6),
    st.integers(-(10**12), 10**12).map(lambda k: k + 0.5), st.floats(99_999_999_999.0, 100_000_000_001.0),
    st.floats(8.9e15, 9.1e15), st.none(), st.booleans(), st.text(max_size=6))
LEAVES = st.one_of(st.none(), st.booleans(), st.floats(), st.integers(-(2**64), 2**64), st.integers(),
                   st.text(max_size=6))
JSON_VALUES = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=10)


@st.composite
def events(draw: st.DrawFn) -> dict[str, object]:
    """An event whose key and time fields (sometimes missing) take every shape, with a payload
    of any JSON, its members in any order."""
    members: dict[str, object] = {}
    for name in (KEY, "user", "\u00efd", "n"):
        if draw(st.integers(0, 9)):
            members[name] = draw(ID_VALUES)
    if draw(st.integers(0, 9)):
        members[TIME] = draw(TIME_VALUES)
    names = st.sampled_from(["p", "a", "zz", "\u00e9", "\U0001f600", "", "a\nb"]) | st.text(max_size=3)
    for name, value in draw(st.dictionaries(names, JSON_VALUES, max_size=3)).items():
        members.setdefault(name, value)
    order = draw(st.permutations(list(members)))
    return {name: members[name] for name in order}


# Events as producers write them: ids and times in the shapes the core reads, within the window,
# payload floats in orjson's fixed notation, no lone surrogates; most of their lines are vouched for.
VALID_IDS = st.one_of(
    UUIDS, UUIDS.map(str.upper), st.text(CROCKFORD, min_size=26, max_size=26), st.integers(-(2**63), 2**64 - 1),
    st.text("abcXYZ0189-_:.", min_size=1, max_size=12), st.text(" aBcX9-", min_size=1, max_size=8),
    st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=6), UNICODE_ID_TEXT)
VALID_TIMES = st.one_of(
    st.datetimes(min_value=datetime(2000, 1, 2), max_value=datetime(2026, 11, 22),
                 timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=5, minutes=30)),
                                            timezone(-timedelta(hours=3))]))
    .flatmap(lambda moment: st.sampled_from([moment.isoformat(), moment.isoformat().replace("+00:00", "Z"),
                                             moment.isoformat(sep=" "), moment.isoformat(timespec="milliseconds"),
                                             str(int(moment.timestamp())), int(moment.timestamp()),
                                             int(moment.timestamp() * 1000), str(int(moment.timestamp() * 1000)),
                                             moment.timestamp(), round(moment.timestamp() * 1000, 1)])))
FIXED_FLOATS = st.floats(min_value=-1e15, max_value=1e15).filter(lambda x: x == 0 or abs(x) >= 1e-5)
VALID_NAMES = st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=3)
VALID_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), FIXED_FLOATS, st.integers(-(2**63), 2**64 - 1),
              st.text(st.characters(exclude_categories=("Cs",)), max_size=6)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(VALID_NAMES, inner, max_size=3), max_leaves=10)


@st.composite
def valid_events(draw: st.DrawFn) -> dict[str, object]:
    members: dict[str, object] = {name: draw(VALID_IDS) for name in (KEY, "user", "\u00efd", "n")}
    members[TIME] = draw(VALID_TIMES)
    for name, value in draw(st.dictionaries(VALID_NAMES, VALID_VALUES, max_size=3)).items():
        members.setdefault(name, value)
    order = draw(st.permutations(list(members)))
    return {name: members[name] for name in order}


EVENTS = events() | valid_events()


SERIALISERS = {
    "orjson": orjson.dumps,
    "orjson sorted": lambda event: orjson.dumps(event, option=orjson.OPT_SORT_KEYS),
    "json compact": lambda event: json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    .encode("utf-8", "surrogatepass"),
    "json": lambda event: json.dumps(event).encode(),
    "json compact ascii sorted": lambda event: json.dumps(event, separators=(",", ":"), sort_keys=True).encode(),
}
FRAMING = st.tuples(st.sampled_from([b"", b"", b"", b" ", b"\xef\xbb\xbf"]),
                    st.sampled_from([b"", b"", b"", b"\r", b" ", b"\t", b"\r\n", b"\n"]))


def serialised(event: dict[str, object]) -> list[bytes]:
    lines = []
    for serialise in SERIALISERS.values():
        try:
            lines.append(serialise(event))
        except (TypeError, orjson.JSONEncodeError):  # orjson: integers past 64 bits, lone surrogates
            continue
    return lines


@settings(max_examples=500, deadline=None)
@given(EVENTS, RULES, FRAMING)
def test_events_in_every_serialisation_give_parse_events_row_where_vouched(
        event: dict[str, object], rules: ParseRules, framing: tuple[bytes, bytes]) -> None:
    lines = serialised(event)
    assert_core_agrees(lines + [framing[0] + line + framing[1] for line in lines], rules)
    assert_bounds_decide_alone(lines[0], rules)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=8), RULES)
def test_arbitrary_bytes_give_parse_events_row_where_vouched(lines: list[bytes], rules: ParseRules) -> None:
    assert_core_agrees(lines, rules)


MUTATION_TOKENS = [b'"', b"\\", b"\\u0000", b"\\u00e9", b"\\u001F", b"\\ud800", b"\\udc00", b"\xc0\xaf", b"\xe0\x80\xaf",
                   b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe3\x80\x80", b"\xc3", b"{", b"}", b"[", b"]", b",", b":",
                   b"0", b"1", b"9", b".", b".5", b"e", b"E", b"-", b"+", b" ", b"Z", b"+05", b"T", b"\r", b"\x7f",
                   b'"a":1,', b'"event_id":', b'"created_at":', b"00", b"\x00", b"\n"]


@st.composite
def mutated_lines(draw: st.DrawFn) -> bytes:
    """A valid line (the main workload's, or any event orjson writes) with a few bytes inserted,
    deleted or replaced: lines one step across the core's boundary."""
    line = draw(st.just(MAIN_LINE) | st.sampled_from(list(DOCUMENTED_SHAPES.values())).map(lambda shape: shape[0])
                | valid_events().map(orjson.dumps))
    data = bytearray(line)
    for _ in range(draw(st.integers(1, 2))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.integers(0, 4))
        if kind == 0:
            data[at:at] = draw(st.sampled_from(MUTATION_TOKENS))
        elif kind == 1:
            del data[at:at + draw(st.integers(1, 4))]
        elif at == len(data):
            continue
        elif kind == 2:
            data[at] = draw(st.integers(0, 255))
        elif chr(data[at]).isdigit():  # another digit: dates, clocks, offsets and numbers that still parse
            data[at] = draw(st.integers(ord("0"), ord("9")))
        else:  # another letter's case: ids, hex digits, the T and the Z
            data[at:at + 1] = bytes(data[at:at + 1]).swapcase()
    return bytes(data)


@settings(max_examples=800, deadline=None)
@given(st.lists(mutated_lines(), min_size=1, max_size=4), RULES)
def test_mutated_valid_lines_give_parse_events_row_where_vouched(lines: list[bytes], rules: ParseRules) -> None:
    assert_core_agrees(lines, rules)


LEVELS = {"[": "]", '{"k":': "}", '{"z":0,"a":': "}", '{"a":0,"z":': "}"}
REPEATING_LEVELS = {'{"k":1,"k":': "}", '{"b":[],"a":{},"b":': "}", '{"a":[{"k":1,"k":2}],"b":': "}"}


@st.composite
def deep_values(draw: st.DrawFn) -> str:
    """Nesting 185-260 levels deep (the core reads up to 200, parse_event to 254), objects' keys in
    order or not, sometimes with a key repeated at one level."""
    depth = draw(st.integers(185, 205) | st.integers(185, 260))
    levels = draw(st.lists(st.sampled_from(list(LEVELS)), min_size=depth, max_size=depth))
    if draw(st.booleans()):
        levels[draw(st.integers(0, depth - 1))] = draw(st.sampled_from(list(REPEATING_LEVELS)))
    inner = draw(st.sampled_from(["1", "[]", "{}", '{"b":1,"a":2}', '"s"']))
    closers = {**LEVELS, **REPEATING_LEVELS}
    return "".join(levels) + inner + "".join(closers[level] for level in reversed(levels))


@settings(max_examples=100, deadline=None)
@given(deep_values(), st.sampled_from(ALGORITHMS), st.booleans())
def test_deep_nesting_and_repeated_keys_at_depth_give_parse_events_row_where_vouched(
        nest: str, algorithm: str, key_first: bool) -> None:
    members = [f'"{KEY}":"{UUID_TEXT}"', f'"{TIME}":"{AT}"', f'"p":{nest}']
    line = ("{" + ",".join(members if key_first else members[::-1]) + "}").encode()
    assert_core_agrees([line], rules_of(algorithm=algorithm))


@pytest.mark.parametrize("depth", [150, 197, 198, 199, 200, 201, 252, 253, 254, 255, 260])
@pytest.mark.parametrize("opener, closer", [('{"b":2,"a":', "}"), ('{"a":', "}"), ("[", "]"), ("[0,", "]")])
def test_nesting_at_the_cores_and_the_references_limits_gives_parse_events_row_where_vouched(
        depth: int, opener: str, closer: str) -> None:
    """The core reads up to 200 levels, parse_event up to 254: around both limits."""
    for inner in ("1", "[]", '{"b":1,"a":2}'):
        line = event_line(rest=f',"p":{opener * depth}{inner}{closer * depth}')
        vouched = assert_core_agrees([line], rules_of())
        assert vouched == {0} or depth > 150


@pytest.mark.parametrize("depth", [0, 1, 2, 60, 190])
@pytest.mark.parametrize("repeat, vouched", [
    ('{"a":1,"a":2}', False), ('{"b":1,"a":2,"b":3}', False), ('{"a":{},"b":2,"a":{}}', False), ('{"a":1,"a":1}', False),
    ('[{"a":1},{"a":2}]', True), ('{"a":{"a":1}}', True), ('{"b":1,"a":2}', True)])
def test_a_repeated_key_at_any_depth_is_left_to_the_reference(depth: int, repeat: str, vouched: bool) -> None:
    line = event_line(rest=',"p":' + nested(depth, repeat))
    assert assert_core_agrees([line], rules_of()) == ({0} if vouched else set())


FLOATS = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.floats(9e-6, 1.1e-5), st.floats(-1.1e-5, -9e-6),
                   st.floats(9e15, 1.1e16), st.floats(-1.1e16, -9e15), st.floats(-1e-4, 1e-4),
                   st.sampled_from([0.0, -0.0, 1e-5, 1e16, 9999999999999998.0, 0.1, 5e-324, 1.7976931348623157e308]))


@settings(max_examples=400, deadline=None)
@given(FLOATS, st.sampled_from(ALGORITHMS))
def test_floats_in_any_spelling_give_parse_events_row_where_vouched(number: float, algorithm: str) -> None:
    """Floats written by orjson, repr() and printf near the edges of orjson's fixed notation, as
    payload and as the time: orjson's own spelling of 1e-5 <= |x| < 1e16 is vouched for."""
    spellings = {orjson.dumps(number).decode(), repr(number), f"{number:.17g}", f"{number:f}", f"{number!r}0"}
    rules = rules_of(algorithm=algorithm, bounds=INT64)
    for spelling in spellings:
        assert_core_agrees([event_line(rest=f',"x":{spelling}'), event_line(time=spelling)], rules)
    if number == 0 or 1e-5 <= abs(number) < 1e16:
        assert assert_core_agrees([event_line(rest=f',"x":{orjson.dumps(number).decode()}')], rules) == {0}


# Every escape of a character orjson writes short ("\\b") also spelt long ("\\u0008"), in both
# cases, and the \\u escapes orjson never writes (printable ASCII, DEL, non-ASCII, surrogates).
SHORT_ESCAPES = {"\\b": "08", "\\t": "09", "\\n": "0a", "\\f": "0c", "\\r": "0d", '\\"': "22", "\\\\": "5c"}
ESCAPES = [*SHORT_ESCAPES, *dict.fromkeys(f"\\u00{case(code)}" for case in (str.lower, str.upper)
                                         for code in SHORT_ESCAPES.values()),
           "\\u0000", "\\u001f", "\\u001F", "\\u0001", "\\u000b", "\\u007f", "\\u0041", "\\u00e9", "\\u2028", "\\ud800",
           "\\udc00", "\\ud83d\\ude00", "\\/", "\\u002f", "\\x", "\\U0041"]
ESCAPE_PIECES = st.sampled_from([*ESCAPES, "a", "\u00e9", "\x7f", " ", "\x1f"])


@pytest.mark.parametrize("escape", ESCAPES)
@pytest.mark.parametrize("where", ["value", "key", "name"])
def test_each_escape_spelling_gives_parse_events_row_where_vouched(escape: str, where: str) -> None:
    """Only orjson's own spelling of an escape can be vouched for: the fingerprint's canonical
    JSON is orjson's, so a line spelling "\\b" as "\\u0008" has another payload text."""
    line = {"value": event_line(rest=f',"s":"a{escape}"'), "key": event_line(key=f'"a{escape}"'),
            "name": event_line(rest=f',"a{escape}":1')}[where]
    for rules in RULE_SETS.values():
        assert_core_agrees([line], rules)


@settings(max_examples=300, deadline=None)
@given(st.lists(ESCAPE_PIECES, min_size=1, max_size=4).map("".join), st.sampled_from(["key", "value", "name"]), RULES)
def test_escapes_in_keys_values_and_names_give_parse_events_row_where_vouched(
        text: str, where: str, rules: ParseRules) -> None:
    if where == "key":
        line = event_line(key=f'"{text}"')
    elif where == "value":
        line = event_line(rest=f',"s":"{text}"')
    else:
        line = event_line(rest=f',"{text}":1')
    assert_core_agrees([line], rules)


@pytest.mark.parametrize("raw", [b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf0\x80\x80\xaf", b"\xed\xa0\x80", b"\xed\xbf\xbf",
                                 b"\xed\xa0\xbd\xed\xb8\x80", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xc3", b"\xe2\x82",
                                 b"\x80", b"\xff", b"\xfe"])
@pytest.mark.parametrize("where", ["value", "key", "name"])
def test_invalid_utf8_is_left_to_the_reference(raw: bytes, where: str) -> None:
    line = {"value": event_line(rest=',"s":"x"'), "key": event_line(key='"x"'),
            "name": event_line(rest=',"x":1')}[where].replace(b'x"', raw + b'x"', 1)
    assert assert_core_agrees([line], rules_of()) == set()


@pytest.mark.parametrize("text", ["\u0391\u03a3", "\u03a3", "\u03a3a", "a\u03a3 b", "\u0130stanbul", "\u212a-1", "\U00010400x",
                                  "\u3000Ab\u2028", "\u200bAb\u200b", "\ufeffAb", "\u180eAb", "\u00a0\u1680", "\u0085",
                                  "\u01c5\u216b\u24b6", "\u1e9e", " \u00c9t\u00c9 ", "\x1c\x1f"])
@pytest.mark.parametrize("trim, lower", [(False, False), (True, False), (False, True), (True, True)])
def test_unicode_ids_give_parse_events_row_where_vouched(text: str, trim: bool, lower: bool) -> None:
    """str.strip() and str.lower() beyond ASCII: spaces that are and are not, a lower() that
    grows, the final sigma it lowers by context, letters lowered to ASCII or outside the BMP."""
    for key_fields in [(KEY,), (KEY, "user")]:
        assert_core_agrees([orjson.dumps({KEY: text, TIME: AT, "user": text})],
                           rules_of(key_fields, trim=trim, lower=lower))


# ---------------------------------------------------------------------------------------------
# The batch parser runs the core first, then the Python paths: the same rows, in input order.

INPUT_INDEX = 3
CHUNK_LINE_KINDS = st.one_of(
    st.just(MAIN_LINE), valid_events().map(orjson.dumps), valid_events().map(lambda event: json.dumps(event).encode()),
    events().map(lambda event: json.dumps(event).encode()), mutated_lines(), st.binary(max_size=40),
    st.sampled_from([b"", b"\r", b" ", MAIN_LINE + b"\r", MAIN_LINE.replace(b",", b", ")]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(CHUNK_LINE_KINDS, max_size=10), RULES, st.integers(1, 4), st.integers(1, 5), st.booleans())
def test_parse_lines_equals_parse_event_line_by_line_in_input_order(
        lines: list[bytes], rules: ParseRules, chunk_lines: int, first_line: int, final_newline: bool) -> None:
    body = b"\n".join(lines) + (b"\n" if final_newline else b"")
    expected_rows, expected_bad = [], []
    for line in iter_input_lines(body):
        number = first_line - 1 + line.line_number if line.line_number else 0  # line 0: the object as a whole
        try:
            if line.error is not None:
                raise InvalidEvent(line.error)
            event = parse_event(line.raw, rules)
        except InvalidEvent as exc:
            expected_bad.append((line.raw, str(exc), number))
            continue
        expected_rows.append((make_seq(INPUT_INDEX, number), event.event_id, event.digest, event.fingerprint,
                              event.time_us, event.raw, event.order_key))
    with no_line_by_line_fallback(), mock.patch.object(object_parser, "CHUNK_LINES", chunk_lines):
        # vouched and deferred lines cross chunks
        parsed = object_parser.parse_lines(split_input(body, rules.max_object_bytes), INPUT_INDEX, rules, first_line)
    table = parsed.table
    rows = list(zip(table.column("seq").to_pylist(), table.column("event_id").to_pylist(),
                    table.column("key_digest").to_pylist(), table.column("fingerprint").to_pylist(),
                    table.column("event_time").cast("int64").to_pylist(), table.column("raw").to_pylist(),
                    table.column("order_key").to_pylist(), strict=True))
    assert rows == expected_rows
    assert list(zip(parsed.bad_raw, parsed.bad_error, parsed.bad_line, strict=True)) == expected_bad


@settings(max_examples=150, deadline=None)
@given(st.lists(CHUNK_LINE_KINDS, max_size=10), RULES)
def test_the_core_reads_an_objects_lines_in_place_as_it_reads_a_list_of_them(
        lines: list[bytes], rules: ParseRules) -> None:
    """split_input's pieces (spans of the object's text, where it splits them so) scan as the
    same lines given one by one: the same rows, each parse_event's."""
    pieces = split_input(b"\n".join(lines) + b"\n", rules.max_object_bytes).pieces
    as_list = [bytes(piece) for piece in pieces]
    in_place = core_rows(pieces, rules)
    assert in_place == core_rows(as_list, rules)
    assert set(in_place) == assert_core_agrees(as_list, rules)


# ---------------------------------------------------------------------------------------------
# The fuzzer's short run (make test); `make fuzz` runs it long.

FUZZ = REPO / "fuzz"
SHORT_RUN_EXECUTIONS = 40_000


def test_atheris_short_run(tmp_path: Path, record_property: Callable[[str, object], None]) -> None:
    """The atheris harness over the seed corpus for a bounded number of inputs: no input it
    tries makes the core vouch for a line whose row is not parse_event's."""
    pytest.importorskip("atheris")
    (tmp_path / "corpus").mkdir()
    command = [sys.executable, str(FUZZ / "parse_core_fuzz.py"), f"-runs={SHORT_RUN_EXECUTIONS}", "-seed=43",
               f"-dict={FUZZ / 'parse_core.dict'}", f"-artifact_prefix={tmp_path}/", "-timeout=60",
               str(tmp_path / "corpus"), str(FUZZ / "corpus" / "parse_core")]
    run = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=900, cwd=REPO, check=False)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-6000:]
    done = re.findall(r"^Done (\d+) runs", output, re.MULTILINE)
    assert done and int(done[-1]) == SHORT_RUN_EXECUTIONS, output[-2000:]
    record_property("atheris_executions", int(done[-1]))
