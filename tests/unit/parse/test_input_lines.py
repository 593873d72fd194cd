from __future__ import annotations

import gzip
import tracemalloc

from hypothesis import example, given
from hypothesis import strategies as st

from eventdedup.parse import input_lines
from eventdedup.parse.input_lines import (
    DEFAULT_MAX_OBJECT_BYTES,
    InputLine,
    SplitInput,
    iter_input_lines,
    line_of_piece,
    split_input,
    split_input_share,
)


def lines(body: bytes) -> list[InputLine]:
    return list(iter_input_lines(body))


def test_plain_lines_are_numbered_from_one_and_crlf_and_bom_are_removed() -> None:
    body = b"\xef\xbb\xbf{\"a\":1}\r\n{\"b\":2}\n{\"c\":3}"
    assert lines(body) == [InputLine(1, b'{"a":1}'), InputLine(2, b'{"b":2}'), InputLine(3, b'{"c":3}')]


def test_blank_lines_are_reported_not_skipped() -> None:
    assert lines(b'{"a":1}\n\n   \n{"b":2}\n') == [
        InputLine(1, b'{"a":1}'), InputLine(2, b"", "blank line"), InputLine(3, b"   ", "blank line"),
        InputLine(4, b'{"b":2}'),
    ]


def test_empty_object_is_one_finding() -> None:
    assert lines(b"") == [InputLine(0, b"", "empty object: no lines")]


def test_gzip_including_concatenated_members() -> None:
    body = gzip.compress(b'{"a":1}\n', mtime=0) + gzip.compress(b'{"b":2}\n', mtime=0)
    assert lines(body) == [InputLine(1, b'{"a":1}'), InputLine(2, b'{"b":2}')]


