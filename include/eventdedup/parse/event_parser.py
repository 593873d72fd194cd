"""Turn one JSON line into the fields deduplication needs, or a reason to quarantine it."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import orjson

from eventdedup.keys import key_digest
from eventdedup.parse.columns import event_columns
from eventdedup.parse.event_time import EPOCH_MILLIS_THRESHOLD as EPOCH_MILLIS_THRESHOLD
from eventdedup.parse.event_time import InvalidEvent as InvalidEvent
from eventdedup.parse.event_time import json_type
from eventdedup.parse.event_time import parse_event_time as parse_event_time
from eventdedup.parse.order_keys import NotComparable, order_key_of_number, order_key_of_value
from eventdedup.parse.rules import ParseRules

JsonObject = dict[str, Any]  # a parsed JSON object, as orjson and json produce it

# The deepest nesting (objects and arrays, the event itself included) an event may have: orjson
# parses up to 1024 levels but serialises only 254, and the fingerprint serialises the event.
MAX_JSON_DEPTH = 254


@dataclass(frozen=True)
class ParsedEvent:
    # The normalised key as text: the id itself for a one-field key, a JSON array of the
    # values for a composite key.
    event_id: str
    digest: bytes
    fingerprint: int
    time_us: int
    raw: str
    order_key: bytes | None = None


def parse_event(line: bytes, rules: ParseRules) -> ParsedEvent:
    if len(line) > rules.max_line_bytes:
        raise InvalidEvent(f"line of {len(line)} bytes exceeds [events] max_line_bytes ({rules.max_line_bytes})")
    try:
        raw = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidEvent(f"invalid UTF-8 at byte {exc.start}") from None
    try:
        event = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidEvent(f"malformed JSON: {exc}") from None
    if not isinstance(event, dict):
        raise InvalidEvent(f"not a JSON object but {type(event).__name__}")
    if _nesting_depth(event) > MAX_JSON_DEPTH:
        raise InvalidEvent(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    refuse_repeated_keys(line, event)
    key_text = dedup_key_text(event, rules)
    time_us = parse_event_time(event.get(rules.time_field, None), rules.time_field)
    if not rules.min_time_us <= time_us <= rules.max_time_us:
        raise InvalidEvent(f"{rules.time_field} {_iso(time_us)} is outside the accepted range "
                           f"[{_iso(rules.min_time_us)}, {_iso(rules.max_time_us)}]")
    order_key = order_key_for(event, time_us, rules) if rules.survivor_field else None
    if rules.checked_columns:  # on_mismatch = "quarantine": a value that does not fit quarantines the line
        event_columns(event, rules.checked_columns, quarantine=True)
    return ParsedEvent(key_text, key_digest(key_text), rules.fingerprint.fingerprint(event), time_us, raw, order_key)


# A member's key is a string followed by optional JSON whitespace and a colon.
_KEY_COLON = re.compile(rb'"[ \t\r\n]*:')
_QUOTE_THEN_SPACE = re.compile(rb'"[ \t\r\n]')


def refuse_repeated_keys(line: bytes, event: JsonObject) -> None:
    """Quarantine objects that repeat a key: orjson (like most parsers) silently keeps the last
    value, so which id or payload the producer meant is unknowable.

    Fast path: every member of every object in the line contributes one '"' + ':' sequence, so
    if their number equals the members the parser kept, nothing was repeated. The sequence can
    also occur inside string values; only then (and for repeats) is the line parsed again with
    a parser that sees every key.
    """
    if _QUOTE_THEN_SPACE.search(line):
        key_colons = len(_KEY_COLON.findall(line))
    else:
        key_colons = line.count(b'":')
    if key_colons != _count_members(event):
        try:
            json.loads(line, object_pairs_hook=_refuse_repeats)
        except ValueError as exc:
            if isinstance(exc, InvalidEvent):
                raise
            # orjson accepted what json does not (it never should); the key check cannot run.


def _refuse_repeats(pairs: list[tuple[str, object]]) -> JsonObject:
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise InvalidEvent(f"repeated key {json.dumps(key, ensure_ascii=False)} in one JSON object")
        seen.add(key)
    return dict(pairs)


def _count_members(value: JsonObject) -> int:
    """Members of every object in a parsed JSON value (hot path: plain loops, exact type checks;
    JSON parsers only ever produce plain dicts and lists)."""
    members = 0
    pending: list[Any] = [value]
    while pending:
        item = pending.pop()
        children = item.values() if type(item) is dict else item
        if type(item) is dict:
            members += len(item)
        for child in children:
            if type(child) is dict or type(child) is list:
                pending.append(child)
    return members


def _nesting_depth(value: JsonObject) -> int:
    """Levels of objects and arrays, the outermost counted as 1 (iterative: no recursion limit)."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        deepest = max(deepest, depth)
        for child in (item.values() if type(item) is dict else item):
            if type(child) is dict or type(child) is list:
                pending.append((child, depth + 1))
    return deepest


def dedup_key_text(event: JsonObject, rules: ParseRules) -> str:
    if len(rules.key_fields) == 1:
        field = rules.key_fields[0]
        return normalize_event_id(event.get(field, None), field, rules.trim, rules.lower)
    values = [normalize_event_id(event.get(field, None), field, rules.trim, rules.lower) for field in rules.key_fields]
    # JSON keeps the parts apart unambiguously: ("a,b", "c") and ("a", "b,c") differ.
    return orjson.dumps(values).decode("utf-8")


def normalize_event_id(value: object, field: str, trim: bool = False, lower: bool = False) -> str:
    """Strings are ids as given (optionally trimmed, lower-cased); integers become their decimal
    string; anything else is refused."""
    if isinstance(value, bool):
        raise InvalidEvent(f"{field} is a boolean, not an id")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        if not value.strip():
            raise InvalidEvent(f"{field} is empty")
        if trim:
            value = value.strip()
        return value.lower() if lower else value
    if value is None:
        raise InvalidEvent(f"{field} is missing or null")
    raise InvalidEvent(f"{field} is a {json_type(value)}, not a string or integer")


def order_key_for(event: JsonObject, time_us: int, rules: ParseRules) -> bytes | None:
    field = rules.survivor_field
    assert field is not None
    if field == rules.time_field:
        return order_key_of_number(time_us)
    if rules.survivor_values == "instant":
        value = event.get(field, None)
        if value is None:
            return None
        try:
            return order_key_of_number(parse_event_time(value, field))
        except InvalidEvent as exc:
            raise InvalidEvent(f"survivor field: {exc}") from None
    try:
        return order_key_of_value(event.get(field, None), field)
    except NotComparable as exc:
        raise InvalidEvent(str(exc)) from None


def _iso(time_us: int) -> str:
    try:
        return datetime.fromtimestamp(time_us / 1_000_000, timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return f"{time_us} microseconds since the epoch"
