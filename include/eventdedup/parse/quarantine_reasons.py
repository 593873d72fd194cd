"""The class of a quarantine row's reason: what the report counts quarantined lines by.

A quarantine row keeps its reason as the parser worded it for people ("created_at '2026-13-01' is
not ISO-8601 ..."), values included; the class is the kind of fault, one of a few names. The
patterns live here, beside the parser package whose messages they read, and a test feeds every
kind of bad line through the parser and checks each lands in its class (tests/unit/parse).
"""
from __future__ import annotations

import re
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc

# (class, pattern), first match wins: specific before general.
# Matched by Arrow (RE2) column-wise; kept as compiled ASCII patterns so a bad one fails at import.
_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((name, re.compile(pattern, re.ASCII)) for name, pattern in (
    ("excluded_input", r"^excluded by operator: "),
    # on_mismatch = "quarantine" (eventdedup.parse.columns.mismatch_reason): before the time classes,
    # which a timestamp column's reason would match too
    ("column_mismatch", r"^column .+ \(.+\): "),
    ("object_too_large", r"^object (inflates past|is larger than) \[events\] max_object_bytes"),
    ("corrupt_compression", r"^(corrupt|truncated) gzip stream"),
    ("empty_object", r"^empty object"),
    ("unreadable_table", r"^(not a readable Parquet file|row \d+)"),
    ("blank_line", r"^blank line$"),
    ("line_too_long", r"^line of \d+ bytes exceeds"),
    ("invalid_utf8", r"^invalid UTF-8"),
    ("malformed_json", r"^(malformed JSON|JSON nested deeper|repeated key)"),
    ("not_an_object", r"^not a JSON object"),
    ("id_without_time", r'^partition_time = "id": '),
    ("time_out_of_range", r"is outside the accepted range"),
    ("bad_time", r"(not a timestamp|is not ISO-8601|has no UTC offset|is not a finite number)"),
    ("bad_id", r"( is missing or null| is empty| is a boolean, not an id|, not a string or integer)$"),
    ("parser_failure", r"^unparseable event"),
))
OTHER = "other"


def reason_class(reason: str) -> str:
    """The class of one quarantine reason, `other` for one no pattern knows: the column-wise
    classifier's answer, so one regex engine (Arrow's RE2) decides every class."""
    return next(iter(reason_class_counts(pa.array([reason], pa.string()))))


def reason_class_counts(reasons: pa.ChunkedArray | pa.Array) -> Counter[str]:
    """Quarantine rows by class, vectorised: a producer gone bad quarantines a million lines a batch,
    each reason worded with its own values, so classes are matched column-wise, first match wins."""
    counts: Counter[str] = Counter()
    unclassified = pc.fill_null(reasons, "")
    for name, pattern in _CLASSES:
        if len(unclassified) == 0:
            break
        matched = pc.match_substring_regex(unclassified, pattern.pattern)
        hits = pc.sum(matched).as_py() or 0
        if hits:
            counts[name] += hits
            unclassified = pc.filter(unclassified, pc.invert(matched))
    if len(unclassified):
        counts[OTHER] += len(unclassified)
    return counts


def reason_classes() -> tuple[str, ...]:
    return tuple(name for name, _ in _CLASSES) + (OTHER,)
