"""Every reason the parser quarantines with falls in its class, whatever values it names: each bad
line goes through the real parser (or object splitter) and its message is classified."""
from __future__ import annotations

import gzip

import pytest

from eventdedup.inputs.exclusions import EXCLUDED_REASON_PREFIX
from eventdedup.parse.event_parser import InvalidEvent, parse_event
from eventdedup.parse.id_time import NoIdTime, id_time_us
from eventdedup.parse.input_lines import iter_input_lines
from eventdedup.parse.quarantine_reasons import OTHER, reason_class, reason_class_counts, reason_classes
from eventdedup.parse.table_lines import parquet_lines

from .test_event_parser import RULES, rules_with

T = '"created_at":"2026-11-22T04:30:00Z"'


@pytest.mark.parametrize("line, expected", [
    (b'{"event_id": "broken', "malformed_json"),
    (b'{"event_id":"a","event_id":"b",' + T.encode() + b"}", "malformed_json"),
    (b'{"event_id":"e",' + T.encode() + b',"a":' + b'{"a":' * 300 + b"1" + b"}" * 301, "malformed_json"),
    (b"[1,2]", "not_an_object"),
    (b"{" + T.encode() + b"}", "bad_id"),
    (b'{"event_id":null,' + T.encode() + b"}", "bad_id"),
    (b'{"event_id":"  ",' + T.encode() + b"}", "bad_id"),
    (b'{"event_id":true,' + T.encode() + b"}", "bad_id"),
    (b'{"event_id":[1],' + T.encode() + b"}", "bad_id"),
    (b'{"event_id":"e"}', "bad_time"),
    (b'{"event_id":"e","created_at":"yesterday"}', "bad_time"),
    (b'{"event_id":"e","created_at":"2026-11-22T04:30:00"}', "bad_time"),
    (b'{"event_id":"e","created_at":[1]}', "bad_time"),
    (b'{"event_id":"e","created_at":"1999-12-31T23:59:59Z"}', "time_out_of_range"),
    (b'{"event_id":"e","created_at":1e300}', "time_out_of_range"),
    (b'{"event_id":"\xff\xfe",' + T.encode() + b"}", "invalid_utf8"),
    (b'{"event_id":"' + b"x" * 2_000_000 + b'"}', "line_too_long"),
])
def test_each_kind_of_bad_line_is_classified_by_the_parsers_own_message(line: bytes, expected: str) -> None:
    with pytest.raises(InvalidEvent) as caught:
        parse_event(line, RULES)
    assert reason_class(str(caught.value)) == expected


def first_error(body: bytes, max_object_bytes: int = 1 << 20) -> str:
    return next(line.error for line in iter_input_lines(body, max_object_bytes) if line.error)


def test_objects_quarantined_whole_and_blank_lines_have_their_classes() -> None:
    assert reason_class(first_error(b"")) == "empty_object"
    assert reason_class(first_error(b"{}\n\n{}\n")) == "blank_line"
    assert reason_class(first_error(b"x" * 200, max_object_bytes=100)) == "object_too_large"
    assert reason_class(first_error(gzip.compress(b"{}\n" * 10_000), max_object_bytes=1000)) == "object_too_large"
    assert reason_class(first_error(gzip.compress(b"{}\n" * 100)[:-12])) == "corrupt_compression"
    assert reason_class(parquet_lines(b"PAR1 not really", 1 << 20).trailing[0].error or "") == "unreadable_table"
    assert reason_class(EXCLUDED_REASON_PREFIX + "producer bug #123") == "excluded_input"


def test_an_id_that_carries_no_time_under_partition_time_id_is_its_own_class() -> None:
    with pytest.raises(NoIdTime) as caught:
        id_time_us("not-a-uuid")
    assert reason_class(str(caught.value)) == "id_without_time"
    assert rules_with(partition_time="id") is not None


def test_an_unknown_reason_is_other_and_every_class_is_listed() -> None:
    assert reason_class("something no release wrote") == OTHER
    assert len(set(reason_classes())) == len(reason_classes())


def test_a_column_of_reasons_is_classified_as_each_reason_would_be() -> None:
    import pyarrow as pa

    reasons = ["malformed JSON: unexpected end", "event_id is missing or null", None, "no release wrote this",
               "created_at 'x' is not ISO-8601 or epoch seconds/milliseconds", EXCLUDED_REASON_PREFIX + "bug",
               'partition_time = "id": id \'x\' is neither a UUID', "created_at 1e300 is outside the accepted range",
               "blank line", "event_id is missing or null"]
    expected: dict[str, int] = {}
    for reason in reasons:
        name = reason_class(reason or "")
        expected[name] = expected.get(name, 0) + 1
    assert reason_class_counts(pa.chunked_array([reasons[:4], reasons[4:]], pa.string())) == expected
    assert reason_class_counts(pa.chunked_array([], pa.string())) == {}