def test_truncated_gzip_keeps_complete_lines_and_reports_the_partial_tail() -> None:
    full = gzip.compress(b"".join(b'{"n":%d,"pad":"%s"}\n' % (i, b"x" * 50) for i in range(200)), mtime=0)
    found = lines(full[: len(full) // 2])
    complete = [line for line in found if line.error is None]
    assert complete and all(line.raw.startswith(b'{"n":') and line.raw.endswith(b'"}') for line in complete)
    assert [line.line_number for line in complete] == list(range(1, len(complete) + 1))
    tail = found[-1]
    assert tail.error is not None and tail.error.startswith("truncated gzip stream")
    assert tail.line_number == len(complete) + 1


def test_garbage_after_gzip_magic_is_reported() -> None:
    found = lines(b"\x1f\x8b" + b"not really gzip")
    assert len(found) == 1 and found[0].error is not None and "gzip" in found[0].error


MIB = 1024 * 1024


def zeros_member(size: int) -> bytes:
    return gzip.compress(bytes(size), mtime=0)


def test_a_gzip_bomb_is_one_finding_inflated_only_up_to_the_limit() -> None:
    import tracemalloc

    bomb = zeros_member(8 * MIB) * 64  # 512 MiB of zeros in ~0.5 MB: concatenated members are one object
    tracemalloc.start()
    try:
        found = list(iter_input_lines(bomb, max_object_bytes=MIB))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found == [InputLine(0, b"", "object inflates past [events] max_object_bytes (1048576 bytes): "
                                       "quarantined whole, its lines unread; raise the limit (and executor memory) "
                                       "to process it")]
    assert peak < 4 * MIB  # the limit plus one step of the inflater, never the 512 MiB


def test_the_limit_counts_every_member_and_an_object_of_exactly_the_limit_is_read() -> None:
    line = b'{"a":"' + b"x" * 1000 + b'"}\n'
    member = gzip.compress(line * 600, mtime=0)  # 600,600 bytes inflated
    exact = len(line) * 600 * 2
    assert len(list(iter_input_lines(member * 2, max_object_bytes=exact))) == 1200
    assert [item.line_number for item in iter_input_lines(member * 2, max_object_bytes=exact - 1)] == [0]


def test_a_plain_object_over_the_limit_is_one_finding() -> None:
    body = b'{"a":1}\n' * 10
    assert [(item.line_number, item.error) for item in iter_input_lines(body, max_object_bytes=79)] == [
        (0, "object is larger than [events] max_object_bytes (79 bytes): quarantined whole, its lines unread; "
            "raise the limit (and executor memory) to process it")]
    assert len(list(iter_input_lines(body, max_object_bytes=80))) == 10


# Gzip objects cut into shares of their inflated lines (read by several tasks, eventdedup.job.read_units).
LINE_TEXTS = st.one_of(st.binary(max_size=12).map(lambda raw: raw.replace(b"\n", b"")),
                       st.sampled_from([b"", b" ", b"\r", b'{"event_id":"a"}', b'{"event_id":"b"}\r', b"x" * 40,
                                        b"\xef\xbb\xbf{}"]))  # a byte order mark is the object's only at its start


@st.composite
def gzip_objects(draw: st.DrawFn) -> bytes:
    """Gzip objects as producers and damage leave them: one member or several, a byte order mark,
    with or without a final newline, truncated or corrupt at any byte, empty."""
    text = (b"\xef\xbb\xbf" if draw(st.booleans()) else b"") + b"\n".join(draw(st.lists(LINE_TEXTS, max_size=30)))
    if draw(st.booleans()):
        text += b"\n"
    if not draw(st.integers(0, 5)):
        text = b""
    cut = draw(st.integers(0, len(text)))
    members = [text[:cut], text[cut:]] if draw(st.booleans()) else [text]
    body = b"".join(gzip.compress(member, mtime=0) for member in members)
    damage = draw(st.sampled_from(["none", "none", "truncate", "corrupt"]))
    if damage == "truncate":
        body = body[:draw(st.integers(2, len(body)))]
    elif damage == "corrupt":
        at = draw(st.integers(10, len(body) - 1))
        body = body[:at] + bytes([body[at] ^ 0x55]) + body[at + 1:]
    return body


def _lines_of(split: SplitInput) -> list[tuple[bytes, str | None, bool]]:
    """Each line's bytes and reason, and whether it is a finding about the whole object (line 0)."""
    lines = [line_of_piece(number, piece) for number, piece in enumerate(split.pieces, 1)] + split.trailing
    return [(line.raw, line.error, line.line_number == 0) for line in lines]


# Found by the property: a corrupt second member recovers more or less of its text depending on
# the inflate steps, so a share giving up early must take the first share's steps.
@example(body=bytes.fromhex("1f8b0800000000000203ab06003947d51501000000"
                           "1f8b0800000000000203534a2d4bcd2bdccf4c51b2524a54aa0500e99965de0f000000"),
         shares=2, tight=True, limit=DEFAULT_MAX_OBJECT_BYTES, step=input_lines._INFLATE_STEP)
@given(body=gzip_objects(), shares=st.integers(1, 6), tight=st.booleans(),
       limit=st.sampled_from([DEFAULT_MAX_OBJECT_BYTES, DEFAULT_MAX_OBJECT_BYTES, 60]),
       step=st.sampled_from([input_lines._INFLATE_STEP, 1, 7]))
def test_the_shares_of_an_object_hold_its_lines_exactly_once_in_order(body: bytes, shares: int, tight: bool,
                                                                      limit: int, step: int) -> None:
    """Each share numbers its lines from 1 (the object's number comes from the shares before it);
    their lines, share after share, are the object's lines read whole, each exactly once; a
    finding about the whole object is share 0's alone; a share part too long to number locally
    (tight) leaves the object to share 0, read whole, and the other shares report nothing."""
    default_step = input_lines._INFLATE_STEP
    # inflated in pieces of 1 or 7 bytes, so cuts fall across pieces (the step also decides how
    # much of a corrupt stream is recovered, so the whole read uses the same)
    input_lines._INFLATE_STEP = step
    try:
        whole = split_input(body, limit)
        parts = [split_input_share(body, limit, share, shares, max_share_bytes=4 if tight else 1 << 20)
                 for share in range(shares)]
    finally:
        input_lines._INFLATE_STEP = default_step
    if any(line.line_number == 0 for line in whole.trailing) or any(part is None for part in parts):
        # judged as a whole, or numbered whole (tight): share 0 holds it all, the others nothing
        assert parts[0] is not None and _lines_of(parts[0]) == _lines_of(whole)
        assert parts[1:] == [None] * (shares - 1)
        assert tight or shares == 1 or any(line.line_number == 0 for line in whole.trailing)
        return
    assert all(part is not None for part in parts)
    assert [line for part in parts for line in _lines_of(part)] == _lines_of(whole)
    for part in parts:
        numbers = [line.line_number for line in part.trailing if line.line_number]
        assert numbers == [len(part.pieces) + 1] * len(numbers)


def test_a_share_too_long_to_number_locally_leaves_the_object_to_share_0() -> None:
    body = gzip.compress(b"".join(b'{"event_id":"e-%02d"}\n' % n for n in range(10)), mtime=0)  # 200 bytes inflated
    lines = _lines_of(split_input(body))
    parts = [split_input_share(body, DEFAULT_MAX_OBJECT_BYTES, share, 2, max_share_bytes=99) for share in range(2)]
    assert parts[1] is None and parts[0] is not None and _lines_of(parts[0]) == lines
    parts = [split_input_share(body, DEFAULT_MAX_OBJECT_BYTES, share, 2, max_share_bytes=100) for share in range(2)]
    assert [_lines_of(part) for part in parts if part is not None] == [lines[:5], lines[5:]]


def test_a_share_that_would_discard_the_object_stops_inflating_it() -> None:
    """Every share holds the whole inflated text; a share other than the first stops inflating as
    soon as the object passes what shares may hold (give or take one inflate step, which every
    share takes alike), since it would report nothing anyway."""
    line = b"x" * 1023 + b"\n"
    body = gzip.compress(line * (128 << 10), mtime=0)  # 128 MiB of lines, ~128 KiB compressed
    tracemalloc.start()
    try:
        assert split_input_share(body, DEFAULT_MAX_OBJECT_BYTES, 1, 2, max_share_bytes=1 << 20) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * (1 << 20) + 3 * input_lines._INFLATE_STEP  # far below the 128 MiB it would hold
    first = split_input_share(body, DEFAULT_MAX_OBJECT_BYTES, 0, 2, max_share_bytes=1 << 20)
    assert first is not None and first.pieces == [line[:-1]] * (128 << 10)  # read whole by the first share


def test_a_member_ending_exactly_at_an_inflate_step_is_followed_by_the_next_member_once(monkeypatch) -> None:
    """zlib's flush() after a member whose output ended exactly at the inflate step (found with
    small steps) appended what follows the member a second time (CPython), so later members
    were inflated twice: their lines read twice, and with many members without end."""
    monkeypatch.setattr(input_lines, "_INFLATE_STEP", 1)
    body = b"".join(gzip.compress(b"%03d\n" % n, mtime=0) for n in range(3))  # each ends at a step
    # bounded, so the old doubling ends at the limit instead of exhausting memory
    lines = [(line.line_number, line.raw, line.error) for line in iter_input_lines(body, max_object_bytes=64)]
    assert lines == [(1, b"000", None), (2, b"001", None), (3, b"002", None)]
