"""Times carried by ids (partition_time = "id"), checked against independent encoders."""
from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pytest

from eventdedup.parse.id_time import NoIdTime, id_time_us

MOMENT = datetime(2026, 11, 22, 5, 50, 12, 345678, tzinfo=timezone.utc)
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def test_uuid1_time_matches_pythons_uuid_module() -> None:
    for node in range(50):
        value = uuid.uuid1(node=node, clock_seq=node)
        expected_us = (value.time - 0x01B21DD213814000) // 10
        assert id_time_us(str(value)) == expected_us
        assert id_time_us(str(value).upper()) == expected_us


def test_uuid7_and_ulid_carry_their_milliseconds() -> None:
    millis = int(MOMENT.timestamp() * 1000)
    digits = f"{millis:012x}7abc9{0:015x}"
    v7 = f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"
    ulid = "".join(CROCKFORD[(millis << 80 >> (5 * i)) & 31] for i in range(25, -1, -1))
    assert id_time_us(v7) == millis * 1000
    assert id_time_us(ulid) == id_time_us(ulid.lower()) == millis * 1000


@pytest.mark.parametrize(("text", "reason"), [
    (str(uuid.UUID(int=0x1234, version=4)), "a version 4 UUID, which carries no time"),
    ("0b7e4c1a-3f2d-7e5b-1a8c-7d6e5f4a3b2c", "variant '1', not RFC 9562"),
    ("0b7e4c1a3-f2d-7e5b-9a8c-7d6e5f4a3b2c", "not a hyphenated UUID"),
    ("8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "overflows 48 bits"),
    ("01ARZ3NDEKTSV4RRFFQ69G5FAU", "not a ULID"),
    ("order-17", "neither a UUID (36 characters) nor a ULID (26)"),
])
def test_ids_without_a_readable_time_are_refused_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(NoIdTime, match=reason.replace("(", r"\(").replace(")", r"\)")):
        id_time_us(text)
