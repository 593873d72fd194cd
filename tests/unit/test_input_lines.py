from __future__ import annotations

import gzip

from eventdedup.parse.input_lines import InputLine, iter_input_lines


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
