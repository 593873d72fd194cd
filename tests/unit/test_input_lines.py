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
