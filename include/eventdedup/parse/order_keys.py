"""Byte encodings that sort like the values of a survivor field (min:/max: policies).

Numbers (and booleans, as 0/1) sort before strings, numbers by their exact value (an integer
beyond 2**53, which a double rounds, by its digits too), strings by code point.
The event time field compares as the instant it denotes, so mixed offsets and epoch formats
order correctly. A missing or null value has no key and never wins.
"""
from __future__ import annotations

import math
import struct

_NUMBER_TAG = b"\x00"
_STRING_TAG = b"\x01"
_SIGN_BIT = 1 << 63
_ALL_BITS = (1 << 64) - 1


class NotComparable(ValueError):
    """The survivor field holds a JSON object or array; the message is the quarantine reason."""


def order_key_of_value(value: object, field: str) -> bytes | None:
    """A byte string that sorts like the value; None for a missing or null value."""
    if value is None:
        return None
    if isinstance(value, (bool, int, float)):
        return order_key_of_number(value)
    if isinstance(value, str):
        return _STRING_TAG + value.encode("utf-8")
    kind = "JSON object" if isinstance(value, dict) else "JSON array"
    raise NotComparable(f"survivor field {field} is a {kind}, which has no order")


def order_key_of_number(number: int | float) -> bytes:
    """The number's double (the largest one not above it, for an integer a double cannot hold)
    as IEEE-754 bits made to sort as unsigned integers (the sign bit of positives flipped, every
    bit of negatives), then, only for such an integer, how far above that double it lies (8 bytes):
    9 bytes a number, 17 for an integer beyond 2**53 that is not a double, and byte order is
    numeric order, integers and floats mixed."""
    above = 0
    if isinstance(number, int) and not isinstance(number, bool):
        value = float(number)  # nearest; step down to the largest double not above the integer
        if math.isfinite(value) and int(value) > number:
            value = math.nextafter(value, -math.inf)
        above = number - int(value) if math.isfinite(value) else 0
        if not 0 <= above < 1 << 64:
            raise NotComparable(f"{number} is beyond the numbers a survivor field orders")
    else:
        value = float(number)
    (bits,) = struct.unpack(">Q", struct.pack(">d", value + 0.0))
    bits = bits ^ _ALL_BITS if bits & _SIGN_BIT else bits | _SIGN_BIT
    return _NUMBER_TAG + struct.pack(">Q", bits) + (struct.pack(">Q", above) if above else b"")
