"""Split one raw input object (JSON lines, gzip or plain) into numbered lines.

Nothing is dropped here: a blank line, a truncated gzip tail or an empty object becomes an
`InputLine` with an `error`, which the caller sends to quarantine with that reason.
"""
from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class InputLine:
    line_number: int  # 1-based; 0 for a finding about the object as a whole
    raw: bytes
    error: str | None = None


def iter_input_lines(body: bytes) -> Iterator[InputLine]:
    """Yield every line of an object, decompressing gzip (multi-member too) when the magic says so."""
    text, tail_error = _decompress(body) if body.startswith(GZIP_MAGIC) else (body, None)
    if not text and tail_error is None:
        yield InputLine(0, b"", "empty object: no lines")
        return
    if text.startswith(UTF8_BOM):
        text = text[len(UTF8_BOM):]
    pieces = text.split(b"\n")
    # A complete object ends with "\n", leaving an empty last piece that is not a line;
    # a truncated gzip stream leaves a partial last line, which is quarantined below.
    last = pieces.pop()
    number = 0
    for number, piece in enumerate(pieces, start=1):
        if piece.endswith(b"\r"):
            piece = piece[:-1]
        if not piece.strip():
            yield InputLine(number, piece, "blank line")
        else:
            yield InputLine(number, piece)
    if tail_error is not None:
        yield InputLine(number + 1, last, tail_error)
    elif last.strip():
        # Final line without a trailing newline: still a line.
        yield InputLine(number + 1, last[:-1] if last.endswith(b"\r") else last)
    elif last:
        yield InputLine(number + 1, last, "blank line")


def _decompress(body: bytes) -> tuple[bytes, str | None]:
    """Return the decompressed bytes and, for a damaged stream, why it stopped."""
    out: list[bytes] = []
    data = body
    while data:
        decoder = zlib.decompressobj(wbits=31)
        try:
            out.append(decoder.decompress(data))
            out.append(decoder.flush())
        except zlib.error as exc:
            return b"".join(out), f"corrupt gzip stream: {exc}"
        if not decoder.eof:
            return b"".join(out), "truncated gzip stream: the object ends inside a compressed member"
        data = decoder.unused_data
    return b"".join(out), None
