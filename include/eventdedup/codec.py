"""One codec for every record eventdedup keeps as JSON: frozen dataclasses to documents and back.

A record's document is derived from its type hints, never written by hand field by field (the
way delta-rs derives its `Action` serialisation): a field named `x` is the key `"x"` (or the
name in its `json` metadata), a nested record is a nested object, a tagged union (members with
a `KIND` class variable) an object with a `"kind"` key, a `tuple`/`frozenset` a list, a `Mapping`
an object, a `datetime` ISO-8601 in UTC, a `NamedTuple` a list. A field equal to its default is
left out, and a missing key reads as the default, so adding an optional field keeps every older
document loadable. Decoding checks every value's type: a damaged document raises `CodecError`
naming the path of the bad value, never a half-read record.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from functools import cache
from typing import Any, TypeVar, Union, get_args, get_origin

import orjson

T = TypeVar("T")
Document = Any  # what orjson reads and writes: dict, list, str, int, float, bool, None


class CodecError(ValueError):
    """A document does not hold the record it should: the message names where and why."""

    def __init__(self, problem: str, path: str = "") -> None:
        super().__init__(f"{path or '$'}: {problem}")
        self.problem, self.path = problem, path

    def at(self, step: str) -> CodecError:
        """The same problem, one step further from the document's root (paths are built only on failure)."""
        return CodecError(self.problem, f"{step}{self.path}")


def json_name(name: str) -> dict[str, str]:
    """Field metadata giving a field another key in its document: `field(metadata=json_name("ledger"))`."""
    return {"json": name}


TRANSIENT = {"transient": True}  # field metadata: kept in memory only, never written nor read


def to_doc(value: Any) -> Document:
    """The JSON document of a record (or of any value the codec knows)."""
    kind: Any = type(value)
    return _encoder(kind)(value)


@cache
def _encoder(kind: Any) -> Callable[[Any], Document]:
    """How values of one type become documents, found once per type (see `_decoder`)."""
    if kind in (str, int, float, bool, type(None)):
        return _identity
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return _record_encoder(kind)
    if issubclass(kind, tuple) and hasattr(kind, "_fields"):  # a NamedTuple
        return lambda value: [to_doc(item) for item in value]
    if issubclass(kind, (tuple, list)):
        return lambda value: [to_doc(item) for item in value]
    if issubclass(kind, frozenset):
        return lambda value: sorted(to_doc(item) for item in value)
    if issubclass(kind, Mapping):
        return lambda value: {str(key): to_doc(item) for key, item in value.items()}
    if issubclass(kind, datetime):
        return lambda value: value.astimezone(timezone.utc).isoformat()
    return _identity


def _record_encoder(cls: type) -> Callable[[Any], Document]:
    kind = getattr(cls, "KIND", None)
    keep_defaults = getattr(cls, "CODEC_KEEP_DEFAULTS", False)
    specs = [(spec.name, spec.key, spec.has_default and not keep_defaults, spec.default) for spec in _fields(cls)]

    def encode(value: Any) -> Document:
        doc: dict[str, Any] = {} if kind is None else {"kind": kind}
        for name, key, may_omit, default in specs:
            item = getattr(value, name)
            if may_omit and item == default():
                continue
            doc[key] = to_doc(item)
        return doc
    return encode


def from_doc(kind: type[T] | Any, doc: Document) -> T:
    """The record of type `kind` a document holds; `CodecError` when it holds something else."""
    hint: Any = kind
    try:
        decoded: T = _decoder(hint)(doc)
        return decoded
    except CodecError as exc:
        raise exc.at("$") from None


def dumps(value: Any, indent: bool = False, format_version: int | None = None) -> bytes:
    """The document's bytes; `format_version` opens it with a `"format"` key (records whose layout
    has changed over time say which one they hold)."""
    doc = to_doc(value)
    if format_version is not None:
        doc = {"format": format_version, **doc}
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 if indent else 0)


def is_older_format(doc: Document, current: int, oldest: int | None, what: str = "format") -> bool:
    """Whether a document is of `oldest`, the one earlier format its reader upgrades (None: an
    unnumbered document, with no "format" key; docs/formats.md). False for the current format and
    for anything but an object (decoding names what is wrong with it). Any other format is refused,
    never read as an older one."""
    if not isinstance(doc, dict) or doc.get("format") == current:
        return False
    if ("format" in doc) != (oldest is not None) or doc.get("format") != oldest:
        raise CodecError(f"unknown {what} {doc.get('format')!r}")
    return True


