"""The typed records the dedup job moves: through the shuffle, and from executors to the driver.

Through the shuffle, every record is keyed by an integer shuffle code whose high bits are the
dedup partition it goes to (`partition_of_code`; a bucket's partition is `bucket % partitions`,
so every hour of a bucket meets in one task) and whose low bits order the records within it.
A read task sends each dedup partition its rows as one chunk, each object's findings to the
partition that writes the object's quarantine, and the line counts of its ranges to every
partition (they turn local line numbers into the object's). What a record is, is told by its
type, never by its code. To the driver, executors return only staged-object descriptions and counts.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from eventdedup.commit.changes import ColumnFigures
from eventdedup.commit.job_result import StagedObject
from eventdedup.counts import BatchCounts
from eventdedup.tables import Seq

_PARTITION_SHIFT = 32
_ORDINAL_BITS = 30  # read ranges of one batch
_LINES, _STATS, _CHUNK = 0, 1, 2


@dataclass(frozen=True)
class EventChunk:
    """Parsed events of one read range bound for one dedup partition, in input order, as zstd
    Arrow IPC (SHUFFLE_SCHEMA: the parsed columns and each event's cache hour)."""

    first_seq: int  # ranges never interleave: chunks in order of their first seq are in input order
    ipc: bytes


@dataclass(frozen=True)
class RangeLines:
    """How many lines one read range of an object held."""

    input_index: int
    unit: int
    lines: int


@dataclass(frozen=True)
class RangeFindings:
    """The lines of one read range that were quarantined, numbered locally (read_units.ReadUnit)."""

    input_index: int
    unit: int
    lines: int
    raw: list[bytes] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    local_lines: list[int] = field(default_factory=list)


ShuffleRecord = tuple[int, EventChunk | RangeLines | RangeFindings]


def _code(partition: int, kind: int, ordinal: int) -> int:
    return (partition << _PARTITION_SHIFT) | (kind << _ORDINAL_BITS) | ordinal


def chunk_record(partition: int, ordinal: int, chunk: EventChunk) -> ShuffleRecord:
    return _code(partition, _CHUNK, ordinal), chunk


def findings_record(partitions: int, ordinal: int, findings: RangeFindings) -> ShuffleRecord:
    return _code(findings.input_index % partitions, _STATS, ordinal), findings


def line_records(partitions: int, ordinal: int, lines: RangeLines) -> list[ShuffleRecord]:
    return [(_code(partition, _LINES, ordinal), lines) for partition in range(partitions)]


def partition_of_code(code: int) -> int:
    """Spark's partitioner (taken modulo the partition count): the code's partition."""
    return code >> _PARTITION_SHIFT


def partition_of_bucket(bucket: Seq, partitions: int) -> Seq:
    """A bucket's dedup partition (per key, or over an array of them)."""
    partition: Seq = bucket % partitions
    return partition


@dataclass(frozen=True)
class PartitionCounts:
    """Counts one dedup task adds to the batch's totals, and the earlier batches it decided
    duplicates against (holder -> audit rows; eventdedup.commit.changes.BatchChange.decided_against)."""

    counts: BatchCounts
    decided_against: Mapping[str, int] = field(default_factory=dict)
    # Its duplicates by input folder and by producer ("": none recorded); BatchChange's, summed.
    duplicates_by_folder: Mapping[str, int] = field(default_factory=dict)
    duplicates_by_producer: Mapping[str, int] = field(default_factory=dict)
    copies_decided_against: Mapping[str, int] = field(default_factory=dict)
    quarantined_by_reason: Mapping[str, int] = field(default_factory=dict)
    # Per declared column, its output rows that mismatched and that are null (BatchChange's, summed).
    column_figures: Mapping[str, ColumnFigures] = field(default_factory=dict)


DriverRecord = StagedObject | PartitionCounts
