"""Byte encodings that sort like the values of a survivor field (min:/max: policies).

Numbers (and booleans, as 0/1) sort before strings, numbers by value, strings by code point.
The event time field compares as the instant it denotes, so mixed offsets and epoch formats
order correctly. A missing or null value has no key and never wins.
"""
from __future__ import annotations

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
        return order_key_of_number(float(value))
    if isinstance(value, str):
        return _STRING_TAG + value.encode("utf-8")
    kind = "JSON object" if isinstance(value, dict) else "JSON array"
    raise NotComparable(f"survivor field {field} is a {kind}, which has no order")


def order_key_of_number(number: float) -> bytes:
    # IEEE-754 bits made to sort as unsigned integers: flip the sign bit of positives, every bit
    # of negatives. Integers beyond 2**53 lose precision; equal-looking values then tie, and ties
    # go to input order.
    (bits,) = struct.unpack(">Q", struct.pack(">d", number + 0.0))
    bits = bits ^ _ALL_BITS if bits & _SIGN_BIT else bits | _SIGN_BIT
    return _NUMBER_TAG + struct.pack(">Q", bits)
