"""The compiled core normalises ids as Python does: str.strip() and str.lower() of every code point
they change, from tables the build generates from the interpreter itself. Each case's expectation
is parse_event's (the reference); the core must vouch for the plain ones and leave the
context-dependent one (a capital sigma, lowered by what follows it) to the reference."""
from __future__ import annotations

import itertools
import sys

import orjson
import pytest

from eventdedup.parse import native_core
from eventdedup.parse.event_parser import InvalidEvent, parse_event
from eventdedup.parse.fingerprints import FingerprintRules
from eventdedup.parse.rules import ParseRules

pytestmark = pytest.mark.skipif(not native_core.available(), reason="the compiled core is not built here")

SPACES = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c < 0xE000 and chr(c).isspace()]
CHANGED_BY_LOWER = [chr(c) for c in range(0x80, sys.maxunicode + 1)
                    if not 0xD800 <= c < 0xE000 and chr(c).lower() != chr(c)]


def _rules(trim: bool, lower: bool) -> ParseRules:
    return ParseRules(key_fields=("id",), time_field="t", min_time_us=0, max_time_us=2**62, trim=trim, lower=lower,
                      fingerprint=FingerprintRules(algorithm="xxh3-64"))


def _line(event_id: str) -> bytes:
    return orjson.dumps({"id": event_id, "t": "2026-11-22T11:00:00Z"})


def _vouched(ids: list[str], rules: ParseRules) -> dict[str, str]:
    """id -> the core's key text, for the ids it vouched for."""
    scanned = native_core.scan([_line(i) for i in ids], rules)
    texts = scanned.table_without_seq.column("event_id").to_pylist()
    return {ids[offset]: text for offset, text in zip(scanned.offsets.tolist(), texts, strict=True)}


def _escaped(event_id: str) -> bool:
    """Whether JSON writes the id with an escape (the core reads only unescaped ids)."""
    return any(ord(char) < 0x20 or char in '"\\' for char in event_id)


def _reference(event_id: str, rules: ParseRules) -> str | None:
    try:
        return parse_event(_line(event_id), rules).event_id
    except InvalidEvent:
        return None


@pytest.mark.parametrize(("trim", "lower"), [(False, False), (True, False), (False, True), (True, True)])
def test_every_code_point_lower_changes_and_every_space_normalise_as_python_does(trim: bool, lower: bool) -> None:
    rules = _rules(trim, lower)
    ids = [f"A{char}b" for char in CHANGED_BY_LOWER]  # each code point inside an id
    ids += [f"{space}Évt-{n}{space}" for n, space in enumerate(SPACES)]  # at both ends
    ids += [space * 3 for space in SPACES] + ["".join(SPACES)]  # blank: the reference refuses them
    ids += ["ΑΣ", "ΑΣ Β", "Σ", "σ", "İx", "ǅ", "日本語", "\u00a0x\u3000"]
    vouched = _vouched(ids, rules)
    for event_id in ids:
        expected = _reference(event_id, rules)
        if event_id in vouched:
            assert vouched[event_id] == expected, repr(event_id)
        else:  # left to the reference: blank ids, ids JSON escapes, and a sigma under lower
            assert expected is None or _escaped(event_id) or (lower and "Σ" in event_id), repr(event_id)
    plain = [i for i in ids if _reference(i, rules) is not None and not _escaped(i) and not (lower and "Σ" in i)]
    assert set(plain) <= set(vouched)


def test_ids_the_core_and_the_reference_agree_on_mixed_spaces_and_cases() -> None:
    pieces = ["É", "é", " ", "\u3000", "x", "İ", "\u0085", "ß", "Ω"]
    ids = ["".join(parts) for parts in itertools.product(pieces, repeat=3)]
    for trim, lower in [(True, True), (True, False), (False, True)]:
        rules = _rules(trim, lower)
        vouched = _vouched(ids, rules)
        assert {i: t for i, t in vouched.items()} == {i: _reference(i, rules) for i in vouched}
        assert len(vouched) >= len([i for i in ids if _reference(i, rules) is not None]) * 0.9
