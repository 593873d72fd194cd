"""Listing the landing prefix in a bounded number of requests, whatever its age.

A batch looks back `[inputs] lookback_hours` from its interval's end for objects not yet in the
ingestion ledger; the maintenance sweep looks `sweep_hours` further back. What is listed depends
on how producers name their keys:
- time-partitioned keys (`partition_format`, e.g. Firehose's "%Y/%m/%d/%H/"): one LIST per
  partition of the range, plus the partition after it (a producer's clock ahead of S3's);
- keys that begin with their time (`sorted_key_format`): one LIST from the range's start
  (`StartAfter`), stopped past its end;
- anything else: the whole landing prefix (its cost grows with the prefix: partition the keys).

Partition and key times are the producer's; `LastModified` is when S3 saw the upload start. A
partitioned listing takes every object of its partitions visible before the range's end, whatever
its date (a copy with an old date in a fresh partition is still taken); an unpartitioned one also
needs `LastModified` inside the range. The ledger (callers) decides what was consumed.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from eventdedup.config import Config
from eventdedup.keys import CacheKey, hour_index_at
from eventdedup.s3store import ObjectInfo, S3Store

LIST_PAGE = 1000


@dataclass(frozen=True)
class LandingListing:
    objects: tuple[ObjectInfo, ...]  # every listed object, folder markers left out
    list_requests: int
    by_partition: bool  # listed by partitions: LastModified is not a bound on what a range holds


def list_landing(store: S3Store, config: Config, start: datetime, end: datetime, ahead: bool = True) -> LandingListing:
    """Every landing object whose key or LastModified may place it in [start, end); `ahead` adds
    the partition after the range (a batch's, not the sweep's: that one is the batches')."""
    inputs, landing = config.inputs, config.layout.landing_prefix
    if inputs.partition_format:
        found, requests = [], 0
        for prefix in partition_prefixes(landing, inputs.partition_format, start, end, ahead):
            listed = list(store.list(prefix))
            found += listed
            requests += _pages(len(listed))
        return LandingListing(_data_objects(found), requests, True)
    if inputs.sorted_key_format:
        first = landing + (start - timedelta(hours=1)).strftime(inputs.sorted_key_format)
        last = landing + (end + timedelta(hours=1)).strftime(inputs.sorted_key_format)
        found = []
        for item in store.list(landing, start_after=first):
            if item.key > last and not item.key.startswith(last):
                break  # keys sort by time: nothing later can be in the range
            found.append(item)
        return LandingListing(_data_objects(found), _pages(len(found) + 1), False)
    found = list(store.list(landing))
    return LandingListing(_data_objects(found), _pages(len(found)), False)


def unconsumed_in_range(store: S3Store, config: Config, start: datetime, end: datetime,
                        is_consumed: Callable[[ObjectInfo], bool],
                        ahead: bool = True) -> tuple[list[ObjectInfo], LandingListing]:
    """The listed landing objects of [start, end) that `is_consumed` does not claim, and the listing."""
    listing = list_landing(store, config, start, end, ahead)
    return [item for item in listing.objects if in_range(listing, item, start, end) and not is_consumed(item)], listing


def partition_prefixes(landing: str, partition_format: str, start: datetime, end: datetime,
                       ahead: bool = True) -> list[str]:
    """The partitions of the hours from `start` to `end` (through the hour after it when `ahead`),
    each once, in order."""
    prefixes: list[str] = []
    last_hour = hour_index_at(end) + 1 if ahead else hour_index_at(end - timedelta(microseconds=1))
    for hour in range(hour_index_at(start), last_hour + 1):
        prefix = landing + CacheKey.of_hour(hour, 0).hour_start.strftime(partition_format)
        if not prefixes or prefixes[-1] != prefix:
            prefixes.append(prefix)
    return prefixes


def in_range(listing: LandingListing, info: ObjectInfo, start: datetime, end: datetime) -> bool:
    """Whether a listed object belongs to [start, end): visible before `end` (S3's clock), and for
    unpartitioned listings, not dated before `start` (older ones are the sweep's)."""
    assert info.last_modified is not None  # every listed object has one
    return info.last_modified < end and (listing.by_partition or start <= info.last_modified)


def _data_objects(items: list[ObjectInfo]) -> tuple[ObjectInfo, ...]:
    return tuple(item for item in items if not item.key.endswith("/"))  # console "folders" are not data


def _pages(count: int) -> int:
    return max(1, -(-count // LIST_PAGE))
