"""The parser's contract: for *any* bytes, every line becomes a row or a quarantine reason, on
the fast path and the reference path alike; nothing else is ever raised. One line must never
fail a batch (a task that fails on every retry wedges the pipeline behind it).

The named cases are valid JSON that once raised something other than InvalidEvent; the
properties draw arbitrary JSON values (recursive, every float, integers of any size, any
Unicode including other scripts' digits and lone surrogates) and arbitrary bytes.
"""
from __future__ import annotations

import gzip
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventdedup.parse.event_parser import MAX_JSON_DEPTH, InvalidEvent, parse_event

from .test_batch_parser import RULE_SETS, fast, reference

RULES = RULE_SETS["default"]


@pytest.fixture(autouse=True)
def _fast_path_never_falls_back(caplog):  # type: ignore[no-untyped-def]
    """The fast path's chunk fallback would hide a fast path that crashes (both paths would still
    agree): here, it must never be taken."""
    yield
    assert not [r for r in caplog.records if "fast parse of lines" in r.getMessage()]
AT = '"2026-11-22T04:30:00Z"'


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def event_with(payload: str) -> str:
    return '{"event_id":"e","created_at":' + AT + ',"p":' + payload + "}"


@pytest.mark.parametrize("line, reason", [
    ('{"event_id":"e","created_at":"\u00b2"}', "is not ISO-8601"),  # "²".isdigit() is True
    ('{"event_id":"e","created_at":"\u0661\u0662"}', "is not ISO-8601"),  # Arabic-Indic digits
    ('{"event_id":"e","created_at":"--5"}', "is not ISO-8601"),
    ('{"event_id":"e","created_at":"%s"}' % ("9" * 5000), "outside the accepted range"),  # over int()'s limit
    ('{"event_id":"e","created_at":1e308}', "outside the accepted range"),  # x 1000 overflows
    ('{"event_id":"e","created_at":-1.7e308}', "outside the accepted range"),
    ('{"event_id":"e","created_at":"0001-01-01T00:00:00+05:00"}', "outside the accepted range"),  # before year 1 in UTC
    ('{"event_id":"e","created_at":"9999-12-31T23:59:59-05:00"}', "outside the accepted range"),
    (event_with(nested(MAX_JSON_DEPTH)), "nested deeper than"),
    (event_with(nested(1022)), "nested deeper than"),  # orjson's own limit
    (event_with(f"[{nested(300)},{nested(300)}]"), "nested deeper than"),
])
def test_valid_json_that_once_crashed_the_parser_is_quarantined_with_its_reason(line: str, reason: str) -> None:
    with pytest.raises(InvalidEvent) as caught:
        parse_event(line.encode(), RULES)
    assert reason in str(caught.value)
    rows, bad = fast(line.encode() + b"\n", RULES)
    assert rows == [] and [(raw, number) for raw, _, number in bad] == [(line.encode(), 1)]
    assert reason in bad[0][1]


def test_the_deepest_accepted_nesting_is_a_row_on_both_paths() -> None:
    line = event_with(nested(MAX_JSON_DEPTH - 1)).encode()  # the event's own object is level 1
    assert parse_event(line, RULES).event_id == "e"
    assert fast(line + b"\n", RULES) == reference(line + b"\n", RULES)


# Any JSON value: the leaves cover every float (huge, tiny, -0.0), integers far beyond 64 bits,
# and any Unicode text, including lone surrogates (written as \ud800 escapes by json.dumps).
LEAVES = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False, allow_infinity=False),
                   st.integers(), st.integers(min_value=-(10**400), max_value=10**400), st.text())
JSON_VALUES = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=12)
SPECIAL_NUMBERS = st.sampled_from(["1e400", "-1e400", "1e-400", "NaN", "Infinity", "-Infinity", "1E308",
                                   "123456789012345678901234567890", "-0", "0.0e0"])


@st.composite
def hostile_lines(draw: st.DrawFn) -> bytes:
    fields = {"event_id": draw(st.one_of(st.text(max_size=4), JSON_VALUES)),
              "created_at": draw(st.one_of(st.text(alphabet=st.characters(categories=["Nd", "No", "Pd"]), max_size=6),
                                           JSON_VALUES, st.just("2026-11-22T04:30:00Z"))),
              "payload": draw(JSON_VALUES)}
    text = json.dumps({k: v for k, v in fields.items() if draw(st.integers(0, 5))},
                      ensure_ascii=draw(st.booleans()))
    how = draw(st.sampled_from(["as is", "as is", "special number", "deep", "surrogate bytes"]))
    if how == "special number":
        return text.replace('"payload": ', f'"payload": {draw(SPECIAL_NUMBERS)}, "x": ', 1).encode()
    if how == "deep":
        depth = draw(st.integers(MAX_JSON_DEPTH - 3, 1100))
        return text.replace('"payload": ', f'"payload": {nested(depth)}, "x": ', 1).encode()
    return text.encode("utf-8", errors="surrogatepass")  # lone surrogates as (invalid) UTF-8 bytes


@pytest.mark.parametrize("name", list(RULE_SETS))
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(body_lines=st.lists(hostile_lines(), min_size=1, max_size=6), gz=st.booleans())
def test_any_json_becomes_a_row_or_a_quarantine_reason_and_both_paths_agree(name: str, body_lines: list[bytes],
                                                                              gz: bool) -> None:
    rules = RULE_SETS[name]
    body = b"\n".join(body_lines) + b"\n"
    body = gzip.compress(body, mtime=0) if gz else body
    rows, bad = reference(body, rules)  # raises anything but InvalidEvent: the test fails
    assert len(rows) + len(bad) == len(body_lines)
    assert fast(body, rules) == (rows, bad)


@settings(max_examples=300)
@given(body=st.binary(max_size=300) | st.binary(max_size=60).map(lambda b: b"\x1f\x8b" + b))
def test_any_bytes_become_rows_or_quarantine_reasons(body: bytes) -> None:
    rows, bad = reference(body, RULES)
    assert fast(body, RULES) == (rows, bad)
    assert all(reason for _, reason, _ in bad)


def test_an_exception_the_parser_does_not_name_quarantines_its_line_until_it_looks_like_a_bug(monkeypatch) -> None:
    """A few lines with an unnamed exception are quarantined (one odd line never fails a batch); more
    than MAX_UNEXPECTED_PER_OBJECT in one object is a parser bug and fails the task instead of
    quarantining every event; MemoryError is the machine's, never the line's."""
    from eventdedup.parse import object_parser

    def broken(line: bytes, rules: object) -> None:
        raise (MemoryError() if b"memory" in line else RuntimeError("boom"))

    monkeypatch.setattr(object_parser, "parse_event", broken)
    few = b"".join(b"not json %d\n" % i for i in range(object_parser.MAX_UNEXPECTED_PER_OBJECT))
    parsed = object_parser.parse_object(few, 0, RULES)
    assert parsed.bad_error == ["unparseable event (RuntimeError: boom); please report this line"] * 10
    with pytest.raises(object_parser.ParserFailure, match="more than 10 lines of one object"):
        object_parser.parse_object(few + b"one too many\n", 0, RULES)
    with pytest.raises(MemoryError):
        object_parser.parse_object(b"memory\n", 0, RULES)
