from __future__ import annotations

from datetime import datetime, timezone

import pytest

from eventdedup.config import EventSettings
from eventdedup.event_parser import InvalidEvent, ParseRules, parse_event
from eventdedup.keys import key_digest

AS_OF = datetime(2026, 11, 22, 5, 0, tzinfo=timezone.utc)
RULES = ParseRules.for_batch(EventSettings(), AS_OF)
T0_US = int(datetime(2026, 11, 22, 4, 30, tzinfo=timezone.utc).timestamp()) * 1_000_000


@pytest.mark.parametrize("created_at", [
    '"2026-11-22T04:30:00Z"', '"2026-11-22T04:30:00+00:00"', '"2026-11-22T06:30:00+02:00"',
    '"2026-11-21T23:30:00-05:00"', "1795321800", "1795321800000", "1795321800.0", '"1795321800000"',
])
def test_timestamps_in_every_accepted_form_land_on_the_same_instant(created_at: str) -> None:
    event = parse_event(b'{"event_id":"e1","created_at":%s}' % created_at.encode(), RULES)
    assert event.time_us == T0_US


def test_integer_ids_become_their_decimal_string_and_share_the_string_digest() -> None:
    event = parse_event(b'{"event_id":12345,"created_at":"2026-11-22T04:30:00Z"}', RULES)
    assert event.event_id == "12345" and event.digest == key_digest("12345")


def test_raw_line_is_kept_verbatim_and_fingerprint_ignores_key_order_and_spacing() -> None:
    a = parse_event('{"event_id":"e","created_at":"2026-11-22T04:30:00Z","x":"é"}'.encode(), RULES)
    b = parse_event('{ "x": "é",  "created_at":"2026-11-22T04:30:00Z", "event_id":"e" }'.encode(), RULES)
    c = parse_event('{"event_id":"e","created_at":"2026-11-22T04:30:00Z","x":"e"}'.encode(), RULES)
    assert a.raw == '{"event_id":"e","created_at":"2026-11-22T04:30:00Z","x":"é"}'
    assert a.fingerprint == b.fingerprint != c.fingerprint


@pytest.mark.parametrize("line, reason", [
    (b'{"event_id": "broken', "malformed JSON"),
    (b"[1,2]", "not a JSON object"),
    (b'{"created_at":"2026-11-22T04:30:00Z"}', "event_id is missing or null"),
    (b'{"event_id":null,"created_at":"2026-11-22T04:30:00Z"}', "event_id is missing or null"),
    (b'{"event_id":"  ","created_at":"2026-11-22T04:30:00Z"}', "event_id is empty"),
    (b'{"event_id":true,"created_at":"2026-11-22T04:30:00Z"}', "event_id is a boolean"),
    (b'{"event_id":{"a":1},"created_at":"2026-11-22T04:30:00Z"}', "event_id is a JSON object"),
    (b'{"event_id":[1],"created_at":"2026-11-22T04:30:00Z"}', "event_id is a JSON array"),
    (b'{"event_id":1.5,"created_at":"2026-11-22T04:30:00Z"}', "event_id is a number"),
    (b'{"event_id":"e"}', "created_at is missing"),
    (b'{"event_id":"e","created_at":"yesterday"}', "is not ISO-8601"),
    (b'{"event_id":"e","created_at":"2026-11-22T04:30:00"}', "has no UTC offset"),
    (b'{"event_id":"e","created_at":"1999-12-31T23:59:59Z"}', "outside the accepted range"),
    (b'{"event_id":"e","created_at":"2026-11-23T05:00:01Z"}', "outside the accepted range"),
    (b'{"event_id":"e","created_at":1e300}', "outside the accepted range"),
    (b'{"event_id":"\xff\xfe","created_at":"2026-11-22T04:30:00Z"}', "invalid UTF-8"),
])
def test_unusable_lines_raise_with_a_quarantine_reason(line: bytes, reason: str) -> None:
    with pytest.raises(InvalidEvent) as caught:
        parse_event(line, RULES)
    assert reason in str(caught.value)


def test_events_at_the_exact_bounds_are_accepted() -> None:
    assert parse_event(b'{"event_id":"e","created_at":"2000-01-01T00:00:00Z"}', RULES)
    assert parse_event(b'{"event_id":"e","created_at":"2026-11-23T05:00:00Z"}', RULES)
