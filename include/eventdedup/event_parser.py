"""Turn one JSON line into the fields deduplication needs, or a reason to quarantine it."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import orjson

from .config import EventSettings
from .keys import fingerprint, key_digest

# Epoch numbers at or above this magnitude are milliseconds (1e11 s is the year 5138).
_MILLIS_THRESHOLD = 100_000_000_000


@dataclass(frozen=True)
class ParseRules:
    """What a valid event looks like for one batch; picklable for Spark executors."""

    id_field: str
    time_field: str
    min_time_us: int
    max_time_us: int

    @classmethod
    def for_batch(cls, events: EventSettings, as_of: datetime) -> ParseRules:
        max_time = as_of.timestamp() + events.max_future_hours * 3600
        return cls(
            id_field=events.id_field,
            time_field=events.time_field,
            min_time_us=int(events.min_event_time.timestamp() * 1_000_000),
            max_time_us=int(max_time * 1_000_000),
        )


@dataclass(frozen=True)
class ParsedEvent:
    event_id: str
    digest: bytes
    fingerprint: int
    time_us: int
    raw: str


class InvalidEvent(ValueError):
    """The line is not a usable event; the message is the quarantine reason."""


def parse_event(line: bytes, rules: ParseRules) -> ParsedEvent:
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
    event_id = normalize_event_id(event.get(rules.id_field, None), rules.id_field)
    time_us = parse_event_time(event.get(rules.time_field, None), rules.time_field)
    if not rules.min_time_us <= time_us <= rules.max_time_us:
        raise InvalidEvent(f"{rules.time_field} {_iso(time_us)} is outside the accepted range "
                           f"[{_iso(rules.min_time_us)}, {_iso(rules.max_time_us)}]")
    canonical = orjson.dumps(event, option=orjson.OPT_SORT_KEYS)
    return ParsedEvent(event_id, key_digest(event_id), fingerprint(canonical), time_us, raw)


def normalize_event_id(value: object, field: str) -> str:
    """Strings are ids as given; integers become their decimal string; anything else is refused."""
    if isinstance(value, bool):
        raise InvalidEvent(f"{field} is a boolean, not an id")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        if not value.strip():
            raise InvalidEvent(f"{field} is empty")
        return value
    if value is None:
        raise InvalidEvent(f"{field} is missing or null")
    raise InvalidEvent(f"{field} is a {_json_type(value)}, not a string or integer")


def parse_event_time(value: object, field: str) -> int:
    """Microseconds since the epoch, UTC, from ISO-8601 with an offset or epoch seconds/milliseconds."""
    if isinstance(value, bool) or value is None:
        raise InvalidEvent(f"{field} is missing or not a timestamp")
    if isinstance(value, (int, float)):
        return _epoch_to_us(value, field)
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return _epoch_to_us(int(text), field)
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidEvent(f"{field} {value!r} is not ISO-8601 or epoch seconds/milliseconds") from None
        if moment.tzinfo is None:
            raise InvalidEvent(f"{field} {value!r} has no UTC offset; add 'Z' or '+hh:mm'")
        delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    raise InvalidEvent(f"{field} is a {_json_type(value)}, not a timestamp")


def _epoch_to_us(value: int | float, field: str) -> int:
    if value != value or value in (float("inf"), float("-inf")):
        raise InvalidEvent(f"{field} is not a finite number")
    if abs(value) >= _MILLIS_THRESHOLD:
        return int(round(value * 1_000))
    return int(round(value * 1_000_000))


def _json_type(value: object) -> str:
    return {dict: "JSON object", list: "JSON array", float: "number"}.get(type(value), type(value).__name__)


def _iso(time_us: int) -> str:
    try:
        return datetime.fromtimestamp(time_us / 1_000_000, timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return f"{time_us} microseconds since the epoch"
