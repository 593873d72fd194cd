"""The typed records the dedup job moves: through the shuffle, and from executors to the driver.

Through the shuffle, every record is keyed by an integer shuffle code that also decides its
partition (Spark takes it modulo the partition count): a chunk of events goes by its cache key's
code, so consecutive (hour, bucket) keys spread round-robin; an object's statistics go by its
input index, so they spread over partitions too. What a record is, is told by its type, never
by its code. To the driver, executors return only staged-object descriptions and counts.
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


def chunk_record(chunk: EventChunk, buckets: int) -> ShuffleRecord:
    return chunk.key.code(buckets), chunk


def stats_record(stats: ObjectStats) -> ShuffleRecord:
    return stats.input_index, stats


def partition_of_code(code: int) -> int:
    """Spark's partitioner: the code itself, which Spark takes modulo the partition count."""
    return code


@dataclass(frozen=True)
class PartitionCounts:
    """Counts one dedup task (or one input object) adds to the batch's totals."""

    counts: Mapping[str, int]


DriverRecord = StagedObject | PartitionCounts