def loads(kind: type[T], data: bytes, upgrade: Callable[[Document], Document] | None = None) -> T:
    """Parse and decode; `upgrade` turns a document of an older format into the current one first."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CodecError(f"not JSON: {exc}") from None
    if upgrade is not None:
        try:
            doc = upgrade(doc)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, CodecError):
                raise
            raise CodecError(f"an earlier format, but not one it could have written: {exc!r}") from None
    return from_doc(kind, doc)


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    key: str
    hint: Any
    has_default: bool
    default: Callable[[], Any]


def _constant(value: Any) -> Callable[[], Any]:
    return lambda: value


@cache
def _fields(cls: type) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls)
    specs = []
    for spec in dataclasses.fields(cls):
        if spec.metadata.get("transient") or not spec.init:
            continue
        default: Callable[[], Any]
        if spec.default is not dataclasses.MISSING:
            default, has_default = _constant(spec.default), True
        elif spec.default_factory is not dataclasses.MISSING:
            default, has_default = spec.default_factory, True
        else:
            default, has_default = (lambda: None), False
        specs.append(_Field(spec.name, spec.metadata.get("json", spec.name), hints[spec.name], has_default, default))
    return tuple(specs)


Decoder = Callable[[Document], Any]


@cache
def _decoder(hint: Any) -> Decoder:
    """The function that decodes documents of one type, built once per type: records are read in
    bulk (a checkpoint's ledger holds an entry per input object), so nothing is re-derived per value."""
    if hint is Any:
        return _identity
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return _union_decoder(hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _record_decoder(hint)
    if isinstance(hint, type) and issubclass(hint, tuple) and hasattr(hint, "_fields"):  # a NamedTuple
        return _named_tuple_decoder(hint)
    if origin in (tuple, frozenset, list):
        return _sequence_decoder(hint, origin)
    if origin in (dict, Mapping) or origin is typing.Mapping:
        return _mapping_decoder(*get_args(hint))
    if hint is datetime:
        return _datetime
    if hint is int:
        return _integer
    if hint is float:
        return _number
    if hint in (str, bool):
        return _exact(hint)
    if hint is type(None):
        return _null
    raise TypeError(f"the codec cannot decode {hint!r}")


def _identity(doc: Document) -> Any:
    return doc


def _integer(doc: Document) -> int:
    if type(doc) is not int:
        raise CodecError(f"expected an integer, found {doc!r:.80}")
    return doc


def _number(doc: Document) -> float:
    if type(doc) not in (int, float):
        raise CodecError(f"expected a number, found {doc!r:.80}")
    return float(doc)


def _null(doc: Document) -> None:
    if doc is not None:
        raise CodecError(f"expected null, found {doc!r:.80}")


def _datetime(doc: Document) -> datetime:
    try:
        return datetime.fromisoformat(_expect(doc, str))
    except ValueError as exc:
        raise CodecError(str(exc)) from None


def _exact(kind: type) -> Decoder:
    def decode(doc: Document) -> Any:
        if type(doc) is not kind:
            raise CodecError(f"expected {kind.__name__}, found {doc!r:.80}")
        return doc
    return decode


def _record_decoder(cls: type) -> Decoder:
    specs = [(spec.name, spec.key, spec.has_default, spec.hint) for spec in _fields(cls)]

    def decode(doc: Document) -> Any:
        items = _expect(doc, dict)
        values = {}
        for name, key, has_default, hint in specs:
            if key in items:
                try:
                    values[name] = _decoder(hint)(items[key])
                except CodecError as exc:
                    raise exc.at(f".{key}") from None
            elif not has_default:
                raise CodecError(f"no {key!r}")
        try:
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise CodecError(str(exc)) from None
    return decode


def _named_tuple_decoder(cls: type) -> Decoder:
    hints = typing.get_type_hints(cls)
    parts = [_decoder(hints[name]) for name in cls._fields]  # type: ignore[attr-defined]

    def decode(doc: Document) -> Any:
        items = _expect(doc, list)
        if len(items) != len(parts):
            raise CodecError(f"{len(items)} items, expected {len(parts)}")
        return cls(*(part(item) for part, item in zip(parts, items, strict=True)))
    return decode


def _union_decoder(hint: Any) -> Decoder:
    members = get_args(hint)
    nullable = type(None) in members
    options = [member for member in members if member is not type(None)]
    tagged: dict[Any, type] = {getattr(member, "KIND", None): member for member in options
                               if isinstance(member, type) and dataclasses.is_dataclass(member)}
    if None not in tagged and len(tagged) == len(options) and len(options) > 1:
        def decode_tagged(doc: Document) -> Any:
            if doc is None and nullable:
                return None
            kind = _expect(doc, dict).get("kind")
            if kind not in tagged:
                raise CodecError(f"kind {kind!r} is none of {sorted(str(k) for k in tagged)}")
            return _decoder(tagged[kind])(doc)
        return decode_tagged
    if len(options) != 1:
        raise TypeError(f"the codec cannot decode the untagged union {hint!r}")
    only = _decoder(options[0])

    def decode_optional(doc: Document) -> Any:
        return None if doc is None and nullable else only(doc)
    return decode_optional


def _sequence_decoder(hint: Any, origin: Any) -> Decoder:
    args = get_args(hint)
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        parts = [_decoder(arg) for arg in args]

        def decode_fixed(doc: Document) -> Any:
            items = _expect(doc, list)
            if len(items) != len(parts):
                raise CodecError(f"{len(items)} items, expected {len(parts)}")
            return tuple(part(item) for part, item in zip(parts, items, strict=True))
        return decode_fixed
    item_decoder = _decoder(args[0])
    build: Callable[[list[Any]], Any] = {tuple: tuple, frozenset: frozenset, list: list}[origin]

    def decode(doc: Document) -> Any:
        items = _expect(doc, list)
        try:
            return build([item_decoder(item) for item in items])
        except CodecError as exc:
            index = next(i for i, item in enumerate(items) if not _decodes(item_decoder, item))
            raise exc.at(f"[{index}]") from None
    return decode


def _mapping_decoder(key_hint: Any, value_hint: Any) -> Decoder:
    key_decoder, value_decoder = _decoder(key_hint), _decoder(value_hint)

    def decode(doc: Document) -> Any:
        items = _expect(doc, dict)
        try:
            return {key_decoder(key): value_decoder(value) for key, value in items.items()}
        except CodecError as exc:
            key = next(key for key, value in items.items()
                       if not (_decodes(key_decoder, key) and _decodes(value_decoder, value)))
            raise exc.at(f".{key}") from None
    return decode


def _decodes(decoder: Decoder, doc: Document) -> bool:
    try:
        decoder(doc)
    except CodecError:
        return False
    return True


def _expect(doc: Document, kind: type) -> Any:
    if not isinstance(doc, kind):
        raise CodecError(f"expected {kind.__name__}, found {doc!r:.80}")
    return doc
