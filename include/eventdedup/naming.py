"""Validation of names that become parts of S3 keys: batch ids and prefixes.

Everything is checked before any S3 call, so a hostile or mistyped name can never address
objects outside the batch's own folders.
"""
from __future__ import annotations

import re

from eventdedup.errors import InvalidNameError

_BATCH_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
# Printable ASCII without space or backslash; S3 allows more, but these are what a prefix
# in a data lake layout reasonably contains, and anything else is more likely a mistake.
_PREFIX_CHARS = re.compile(r"[A-Za-z0-9!_.*'()=+,;:@&$-]+")


def validate_batch_id(batch_id: str) -> str:
    """Return the batch id unchanged, or raise InvalidNameError explaining what is wrong."""
    if not isinstance(batch_id, str) or not _BATCH_ID.fullmatch(batch_id):
        raise InvalidNameError(
            f"batch id {batch_id!r} is invalid: use 1-128 characters from A-Z a-z 0-9 . _ -"
        )
    if ".." in batch_id or batch_id.startswith("."):
        raise InvalidNameError(f"batch id {batch_id!r} is invalid: it may not start with '.' or contain '..'")
    return batch_id


def normalize_prefix(prefix: str, *, what: str = "prefix", allow_empty: bool = False) -> str:
    """Return the prefix ending in '/', refusing '..', empty segments, spaces and control characters."""
    if not isinstance(prefix, str):
        raise InvalidNameError(f"{what} must be a string, got {type(prefix).__name__}")
    if prefix in ("", "/"):
        if allow_empty:
            return ""
        raise InvalidNameError(f"{what} may not be empty")
    stripped = prefix[:-1] if prefix.endswith("/") else prefix
    if stripped.startswith("/"):
        raise InvalidNameError(f"{what} {prefix!r} must not start with '/'")
    for segment in stripped.split("/"):
        if segment in ("", ".", ".."):
            raise InvalidNameError(f"{what} {prefix!r} has an empty, '.' or '..' path segment")
        if not _PREFIX_CHARS.fullmatch(segment):
            raise InvalidNameError(
                f"{what} {prefix!r} contains a space, control or non-ASCII character in {segment!r}"
            )
    return stripped + "/"


def key_folder(key: str) -> str:
    """The folder an object key lies in, with its trailing '/' ("landing/a/1.jsonl" -> "landing/a/";
    a key at the top level: "")."""
    folder, slash, _ = key.rpartition("/")
    return folder + slash
