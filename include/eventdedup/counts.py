"""What a batch counts: one home for every count's name, its meaning and the sums that must hold.

A batch's counts travel from each dedup task to the driver, into the job result, the promotion
journal and the commit record, and out to `status`, the metrics line and the Airflow XCom. They
are one typed value everywhere; it is also a read-only mapping (name -> count), which is how the
commit record, the CLI's JSON and the metrics show it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import ClassVar

from eventdedup.errors import EventDedupError


@dataclass(frozen=True)
class BatchCounts(Mapping[str, int]):
    """Every count of one batch. Duplicates are counted twice over: by what was found (the four
    kinds) and by what became of them (dropped, renamed, kept, updated; in observe mode, what
    enforcing would have done with them: the `would_*` counts, while every event is output)."""

    input_lines: int = 0  # every line of every input object read (or quarantined whole)
    malformed: int = 0  # lines quarantined, with their reason
    in_batch_duplicates: int = 0  # dropped: a copy of an event this batch emits
    cross_batch_duplicates: int = 0  # dropped: a copy of an event an earlier batch emitted
    output_rows: int = 0
    cache_keys_written: int = 0  # (key, fingerprint) entries the batch added to the cache
    cross_hour_duplicates: int = 0  # duplicates whose kept copy lies in another hour
    guard_hours_loaded: int = 0  # hour segments loaded because an id guard named them (work, not result)
    in_batch_natural: int = 0
    in_batch_synthetic: int = 0
    cross_batch_natural: int = 0
    cross_batch_synthetic: int = 0
    renamed: int = 0  # synthetic duplicates emitted under a derived id
    kept_synthetic: int = 0  # synthetic duplicates emitted flagged (duplicate_of)
    updates: int = 0  # changelog: emitted as op = update
    # Changelog in an ordered store (a min:/max: survivor: eventdedup.dedup.decide): new versions of
    # a committed key that order before its current version, found and dropped (audited
    # `stale_version`; observe mode: would_drop_stale).
    stale_version: int = 0
    stale_dropped: int = 0
    # Without changelog, in an ordered store: keys of the batch whose preferred new version (the
    # survivor's) orders after the kept version or ties with it, the one version a changelog store
    # would emit of each as an update against that version (a changelog store's own later versions
    # could differ). Not a duplicate found or settled.
    changelog_would_update: int = 0
    # Observe mode ([dedup] mode = "observe"): nothing is dropped, renamed, kept flagged or output
    # as an update; these say what enforcing would have done instead (0 under enforce).
    would_drop_in_batch: int = 0  # would be in_batch_duplicates
    would_drop_cross_batch: int = 0  # would be cross_batch_duplicates
    would_rename: int = 0  # would be renamed
    would_keep: int = 0  # would be kept_synthetic
    would_update: int = 0  # would be updates (not a duplicate found: an update is a key's new version)
    would_drop_stale: int = 0  # would be stale_dropped
    inputs_excluded: int = 0  # input objects an operator excluded, quarantined whole
    inputs_already_consumed: int = 0  # prefix inputs the ingestion ledger held, skipped
    populated: int = 0  # a populate batch: events committed to the cache, not output
    # Events older than the window, checked only within their batch and output: counted by older
    # releases, by nothing now (docs/formats.md). Kept so that their records read whole.
    older_than_window: int = 0

    # Counts of work done, not of results: a rerun may do more of it (the id guards it probes hold
    # ids committed after its batch, and name more hours), so verify-rerun does not compare them.
    WORK: ClassVar[tuple[str, ...]] = ("guard_hours_loaded",)
    # What `status` shows per batch.
    SUMMARY: ClassVar[tuple[str, ...]] = ("input_lines", "malformed", "in_batch_duplicates", "cross_batch_duplicates",
                                          "output_rows")
    # Every name is written, zeros too: readers of a commit record see the whole set.
    CODEC_KEEP_DEFAULTS: ClassVar[bool] = True

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return _NAMES

    @classmethod
    def of(cls, counts: Mapping[str, int]) -> BatchCounts:
        """From a mapping that names only counts (absent ones are 0); an unknown name is refused."""
        unknown = set(counts) - set(cls.names())
        if unknown:
            raise EventDedupError(f"unknown count(s) {sorted(unknown)}; known: {list(cls.names())}")
        return cls(**{name: int(value) for name, value in counts.items()})

    def __getitem__(self, name: str) -> int:
        if name not in _NAME_SET:
            raise KeyError(name)
        value: int = getattr(self, name)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __add__(self, other: BatchCounts) -> BatchCounts:
        return BatchCounts(*(getattr(self, name) + getattr(other, name) for name in _NAMES))

    def results(self) -> dict[str, int]:
        """The counts a recomputation must reproduce (every one but the work counts)."""
        return {name: getattr(self, name) for name in _NAMES if name not in self.WORK}

    def check_balance(self) -> None:
        """Every input line is accounted for exactly once: quarantined, dropped with a reason,
        output, or (a populate batch) committed to the cache only; and every duplicate found was
        dropped, renamed or kept (in observe mode: output, with what enforcing would have done)."""
        accounted = (self.malformed + self.in_batch_duplicates + self.cross_batch_duplicates + self.stale_dropped
                     + self.output_rows + self.populated)
        if accounted != self.input_lines:
            raise EventDedupError(f"counts do not balance: {accounted} accounted for, {self.input_lines} input lines")
        found = (self.in_batch_natural + self.in_batch_synthetic + self.cross_batch_natural + self.cross_batch_synthetic
                 + self.stale_version)
        settled = (self.in_batch_duplicates + self.cross_batch_duplicates + self.stale_dropped + self.renamed
                   + self.kept_synthetic)
        observed = (self.would_drop_in_batch + self.would_drop_cross_batch + self.would_drop_stale + self.would_rename
                    + self.would_keep)
        if found != settled + observed:
            raise EventDedupError(
                f"counts do not balance: {found} duplicates found, {settled} dropped, renamed or kept, {observed} "
                "observed (would be dropped, renamed or kept)")


# Field order, found once: a batch adds one bucket's counts to its total per bucket.
_NAMES: tuple[str, ...] = tuple(spec.name for spec in dataclasses.fields(BatchCounts))
_NAME_SET = frozenset(_NAMES)


# A batch's duplicates by input folder and by producer are recorded (and reported) for their most
# frequent values; the rest are summed under OTHER_VALUES, so a producer field with a value per
# client keeps a commit record small.
RECORDED_VALUES = 100
OTHER_VALUES = "(others)"
# A value is recorded to this many characters (a producer field may hold a payload: the record stays small).
RECORDED_VALUE_CHARS = 128
# A longer folder ends in one folder named by a hash of the whole: "…" and 16 hex digits, then "/".
_FOLDER_DIGEST_BYTES = 8
_FOLDER_TAIL_CHARS = 1 + 2 * _FOLDER_DIGEST_BYTES + 1
_CUT_FOLDER = re.compile(rf"…[0-9a-f]{{{2 * _FOLDER_DIGEST_BYTES}}}/\Z")


def recorded_value(value: str) -> str:
    """A producer value as a commit records it: cut to RECORDED_VALUE_CHARS, "…" last (values alike
    to there add up)."""
    return value if len(value) <= RECORDED_VALUE_CHARS else value[:RECORDED_VALUE_CHARS - 1] + "…"


def recorded_folder(folder: str) -> str:
    """An input folder ("a/b/") as a commit records it: whole up to RECORDED_VALUE_CHARS; a longer
    one as its first characters, "…" and a hash of the whole folder, then "/" (128 characters in
    all). Cut so, a folder stays a folder and stays apart from every other: cut like a value, it
    lost its "/" and read as a file of its parent, and two folders alike to there added up."""
    if len(folder) <= RECORDED_VALUE_CHARS:
        return folder
    digest = hashlib.blake2b(folder.encode("utf-8", "surrogatepass"), digest_size=_FOLDER_DIGEST_BYTES).hexdigest()
    return f"{folder[:RECORDED_VALUE_CHARS - _FOLDER_TAIL_CHARS]}…{digest}/"


def is_folder_cut_as_value(name: str) -> bool:
    """Whether a recorded folder was cut as a value, as records written before 2026-11-28 hold a
    folder over RECORDED_VALUE_CHARS: its first 127 characters and "…", without its "/"
    (docs/formats.md)."""
    return len(name) == RECORDED_VALUE_CHARS and name.endswith("…")


def read_recorded_folder(name: str) -> str:
    """A folder as a commit record names it, read as a folder: a folder cut as a value (an older
    record) gets back its "/", so it is credited to itself, not to its parent."""
    return name + "/" if is_folder_cut_as_value(name) else name


def same_recorded_folders(held: Mapping[str, int], recomputed: Mapping[str, int]) -> bool:
    """Whether a rerun recorded the folders its commit holds. A commit that cut a folder as a value
    (an older record) cannot be matched name for name: there every long folder of either is counted
    by the first characters both keep (RECORDED_VALUE_CHARS - 18), the rest name for name."""
    if not any(is_folder_cut_as_value(name) for name in held):
        return dict(held) == dict(recomputed)

    def pooled(folders: Mapping[str, int]) -> dict[str, int]:
        kept = RECORDED_VALUE_CHARS - _FOLDER_TAIL_CHARS
        pools: dict[str, int] = {}
        for name, n in folders.items():
            long = len(name) == RECORDED_VALUE_CHARS and (is_folder_cut_as_value(name) or _CUT_FOLDER.search(name))
            key = name[:kept] + "…" if long else name
            pools[key] = pools.get(key, 0) + n
        return pools

    return pooled(held) == pooled(recomputed)


def bounded_counts(counts: Mapping[str, int], limit: int = RECORDED_VALUES,
                   recorded: Callable[[str], str] = recorded_value) -> dict[str, int]:
    """The `limit` most frequent values by name (ties by name), each as `recorded` bounds it
    (values it makes alike add up), the rest summed under OTHER_VALUES."""
    cut: dict[str, int] = {}
    for value, n in counts.items():
        short = recorded(value)
        cut[short] = cut.get(short, 0) + n
    ranked = sorted(cut.items(), key=lambda item: (-item[1], item[0]))
    kept = dict(ranked[:limit])
    rest = sum(n for _, n in ranked[limit:])
    if rest:
        kept[OTHER_VALUES] = kept.get(OTHER_VALUES, 0) + rest
    return kept


def rolled_up_folders(counts: Mapping[str, int], limit: int = RECORDED_VALUES) -> dict[str, int]:
    """Input folders ("a/b/c/") and their counts, at most `limit` of them: while there are more, the
    deepest folders are counted in their parent's ("a/b/"), level by level, so the sum under every
    prefix of the levels kept is exact (a report by the first N folders adds up whatever was
    rolled up below them); past the top level, the least frequent go to OTHER_VALUES. Each is
    recorded as `recorded_folder` bounds it."""
    folders = dict(counts)
    while len(folders) > limit:
        deepest = max(folder.count("/") for folder in folders)
        if deepest <= 1:
            break
        rolled: dict[str, int] = {}
        for folder, n in folders.items():
            parent = folder.rsplit("/", 2)[0] + "/" if folder.count("/") == deepest else folder
            rolled[parent] = rolled.get(parent, 0) + n
        folders = rolled
    return bounded_counts(folders, limit, recorded_folder)
