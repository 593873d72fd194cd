"""How an event's time is read, and the refusal every parser raises: below the event parser and the
declared columns (eventdedup.parse.columns), which both read timestamps this way."""
from __future__ import annotations

import math
import re
from datetime import datetime, timezone

# Epoch numbers at or above this magnitude are milliseconds (1e11 s is the year 5138).
EPOCH_MILLIS_THRESHOLD = 100_000_000_000
# An epoch timestamp as a string: ASCII digits only ("²".isdigit() is True, and int() refuses it).
_EPOCH_TEXT = re.compile(r"-?[0-9]+")
_EPOCH_MAX_DIGITS = 20  # beyond any accepted instant in any unit; also far below int()'s digit limit


class InvalidEvent(ValueError):
    """The line is not a usable event; the message is the quarantine reason."""


def parse_event_time(value: object, field: str) -> int:
    """Microseconds since the epoch, UTC, from ISO-8601 with an offset or epoch seconds/milliseconds."""
    if isinstance(value, bool) or value is None:
        raise InvalidEvent(f"{field} is missing or not a timestamp")
    if isinstance(value, (int, float)):
        return _epoch_to_us(value, field)
    if isinstance(value, str):
        text = value.strip()
        if _EPOCH_TEXT.fullmatch(text):
            if len(text.lstrip("-")) > _EPOCH_MAX_DIGITS:
                raise InvalidEvent(f"{field} {_shown(text)} is outside the accepted range")
            return _epoch_to_us(int(text), field)
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidEvent(f"{field} {_shown(value)} is not ISO-8601 or epoch seconds/milliseconds") from None
        if moment.tzinfo is None:
            raise InvalidEvent(f"{field} {_shown(value)} has no UTC offset; add 'Z' or '+hh:mm'")
        try:  # an offset can move year 1 or 9999 out of datetime's range once in UTC
            delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
        except OverflowError:
            raise InvalidEvent(f"{field} {_shown(value)} is outside the accepted range") from None
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    raise InvalidEvent(f"{field} is a {json_type(value)}, not a timestamp")


def _epoch_to_us(value: int | float, field: str) -> int:
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidEvent(f"{field} is not a finite number")
    scaled = value * 1_000 if abs(value) >= EPOCH_MILLIS_THRESHOLD else value * 1_000_000
    if isinstance(scaled, float) and not math.isfinite(scaled):  # 1e308 seconds overflow as microseconds
        raise InvalidEvent(f"{field} {value!r} is outside the accepted range")
    return int(round(scaled))


def _shown(value: str) -> str:
    """A value as a reason quotes it: bounded, so a 5,000-character field makes a short reason."""
    return repr(value) if len(value) <= 64 else repr(value[:64]) + f"... ({len(value)} characters)"


def json_type(value: object) -> str:
    return {dict: "JSON object", list: "JSON array", float: "number"}.get(type(value), type(value).__name__)


