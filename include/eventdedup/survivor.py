"""Which copy of a key survives within a batch (Flink's ROW_NUMBER() OVER (PARTITION BY key ORDER BY ...)).

`first` and `last` follow input order (manifest object order, then line number). `min:<field>`
and `max:<field>` compare the field's values; ties go to the earliest copy in input order, and
a copy without the field (or with null) never beats one that has it. No watermark: nothing is
dropped for arriving late.

Values compare through a byte encoding that sorts like the values: numbers (and booleans, as
0/1) before strings, numbers by value, strings by code point. The event time field compares as
the instant it denotes, so mixed offsets and epoch formats order correctly.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_NUMBER_TAG = b"\x00"
_STRING_TAG = b"\x01"
_SIGN_BIT = 1 << 63
_ALL_BITS = (1 << 64) - 1


class NotComparable(ValueError):
    """The survivor field holds a JSON object or array; the message is the quarantine reason."""


@dataclass(frozen=True)
class SurvivorPolicy:
    kind: str  # first | last | min | max
    field: str | None = None

    @classmethod
    def parse(cls, text: str) -> SurvivorPolicy:
        kind, _, field = text.partition(":")
        return cls(kind, field or None)

    @property
    def needs_order_key(self) -> bool:
        return self.kind in ("min", "max")

    def priorities(self, order_keys: pa.Array | pa.ChunkedArray, rows: int) -> np.ndarray:
        """Per row (rows in input order), its rank in preference: 0 is the preferred copy."""
        if self.kind == "first":
            return np.arange(rows, dtype=np.int64)
        if self.kind == "last":
            return np.arange(rows - 1, -1, -1, dtype=np.int64)
        order = "ascending" if self.kind == "min" else "descending"
        ranks = pc.rank(order_keys, sort_keys=[("", order, "at_end")], tiebreaker="first")
        return ranks.to_numpy().astype(np.int64) - 1


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
