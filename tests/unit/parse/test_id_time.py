"""Times carried by ids (partition_time = "id"), checked against independent encoders."""
from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventdedup.parse.id_time import NO_TIME, NoIdTime, id_time_us, id_times_us

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


def _uuid_text(raw: bytes, upper: bool) -> str:
    text = str(uuid.UUID(bytes=raw))
    return text.upper() if upper else text


# Ids of every kind the column can hold: UUIDs of each version and variant in either case, ULIDs
# of any Crockford letters (either case, past 48 bits, with the letters Crockford leaves out),
# and any other text, of the lengths that matter and not.
UUIDS = st.builds(_uuid_text, st.binary(min_size=16, max_size=16), st.booleans())
TIMED_UUIDS = st.builds(
    lambda raw, version, variant, upper: _uuid_text(
        raw[:6] + bytes([version << 4 | raw[6] & 15]) + raw[7:8] + bytes([variant << 4 | raw[8] & 15]) + raw[9:], upper),
    st.binary(min_size=16, max_size=16), st.sampled_from([1, 7, 4, 0, 15]), st.integers(0, 15), st.booleans())
ULIDS = st.text(alphabet=CROCKFORD + CROCKFORD.lower() + "ILOUu", min_size=26, max_size=26)
VALID_ULIDS = st.builds(lambda first, rest: first + rest, st.sampled_from("01234567"),
                        st.text(alphabet=CROCKFORD + CROCKFORD.lower(), min_size=25, max_size=25))
UPPER_ULIDS = st.builds(lambda first, rest: first + rest, st.sampled_from(CROCKFORD),  # past 48 bits from "8"
                        st.text(alphabet=CROCKFORD, min_size=25, max_size=25))
OTHER = st.one_of(st.text(min_size=26, max_size=26), st.text(min_size=36, max_size=36), st.text(max_size=40),
                  st.text(alphabet="0123456789abcdef-", min_size=36, max_size=36))


@given(ids=st.lists(st.one_of(UUIDS, TIMED_UUIDS, ULIDS, VALID_ULIDS, UPPER_ULIDS, OTHER), max_size=40))
def test_the_column_reads_each_id_as_the_one_id_reader_does(ids: list[str]) -> None:
    expected_times, expected_errors = [], {}
    for row, text in enumerate(ids):
        try:
            expected_times.append(id_time_us(text))
        except NoIdTime as exc:
            expected_times.append(NO_TIME)
            expected_errors[row] = str(exc)
    times, errors = id_times_us(pa.array(ids, pa.string()))
    assert (times.tolist(), errors) == (expected_times, expected_errors)
