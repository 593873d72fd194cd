"""Split one raw input object (JSON lines, gzip or plain) into numbered lines.

Nothing is dropped here: a blank line, a truncated gzip tail or an empty object becomes an
`InputLine` with an `error`, which the caller sends to quarantine with that reason.
"""
from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np
import numpy.typing as npt

from eventdedup.parse import native_core
from eventdedup.parse.rules import DEFAULT_MAX_OBJECT_BYTES

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
_INFLATE_STEP = 16 * 1024 * 1024  # decompressed bytes per zlib call: the limit is checked this often


@dataclass(frozen=True)
class InputLine:
    line_number: int  # 1-based; 0 for a finding about the object as a whole
    raw: bytes
    error: str | None = None


def iter_input_lines(body: bytes, max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES) -> Iterator[InputLine]:
    """Yield every line of an object, decompressing gzip (multi-member too) when the magic says so."""
    split = split_input(body, max_object_bytes)
    for number, piece in enumerate(split.pieces, start=1):
        yield line_of_piece(number, piece)
    yield from split.trailing


class LinePieces(Sequence[bytes]):
    """An object's lines between its newlines, as positions in its text: no bytes object per line
    until one is asked for (the compiled core reads the spans in place; `bytes.split` made a copy
    of every line, ~0.2 us a line, and held the text twice)."""

    __slots__ = ("text", "starts", "ends")

    def __init__(self, text: bytes, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]) -> None:
        self.text, self.starts, self.ends = text, starts, ends

    @classmethod
    def of(cls, text: bytes, start: int, newlines: npt.NDArray[np.int64]) -> LinePieces:
        """The lines from `start` that end at each of the `newlines` (ascending positions)."""
        starts = np.empty(len(newlines), np.int64)
        if len(newlines):
            starts[0] = start
            starts[1:] = newlines[:-1] + 1
        return cls(text, starts, newlines)

    def __len__(self) -> int:
        return len(self.starts)

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> LinePieces: ...

    def __getitem__(self, index: int | slice) -> bytes | LinePieces:
        if isinstance(index, slice):
            return LinePieces(self.text, self.starts[index], self.ends[index])
        return self.text[int(self.starts[index]):int(self.ends[index])]

    def __iter__(self) -> Iterator[bytes]:
        text = self.text
        for start, end in zip(self.starts.tolist(), self.ends.tolist(), strict=True):
            yield text[start:end]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, LinePieces)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable arrays inside: compared by value, never hashed

    def __repr__(self) -> str:
        return f"LinePieces({len(self)} lines of a {len(self.text)}-byte text)"


@dataclass(frozen=True)
class SplitInput:
    """An object cut at its newlines. `pieces[i]` is line i + 1 exactly as between the newlines
    (a "\r" or blank content still in it: `line_of_piece` judges it); `trailing` holds what
    follows the last newline and findings about the object as a whole."""

    pieces: Sequence[bytes]  # LinePieces for text split here; a list where lines come otherwise (Parquet)
    trailing: list[InputLine]


def split_input(body: bytes, max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES) -> SplitInput:
    """An object larger than `max_object_bytes` once decompressed is one finding about the whole
    object (line 0): a gzip bomb is inflated only up to the limit, in steps, and never held whole."""
    text = _object_text(body, max_object_bytes)
    if isinstance(text, SplitInput):
        return text
    chunks, tail_error = text
    return _split_text(chunks.whole(), tail_error, at_object_start=True)


