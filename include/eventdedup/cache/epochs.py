"""Bucket counts by hour: the cache's resharding history (eventdedup.ops.reshard).

The cache identity records the first bucket count. Each reshard commit adds a cut-over: from an
hour boundary on, hour segments are written (and read) with a new count, a multiple of the one
before. Hours before a cut-over keep the count they were written with, so their history stays
visible and nothing is rewritten in place (Tapjoy's previous/current ring configuration, by hour).

Because every count is a multiple of the first, a key's bucket under the first count (its
"coarse" bucket) is its bucket under any later count modulo the first: one coarse bucket holds
whole fine buckets of every epoch. So the job still groups a key's events of every hour by their
coarse bucket (its shuffle, its dedup partitions, its id guards), and a task that holds a coarse
bucket reads and writes exactly the fine segments inside it, whichever epoch an hour is in. The
price of keeping every epoch readable: parallelism stays bounded by the first count.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from eventdedup.errors import ConfigError
from eventdedup.keys import bucket_hash, hour_text

Cutover = tuple[int, int]  # (first hour, hours since the epoch; bucket count from it on)


@dataclass(frozen=True)
class BucketEpochs:
    initial: int
    cutovers: tuple[Cutover, ...] = ()  # ascending hours, each count a multiple of the one before

    @property
    def coarse(self) -> int:
        """The count the job groups by (every later count is a multiple of it)."""
        return self.initial

    @property
    def current(self) -> int:
        return self.cutovers[-1][1] if self.cutovers else self.initial

    def at(self, hour: int) -> int:
        """The bucket count of one hour's segments."""
        count = self.initial
        for first_hour, buckets in self.cutovers:
            if hour >= first_hour:
                count = buckets
        return count

    def fine_buckets(self, digests: npt.NDArray[np.bytes_], hours: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Each key's bucket in its hour's count."""
        counts = np.full(len(hours), self.initial, np.uint64)
        for first_hour, buckets in self.cutovers:
            counts[hours >= first_hour] = buckets
        return (bucket_hash(digests) % counts).astype(np.int64)

    def fine_of(self, coarse_bucket: int, hour: int) -> range:
        """The buckets of one hour that a coarse bucket holds."""
        return range(coarse_bucket, self.at(hour), self.initial)

    def with_cutover(self, first_hour: int, buckets: int) -> BucketEpochs:
        """These epochs plus a reshard; refused unless it grows the count by a whole factor, after
        the last cut-over."""
        if self.cutovers and first_hour <= self.cutovers[-1][0]:
            raise ConfigError(f"a cut-over at {hour_text(first_hour)} is not after the last one "
                              f"({hour_text(self.cutovers[-1][0])})")
        if buckets <= self.current or buckets % self.current:
            raise ConfigError(f"buckets = {buckets}: a reshard grows the count by a whole factor: a multiple of the "
                              f"current {self.current}, above it (a key's new bucket must lie inside its old one)")
        return BucketEpochs(self.initial, (*self.cutovers, (first_hour, buckets)))
