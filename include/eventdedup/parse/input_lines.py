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
    split = split_input(body)
    for number, piece in enumerate(split.pieces, start=1):
        yield line_of_piece(number, piece)
    yield from split.trailing


@dataclass(frozen=True)
class SplitInput:
    """An object cut at its newlines. `pieces[i]` is line i + 1 exactly as between the newlines
    (a "\r" or blank content still in it: `line_of_piece` judges it); `trailing` holds what
    follows the last newline and findings about the object as a whole."""

    pieces: list[bytes]
    trailing: list[InputLine]


def split_input(body: bytes) -> SplitInput:
    text, tail_error = _decompress(body) if body.startswith(GZIP_MAGIC) else (body, None)
    if not text and tail_error is None:
        return SplitInput([], [InputLine(0, b"", "empty object: no lines")])
    if text.startswith(UTF8_BOM):
        text = text[len(UTF8_BOM):]
    pieces = text.split(b"\n")
    # A complete object ends with "\n", leaving an empty last piece that is not a line;
    # a truncated gzip stream leaves a partial last line, which is quarantined below.
    last = pieces.pop()
    number = len(pieces) + 1
    if tail_error is not None:
        trailing = [InputLine(number, last, tail_error)]
    elif last.strip():
        # Final line without a trailing newline: still a line.
        trailing = [InputLine(number, last[:-1] if last.endswith(b"\r") else last)]
    elif last:
        trailing = [InputLine(number, last, "blank line")]
    else:
        trailing = []
    return SplitInput(pieces, trailing)


def line_of_piece(number: int, piece: bytes) -> InputLine:
    if piece.endswith(b"\r"):
        piece = piece[:-1]
    if not piece.strip():
        return InputLine(number, piece, "blank line")
    return InputLine(number, piece)


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
