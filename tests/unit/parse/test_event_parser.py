from __future__ import annotations

import hashlib
from datetime import datetime, timezone

import orjson
import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from eventdedup.config import NEW_STORE_FINGERPRINT, config_from_mapping
from eventdedup.keys import key_digest
from eventdedup.parse.event_parser import InvalidEvent, parse_event
from eventdedup.parse.fingerprints import FingerprintRules, fingerprint_digests, fingerprint_of_canonical
from eventdedup.parse.rules import ParseRules

AS_OF = datetime(2026, 11, 22, 5, 0, tzinfo=timezone.utc)


def rules_with(fingerprint_hash: str = NEW_STORE_FINGERPRINT, **dedup: object) -> ParseRules:
    return ParseRules.for_batch(config_from_mapping({"s3": {"bucket": "bkt"}, "dedup": dedup}), AS_OF,
                                fingerprint_hash=fingerprint_hash)


RULES = rules_with()
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
    c = parse_event(b'{"event_id":"e","created_at":"2026-11-22T04:30:00Z","x":"e"}', RULES)
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


def line(**fields: object) -> bytes:
    return orjson.dumps({"created_at": "2026-11-22T04:30:00Z", **fields})


def test_composite_keys_scope_insert_ids_per_user_and_keep_their_parts_apart() -> None:
    rules = rules_with(key_fields=["user_id", "insert_id"])
    a = parse_event(line(user_id="u1", insert_id=7), rules)
    b = parse_event(line(user_id="u2", insert_id=7), rules)
    tricky = parse_event(line(user_id='u1","7', insert_id="x"), rules)
    assert a.event_id == '["u1","7"]' and b.event_id == '["u2","7"]'
    assert len({a.digest, b.digest, tricky.digest}) == 3
    with pytest.raises(InvalidEvent, match="insert_id is missing or null"):
        parse_event(line(user_id="u1"), rules)


def test_normalisation_trims_and_lower_cases_every_key_part_before_hashing() -> None:
    rules = rules_with(key_fields=["user_id", "insert_id"], normalize=["trim", "lower"])
    assert parse_event(line(user_id=" U1 ", insert_id="AbC"), rules).event_id == '["u1","abc"]'
    plain = parse_event(line(event_id=" E1"), RULES)
    assert plain.event_id == " E1" and plain.digest != parse_event(line(event_id="e1"), RULES).digest


def test_canonical_uuids_are_stored_as_their_sixteen_raw_bytes_other_ids_as_digests() -> None:
    text = "0f8fad5b-d9cb-469f-a165-70867728950e"
    assert parse_event(line(event_id=text), RULES).digest == bytes.fromhex(text.replace("-", ""))
    upper = parse_event(line(event_id=text.upper()), RULES)
    assert upper.digest == key_digest(text.upper()) != bytes.fromhex(text.replace("-", ""))
    lowered = parse_event(line(event_id=text.upper()), rules_with(normalize=["lower"]))
    assert lowered.digest == bytes.fromhex(text.replace("-", ""))


def test_fingerprint_excludes_volatile_fields_or_covers_only_the_listed_ones() -> None:
    excluding = rules_with(fingerprint_exclude=["collector_tstamp"])
    a = parse_event(line(event_id="e", v=1, collector_tstamp="t1"), excluding)
    b = parse_event(line(event_id="e", v=1, collector_tstamp="t2"), excluding)
    c = parse_event(line(event_id="e", v=2, collector_tstamp="t1"), excluding)
    assert a.fingerprint == b.fingerprint != c.fingerprint
    listed = rules_with(fingerprint_fields=["v"])
    assert parse_event(line(event_id="e", v=1, w=1), listed).fingerprint == \
        parse_event(line(event_id="e", v=1, w=2), listed).fingerprint
    assert parse_event(line(event_id="e", v=None), listed).fingerprint != \
        parse_event(line(event_id="e"), listed).fingerprint