def split_input_share(body: bytes, max_object_bytes: int, share: int, shares: int,
                      max_share_bytes: int) -> SplitInput | None:
    """Share `share` of `shares` of a whole object's lines, for an object that cannot be read in
    byte ranges (gzip): every share inflates the object and keeps the lines whose first byte lies
    in its part of the inflated text, the rule of ranged reads. Together the shares hold exactly
    split_input's lines, in order.

    None for every share but share 0 when the object is judged as a whole (too large, empty) or
    when the shares' local line numbers could overflow (a part longer than `max_share_bytes`):
    share 0 then holds the finding or the whole object, and the other shares report nothing
    (not even a line count), so the object is numbered as if read whole. They stop inflating as
    soon as the object passes what shares may hold (each share holds the whole inflated text,
    so a share that would discard it should not build it). A share copies out only its part:
    it holds the inflated text once, not twice."""
    if share:
        text = _object_text(body, max_object_bytes, give_up_past=shares * max_share_bytes)
        if isinstance(text, SplitInput):
            return None
    else:
        text = _object_text(body, max_object_bytes)
        if isinstance(text, SplitInput):
            return text
    chunks, tail_error = text
    size = chunks.size
    if -(-size // shares) > max_share_bytes:
        return _split_text(chunks.whole(), tail_error, at_object_start=True) if share == 0 else None
    cuts = [0, *(chunks.line_start_from(size * k // shares) for k in range(1, shares)), size]
    start, stop = cuts[share], cuts[share + 1]
    # A damaged stream's finding goes with its partial last line: the last share holding lines.
    owner = max((k for k in range(shares) if cuts[k] < cuts[k + 1]), default=0)
    return _split_text(chunks.slice(start, stop), tail_error if share == owner else None, at_object_start=start == 0)


@dataclass(frozen=True)
class _Chunks:
    """An object's text as the pieces it was inflated in (joined only when needed)."""

    pieces: list[bytes]

    @property
    def size(self) -> int:
        return sum(map(len, self.pieces))

    def whole(self) -> bytes:
        return b"".join(self.pieces)

    def line_start_from(self, position: int) -> int:
        """The first line start at or after `position`: the start of text, or just after a newline."""
        if position == 0:
            return 0
        offset = 0
        for piece in self.pieces:
            if offset + len(piece) >= position:  # the piece holds byte position - 1 or a later one
                newline = piece.find(b"\n", max(position - 1 - offset, 0))
                if newline >= 0:
                    return offset + newline + 1
            offset += len(piece)
        return offset

    def slice(self, start: int, stop: int) -> bytes:
        parts, offset = [], 0
        for piece in self.pieces:
            if offset < stop and offset + len(piece) > start:
                parts.append(piece[max(start - offset, 0):stop - offset])
            offset += len(piece)
        return b"".join(parts)


def _object_text(body: bytes, max_object_bytes: int,
                 give_up_past: int | None = None) -> tuple[_Chunks, str | None] | SplitInput:
    """The object's text and, for a damaged gzip stream, why it stopped; or the one finding about
    the object as a whole (too large, empty; or inflating past `give_up_past`, judged as too
    large by a caller that discards the object then anyway)."""
    if body.startswith(GZIP_MAGIC):
        inflated = _decompress(body, max_object_bytes, give_up_past)
        if inflated is None:
            return SplitInput([], [InputLine(0, b"", object_too_large(max_object_bytes, compressed=True))])
        chunks, tail_error = inflated
    elif len(body) > max_object_bytes:
        return SplitInput([], [InputLine(0, b"", object_too_large(max_object_bytes, compressed=False))])
    else:
        chunks, tail_error = _Chunks([body]), None
    if not chunks.size and tail_error is None:
        return SplitInput([], [InputLine(0, b"", "empty object: no lines")])
    return chunks, tail_error


def split_input_range(body: bytes, at_object_start: bool) -> SplitInput:
    """The lines of one byte range of an uncompressed object (eventdedup.job.read_units): plain
    text, possibly empty; a byte order mark is the object's only at its start."""
    return _split_text(body, None, at_object_start) if body else SplitInput([], [])


def _split_text(text: bytes, tail_error: str | None, at_object_start: bool) -> SplitInput:
    start = len(UTF8_BOM) if at_object_start and text.startswith(UTF8_BOM) else 0
    newlines = newline_positions(text, start)
    pieces = LinePieces.of(text, start, newlines)
    # A complete object ends with "\n", leaving an empty last piece that is not a line;
    # a truncated gzip stream leaves a partial last line, which is quarantined below.
    last = text[int(newlines[-1]) + 1 if len(newlines) else start:]
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


def newline_positions(text: bytes, start: int = 0) -> npt.NDArray[np.int64]:
    """Where each "\n" of `text` from `start` on lies, ascending (the compiled core's memchr where
    it is built, else numpy's)."""
    found = native_core.newline_positions(text, start)
    if found is not None:
        return found
    return (np.flatnonzero(np.frombuffer(text, np.uint8, offset=start) == 0x0A) + start).astype(np.int64)


def line_of_piece(number: int, piece: bytes) -> InputLine:
    if piece.endswith(b"\r"):
        piece = piece[:-1]
    if not piece.strip():
        return InputLine(number, piece, "blank line")
    return InputLine(number, piece)


def object_too_large(max_object_bytes: int, compressed: bool) -> str:
    what = "inflates past" if compressed else "is larger than"
    return (f"object {what} [events] max_object_bytes ({max_object_bytes} bytes): quarantined whole, "
            "its lines unread; raise the limit (and executor memory) to process it")


def _decompress(body: bytes, limit: int, give_up_past: int | None = None) -> tuple[_Chunks, str | None] | None:
    """The decompressed bytes, in the pieces inflated, and, for a damaged stream, why it stopped;
    None once the output passes `limit` (every member counts), having held at most `limit` + one
    step, or passes `give_up_past`. The steps depend on `limit` alone: how much of a corrupt
    stream is recovered depends on them, and shares giving up at other sizes must recover the
    same text."""
    out: list[bytes] = []
    total = 0
    past = min(limit, give_up_past or limit)
    data = body
    while data:
        decoder = zlib.decompressobj(wbits=31)
        pending = data
        try:
            while not decoder.eof:
                piece = decoder.decompress(pending, min(_INFLATE_STEP, limit - total + 1))
                pending = decoder.unconsumed_tail
                total += len(piece)
                if total > past:
                    return None
                out.append(piece)
                if not piece and not pending:
                    break  # the input ended inside the member
            # At a member's end unused_data holds what follows it; flush() would append the
            # unconsumed tail to it a second time when the member's output ended exactly at a
            # step (CPython), and the next members would be inflated twice.
            rest = decoder.unused_data
            piece = b"" if decoder.eof else decoder.flush()
        except zlib.error as exc:
            return _Chunks(out), f"corrupt gzip stream: {exc}"
        total += len(piece)
        if total > past:
            return None
        out.append(piece)
        if not decoder.eof:
            return _Chunks(out), "truncated gzip stream: the object ends inside a compressed member"
        data = rest
    return _Chunks(out), None
