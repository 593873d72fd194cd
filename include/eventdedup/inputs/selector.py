"""Which objects a batch asks for: a prefix, a scheduler interval of the landing prefix, or a sweep.

A selector is checked before any S3 request: its prefix is normalised on construction, and
`checked_selector` refuses a prefix that overlaps anything eventdedup writes itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from eventdedup.errors import BatchManifestError, InvalidNameError
from eventdedup.layout import Layout
from eventdedup.naming import normalize_prefix


@dataclass(frozen=True)
class InputSelector:
    """One of:
    - every object under a prefix (`reprocess`: also objects the ingestion ledger holds);
    - an interval [since, until): landing objects of the lookback before `until` that no batch
      has consumed (eventdedup.inputs.landing), whatever interval their LastModified names;
    - a sweep: landing objects of the sweep range before `sweep_before` no batch has consumed.

    `populate` (a prefix only): the prefix is an existing dataset (eventdedup.ops.populate) whose
    events the batch commits to the cache without emitting them; it may be our own output.
    """

    input_prefix: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    reprocess: bool = False
    sweep_before: datetime | None = None
    populate: bool = False

    def __post_init__(self) -> None:
        if self.input_prefix is not None:
            # Normalised and checked on construction, so no selector with an unsafe prefix exists.
            object.__setattr__(self, "input_prefix", normalize_prefix(self.input_prefix, what="input prefix"))
        by_prefix = self.input_prefix is not None
        by_time = self.since is not None or self.until is not None
        if self.reprocess and not by_prefix:
            raise BatchManifestError("--reprocess applies to an --input-prefix batch only")
        if self.populate and not by_prefix:
            raise BatchManifestError("populate reads a prefix (the dataset's), nothing else")
        if self.sweep_before is not None:
            if by_prefix or by_time or self.sweep_before.tzinfo is None:
                raise BatchManifestError("a sweep selects by its own time (with a UTC offset), nothing else")
            return
        if by_prefix == by_time:
            raise BatchManifestError("give either --input-prefix or both --since and --until")
        if by_time:
            if self.since is None or self.until is None:
                raise BatchManifestError("--since and --until go together")
            for moment in (self.since, self.until):
                if moment.tzinfo is None:
                    raise BatchManifestError(f"{moment.isoformat()} needs a UTC offset")
            if not self.since < self.until:
                raise BatchManifestError(
                    f"--since {self.since.isoformat()} must be before --until {self.until.isoformat()}")


def checked_selector(layout: Layout, selector: InputSelector) -> InputSelector:
    """The selector, refused if its prefix overlaps one of eventdedup's own prefixes: reading
    our own output (or cache, or alerts) as input would feed the pipeline its own objects. Populate
    may read the output prefix (its events go to the cache, never back into the output)."""
    prefix = selector.input_prefix
    if prefix is None:
        return selector
    for name, own_prefix in layout.own_prefixes().items():
        if selector.populate and name == "output_prefix" and prefix.startswith(own_prefix):
            continue
        if prefix.startswith(own_prefix) or own_prefix.startswith(prefix):
            raise InvalidNameError(f"input prefix {prefix!r} overlaps eventdedup's own {name} {own_prefix!r}")
    return selector


def utc_iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat()