def test_survivor_order_keys_sort_like_the_values_and_the_time_field_as_an_instant() -> None:
    rules = rules_with(survivor="min:price")
    keys = [parse_event(line(event_id="e", price=value), rules).order_key for value in (-2.5, -1, 0, 3, 10, "a", "b")]
    assert keys == sorted(keys)
    assert parse_event(line(event_id="e"), rules).order_key is None
    with pytest.raises(InvalidEvent, match="survivor field price is a JSON object"):
        parse_event(line(event_id="e", price={"v": 1}), rules)
    by_time = rules_with(survivor="max:created_at")
    early = parse_event(b'{"event_id":"e","created_at":"2026-11-22T05:30:00+02:00"}', by_time)
    late = parse_event(b'{"event_id":"e","created_at":"2026-11-22T04:00:00Z"}', by_time)
    assert early.order_key < late.order_key


def test_survivor_values_read_as_instants_order_by_the_instant_whatever_their_spelling() -> None:
    """survivor_values = "instant": the field is read as the time field is (ISO-8601 with any
    offset, or epoch seconds or milliseconds); a value that is no instant
    is quarantined with its reason; a missing one has no order key."""
    rules = rules_with(survivor="max:updated_at", survivor_values="instant")
    spellings = [b'"2026-11-22T05:30:00+02:00"', b'"2026-11-22T03:30:00Z"', b"1795318200", b"1795318200000"]
    keys = {parse_event(b'{"event_id":"e","created_at":"2026-11-22T04:00:00Z","updated_at":' + value + b"}",
                        rules).order_key for value in spellings}
    assert len(keys) == 1  # one instant, four spellings (2026-11-22T03:30:00Z = 1795318200 s)
    later = parse_event(b'{"event_id":"e","created_at":"2026-11-22T04:00:00Z","updated_at":"2026-11-22T03:30:01Z"}',
                        rules).order_key
    assert later > keys.pop()
    as_values = rules_with(survivor="max:updated_at")  # compared as values, the strings sort by their text
    assert parse_event(line(event_id="e", updated_at="2026-11-22T05:30:00+02:00"), as_values).order_key > \
        parse_event(line(event_id="e", updated_at="2026-11-22T04:00:00Z"), as_values).order_key
    assert parse_event(line(event_id="e"), rules).order_key is None
    with pytest.raises(InvalidEvent, match="survivor field: "):
        parse_event(line(event_id="e", updated_at="yesterday"), rules)


def test_repeated_keys_are_quarantined_at_any_depth_and_with_any_spacing() -> None:
    with pytest.raises(InvalidEvent, match='repeated key "event_id" in one JSON object'):
        parse_event(line(event_id="a")[:-1] + b',"event_id":"b"}', RULES)
    with pytest.raises(InvalidEvent, match='repeated key "k" in one JSON object'):
        parse_event(line(event_id="a")[:-1] + b',"p":[{"k":1 ,  "k"\t:1}]}', RULES)
    # '":' inside a string value is not a key: accepted after the exact check.
    assert parse_event(line(event_id="a", s='x":" y', t='"  :'), RULES).event_id == "a"


json_scalars = st.one_of(st.integers(-5, 5), st.sampled_from(['"x"', '"a\\":b"', '"\\" :"', '" "', "true", "null"]))
json_spaces = st.sampled_from(["", " ", "\t", "\n ", "  "])


@st.composite
def json_texts(draw: st.DrawFn, depth: int = 0) -> str:
    members = draw(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d d", "a\\u0020"]), json_spaces, json_spaces,
                                      st.integers(0, 3) if depth < 2 else st.just(0)), max_size=5))
    parts = []
    for key, before, after, kind in members:
        if kind == 1:
            value = draw(json_texts(depth + 1))
        elif kind == 2:
            value = "[" + ",".join(draw(st.lists(json_texts(depth + 1), max_size=2))) + "]"
        else:
            value = draw(json_scalars)
        parts.append(f'"{key}"{before}:{after}{value}')
    return "{" + draw(json_spaces) + ",".join(parts) + "}"


