"""The typed records the dedup job moves: through the shuffle, and from executors to the driver.

Through the shuffle, every record is keyed by an integer shuffle code that also decides its
partition (Spark takes the partitioner's value modulo the partition count): a chunk of events
goes by its bucket, so every hour of a bucket meets in one task (copies of an id in different
hours are decided together), sorted by hour within it; an object's statistics go by its input
index, so they spread over partitions too. What a record is, is told by its type, never by its
code. To the driver, executors return only staged-object descriptions and counts.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from eventdedup.commit.job_result import StagedObject
from eventdedup.keys import CacheKey


@dataclass(frozen=True)
class EventChunk:
    """Parsed events of one input object and one cache key, as LZ4 Arrow IPC (CHUNK_SCHEMA)."""

    key: CacheKey
    ipc: bytes


@dataclass(frozen=True)
class ObjectStats:
    """What reading one input object found: its lines, how many were quarantined, and the staged
    quarantine object holding them (None when every line parsed)."""

    input_index: int
    input_lines: int
    quarantined: int
    quarantine: StagedObject | None


ShuffleRecord = tuple[int, EventChunk | ObjectStats]


_HOUR_BITS = 32
_HOUR_OFFSET = 1 << 31  # hours before 1970 are negative; codes of chunks never are


def chunk_record(chunk: EventChunk) -> ShuffleRecord:
    return (chunk.key.bucket << _HOUR_BITS) | (chunk.key.hour_index + _HOUR_OFFSET), chunk


def stats_record(stats: ObjectStats) -> ShuffleRecord:
    return -1 - stats.input_index, stats


def partition_of_code(code: int) -> int:
    """Spark's partitioner (taken modulo the partition count): a chunk's bucket, an object's index."""
    return code >> _HOUR_BITS if code >= 0 else -1 - code


@dataclass(frozen=True)
class PartitionCounts:
    """Counts one dedup task (or one input object) adds to the batch's totals."""

    counts: Mapping[str, int]


DriverRecord = StagedObject | PartitionCounts