def repeats_a_key(text: str) -> bool:
    import json

    repeated = []

    def hook(pairs: list) -> dict:
        keys = [k for k, _ in pairs]
        repeated.extend(k for k in set(keys) if keys.count(k) > 1)
        return dict(pairs)

    json.loads(text, object_pairs_hook=hook)
    return bool(repeated)


@given(json_texts())
def test_repeated_key_detection_agrees_with_a_parser_that_sees_every_key(text: str) -> None:
    from eventdedup.parse.event_parser import refuse_repeated_keys

    data = text.encode()
    try:
        refuse_repeated_keys(data, orjson.loads(data))
        found = False
    except InvalidEvent:
        found = True
    assert found == repeats_a_key(text)


# Written out from the definition, not from eventdedup: the hash of canonical JSON as uint64.
FINGERPRINT_DEFINITIONS = {
    "blake2b-64": lambda canonical: int.from_bytes(hashlib.blake2b(canonical, digest_size=8).digest(), "big"),
    "xxh3-64": lambda canonical: xxhash.xxh3_64(canonical, seed=0).intdigest(),
}


@pytest.mark.parametrize("algorithm", list(FINGERPRINT_DEFINITIONS))
def test_a_fingerprint_is_its_caches_hash_of_canonical_json_one_by_one_and_in_bulk(algorithm: str) -> None:
    """Fingerprints are stored in the cache: their definition must never drift between the
    per-event and the bulk path, or between versions."""
    events = [{"b": 1, "a": [{"y": "é", "x": None}]}, {}, {"event_id": "e1", "n": 1.5e300}, {"event_id": "e0"}]
    canonical = [orjson.dumps(event, option=orjson.OPT_SORT_KEYS) for event in events]
    expected = [FINGERPRINT_DEFINITIONS[algorithm](payload) for payload in canonical]
    assert any(value >= 2**63 for value in expected)  # so the top bit is checked too: uint64, not int64
    rules = FingerprintRules(algorithm=algorithm)
    assert [rules.fingerprint(event) for event in events] == expected
    assert fingerprint_digests(events, rules).tolist() == expected
    assert [fingerprint_of_canonical(payload, algorithm) for payload in canonical] == expected
    assert fingerprint_digests([], rules).tolist() == []


def test_a_batchs_rules_fingerprint_with_the_hash_they_are_given_and_fields_narrow_it_alike() -> None:
    line = b'{"event_id":"e1","created_at":"2026-11-22T04:30:00Z","v":1}'
    narrowed = orjson.dumps({"v": 1})
    for algorithm, definition in FINGERPRINT_DEFINITIONS.items():
        assert rules_with(fingerprint_hash=algorithm, fingerprint_fields=["v"]).fingerprint.algorithm == algorithm
        assert parse_event(line, rules_with(algorithm, fingerprint_fields=["v"])).fingerprint == definition(narrowed)
    assert FingerprintRules().algorithm == "blake2b-64"  # what every fingerprint was before the hash was recorded
    with pytest.raises(ValueError, match="unknown fingerprint hash 'xxh3-128'"):
        FingerprintRules(algorithm="xxh3-128")


def test_integers_a_double_cannot_hold_order_by_their_digits() -> None:
    """1700000000000000001 and 1700000000000000000 are one double: as order keys they must still
    order (a nanosecond timestamp, an LSN), and against floats by exact value."""
    rules = rules_with(survivor="max:version")
    def key(value: object) -> bytes:
        return parse_event(line(event_id="e", version=value), rules).order_key
    values = [-(2**63), -(2**53) - 1, -1.5, 0, 0.5, 2**53, 2**53 + 1, 1.7e18, 1_700_000_000_000_000_001, 2**64 - 1]
    keys = [key(v) for v in values]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert key(1_700_000_000_000_000_000) == key(1.7e18)  # the same number, spelled two ways
