"""Decide one bucket of a batch: every event of the bucket, whatever its hour, against the
committed cache, behind a narrow cache interface.

A bucket's events of every hour are decided together, so copies of one id in different hours of
the batch meet. Which hours of the cache are read: the bucket's own hours (every fine segment an
hour's bucket count puts inside the coarse bucket: eventdedup.cache.epochs) and every hour some
id guard of the window names for one of its ids (eventdedup.cache.guard), each as far as it may
hold the ids probed there (the cache reads an object in parts where they are few:
eventdedup.cache.segment_parts), so copies committed in other hours are found exactly. The
outcome is what the batch emits, what it audits and why, the bucket's new cache segments (one
per (hour, fine bucket) it adds ids to, each merging its own run with the newest objects of the
key's chain and building on the rest: eventdedup.cache.heads) and its new id guard, and its
counts. Nothing here does I/O: the Spark stage's loader (eventdedup.job.dedup_stage) implements
`BucketCache` over S3, and the tests over a dict.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from eventdedup import native_dedup
from eventdedup.cache.epochs import BucketEpochs
from eventdedup.cache.guard import GuardProbe, IdGuard
from eventdedup.cache.heads import ChainPolicy, merged_segment
from eventdedup.cache.segment import CacheRun
from eventdedup.cache.segment_parts import ENTRY_BYTES
from eventdedup.cache.view import CacheView
from eventdedup.counts import BatchCounts
from eventdedup.dedup.decide import (
    Action,
    DuplicatePolicy,
    KeyDecision,
    KeyHours,
    Outcome,
    decide_key_group,
    new_cache_run,
)
from eventdedup.dedup.rows import audit_columns, observed_output_columns, output_columns
from eventdedup.dedup.survivor import SurvivorPolicy
from eventdedup.keys import day_guard_head_key, digest_array, guard_head_key
from eventdedup.sorting import distinct_sorted, unique_inverse


class BucketCache(Protocol):
    """What deciding a bucket reads of the committed cache."""

    def runs_holding(self, hour: int, bucket: int, digests: npt.NDArray[np.bytes_]) -> list[CacheRun]:
        """The committed runs of one (hour, fine bucket) key's chain, oldest object first, as far
        as they may hold these keys (sorted): every entry of them, others perhaps not
        (eventdedup.cache.segment_parts). Empty when the key has no head."""

    def chain_sizes(self, hour: int, bucket: int) -> list[int]:
        """The size in bytes of each object of a key's chain, oldest first (asked only of a key
        `runs_holding` read)."""

    def runs(self, hour: int, bucket: int, newest: int) -> list[CacheRun]:
        """Every run, whole, of the newest `newest` objects of a key's chain, oldest first."""

    def guard(self, head: str) -> IdGuard:
        """The committed id guard the state names `head` (BucketRules.guard_heads); empty when it
        has no head."""


@dataclass(frozen=True)
class BucketRules:
    """What a batch decides its buckets by (eventdedup.cache.history.BatchHistory and the config)."""

    batch_id: str
    # Whose runs the batch sees (owner -> commit version, the order of their runs) and whose runs
    # its new heads carry forward.
    visible_owners: Mapping[str, int]
    kept_owners: frozenset[str]
    arrival_hour: int  # the hour of the guard the batch adds its ids to
    # The window's arrival hours and days: the guards every bucket probes (hour guards; day guards
    # of format 1: docs/formats.md). Both empty: no guard is read.
    guard_hours: tuple[int, ...]
    guard_days: tuple[int, ...]
    epochs: BucketEpochs  # bucket counts by hour; the job groups by the coarse count
    survivor: SurvivorPolicy = SurvivorPolicy("first")
    policy: DuplicatePolicy = DuplicatePolicy()
    # A populate batch (eventdedup.ops.populate): what it would emit goes to the cache only,
    # counted as `populated`.
    populate: bool = False
    # Observe mode ([dedup] mode = "observe"): every row is output as it arrived and the audit says
    # what enforcing would have done; the cache and guards are what enforcing writes. Not for a
    # populate batch, which outputs nothing either way.
    observe: bool = False
    # Whether the batch adds its ids to an id guard (config: DedupSettings.uses_id_guards).
    write_guard: bool = True
    chains: ChainPolicy = ChainPolicy()  # when a new head merges its key's newest objects
    # [dedup] compiled_stage: the compiled dedup core decides where it is built (eventdedup.native_dedup);
    # the same outcome either way.
    compiled: bool = True

    def guard_heads(self, bucket: int) -> list[str]:
        """The state's names of every guard a bucket probes."""
        return ([guard_head_key(hour, bucket) for hour in self.guard_hours]
                + [day_guard_head_key(day, bucket) for day in self.guard_days])


@dataclass(frozen=True)
class NewSegment:
    """A key's new head: its bytes, and how many of the oldest objects of the key's chain (as the
    batch read it) it builds on; the newer ones it merged."""

    data: bytes
    builds_on: int


@dataclass(frozen=True)
class BucketOutcome:
    emitted: npt.NDArray[np.bool_]  # per row of the bucket: whether it is output (observing: every row)
    output: pa.Table  # the emitted rows, OUTPUT_SCHEMA without raw
    duplicates: npt.NDArray[np.intp]  # rows of the bucket the audit holds
    audit: pa.Table  # their audit columns, AUDIT_SCHEMA without raw, source_object and line_number
    counts: BatchCounts
    segments: Mapping[tuple[int, int], NewSegment]  # (hour, fine bucket) -> its new head
    guard: IdGuard | None  # the bucket's new guard of the arrival day; None: it adds no id


def decide_bucket(rules: BucketRules, bucket: int, table: pa.Table, cache: BucketCache) -> BucketOutcome:
    """Decide one bucket's rows (in input order, narrow: SHUFFLE_SCHEMA without raw) of every hour."""
    core = native_dedup.in_use(rules.compiled)
    hours = table.column("cache_hour").to_numpy()
    digests = digest_array(table.column("key_digest"))
    fingerprints = table.column("fingerprint").to_numpy()
    own_hours = [int(hour) for hour in distinct_sorted(hours)]
    keys, key_of_row = unique_inverse(digests, core)
    key_hours = _key_hours(rules, bucket, keys, key_of_row, hours, cache, core)
    other_hours = sorted(set(key_hours.hours) - set(own_hours))
    segments: dict[tuple[int, int], list[CacheRun]] = {}
    for hour, probed in sorted(key_hours.hours.items()):  # each hour read only for the keys probed there
        named = keys[probed]
        segments.update({(hour, fine): cache.runs_holding(hour, fine, named)
                         for fine in rules.epochs.fine_of(bucket, hour)})
    loaded: dict[int, list[CacheRun]] = defaultdict(list)  # an hour's runs: of every fine segment the bucket holds
    for (hour, _), runs in sorted(segments.items()):
        loaded[hour].extend(runs)
    view = CacheView.from_hours(loaded, rules.visible_owners)
    priorities = rules.survivor.priorities(table.column("order_key"), table.num_rows)
    order_keys = table.column("order_key") if rules.policy.ordering is not None else None
    decision = decide_key_group(digests, fingerprints, priorities, view, rules.batch_id, rules.policy, key_hours, core,
                                order_keys)
    emitted = decision.emitted_mask  # what enforcing emits: observing too, the cache holds exactly these
    duplicates = np.flatnonzero(decision.outcomes != Outcome.KEPT)
    fine_buckets = rules.epochs.fine_buckets(digests, hours)
    new_hours, new_fines = distinct_pairs(hours[emitted], fine_buckets[emitted])
    new_segments: dict[tuple[int, int], NewSegment] = {}
    written = 0
    for hour, fine in zip(new_hours.tolist(), new_fines.tolist(), strict=True):
        within = (hours == hour) & (fine_buckets == fine)
        own_run = new_cache_run(rules.batch_id, digests, fingerprints, decision, within=within, core=core,
                                order_keys=order_keys)
        sizes = cache.chain_sizes(hour, fine)
        merge = rules.chains.objects_to_merge(sizes, len(own_run) * ENTRY_BYTES)
        merged = cache.runs(hour, fine, merge) if merge else []
        new_segments[(hour, fine)] = NewSegment(merged_segment(merged, rules.kept_owners, own_run, core),
                                                len(sizes) - merge)
        written += len(own_run)
    guard = (cache.guard(guard_head_key(rules.arrival_hour, bucket)).with_ids(digests[emitted], hours[emitted], core)
             if rules.write_guard and emitted.any() else None)
    cross_hour = int(np.count_nonzero(cross_hour_duplicates(decision, view, key_of_row, hours)))
    observe = rules.observe and not rules.populate
    counts = counts_of(decision, rules.populate, observe, cache_keys_written=written,
                       cross_hour_duplicates=cross_hour, guard_hours_loaded=len(other_hours))
    output, audit = _output_and_audit(rules.batch_id, table, decision, duplicates, observe)
    return BucketOutcome(np.ones(table.num_rows, bool) if observe else emitted, output, duplicates, audit, counts,
                         new_segments, guard)


def _output_and_audit(batch_id: str, table: pa.Table, decision: KeyDecision, duplicates: npt.NDArray[np.intp],
                      observe: bool) -> tuple[pa.Table, pa.Table]:
    """The bucket's output rows (observing: every row as it arrived) and its audit rows."""
    output = observed_output_columns(batch_id, table) if observe else output_columns(batch_id, table, decision)
    return output, audit_columns(batch_id, table, decision, duplicates, observe)


def _key_hours(rules: BucketRules, bucket: int, keys: npt.NDArray[np.bytes_], key_of_row: npt.NDArray[np.intp],
               hours: npt.NDArray[np.int64], cache: BucketCache, core: ModuleType | None) -> KeyHours:
    """Which hours may hold each of the bucket's keys (sorted, distinct; `key_of_row` maps each
    row to its key): the hours its copies in the batch fall in, and every hour some guard of the
    window names for it."""
    key_parts, hour_parts = [key_of_row], [hours]
    probe = GuardProbe.of(keys)
    for head in rules.guard_heads(bucket):
        query, named = cache.guard(head).candidate_hours(probe, core)
        key_parts.append(query)
        hour_parts.append(named)
    distinct_hours, distinct_keys = distinct_pairs(np.concatenate(hour_parts), np.concatenate(key_parts))
    starts = np.flatnonzero(np.r_[True, np.diff(distinct_hours) != 0])  # sorted by hour: one run each
    by_hour: dict[int, npt.NDArray[np.bool_]] = {}
    for start, stop in zip(starts.tolist(), [*starts[1:].tolist(), len(distinct_hours)], strict=True):
        mask = np.zeros(len(keys), bool)
        mask[distinct_keys[start:stop]] = True
        by_hour[int(distinct_hours[start])] = mask
    return KeyHours(keys, key_of_row, by_hour)


def distinct_pairs(major: npt.NDArray[np.integer[Any]],
                   minor: npt.NDArray[np.integer[Any]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The distinct (major, minor) pairs, sorted by major then minor. Packed into one int64 each
    where their ranges allow (always, for hours, buckets and row indices): numpy's row-wise
    unique (axis=0) sorts a structured view, several times slower than sorting integers."""
    first: npt.NDArray[np.int64] = np.asarray(major, np.int64)
    second: npt.NDArray[np.int64] = np.asarray(minor, np.int64)
    if len(first) == 0:
        return first, second
    major_low, minor_low = int(first.min()), int(second.min())
    major_span, minor_span = int(first.max()) - major_low + 1, int(second.max()) - minor_low + 1
    if major_span * minor_span >= 1 << 62:
        rows = np.unique(np.stack([first, second], axis=1), axis=0)
        return rows[:, 0], rows[:, 1]
    packed = distinct_sorted((first - major_low) * minor_span + (second - minor_low))
    return packed // minor_span + major_low, packed % minor_span + minor_low


def cross_hour_duplicates(decision: KeyDecision, view: CacheView, key_of_row: npt.NDArray[np.intp],
                          hours: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Duplicates whose kept copy lies in another hour: what a cache keyed by hour alone misses."""
    outcomes = decision.outcomes
    cross_batch = (outcomes == Outcome.CROSS_BATCH_NATURAL) | (outcomes == Outcome.CROSS_BATCH_SYNTHETIC)
    run_hours = np.array([*view.hours, -1], np.int64)
    holder = np.where(cross_batch, decision.holder, len(view.hours))
    found: npt.NDArray[np.bool_] = cross_batch & (run_hours[holder] != hours)
    in_batch = (outcomes == Outcome.IN_BATCH_NATURAL) | (outcomes == Outcome.IN_BATCH_SYNTHETIC)
    if in_batch.any():
        survivor_hour = np.full(key_of_row.max() + 1, -1, np.int64)
        survivors = outcomes == Outcome.KEPT
        survivor_hour[key_of_row[survivors]] = hours[survivors]
        found |= in_batch & (survivor_hour[key_of_row] >= 0) & (survivor_hour[key_of_row] != hours)
    return found


# Observing, what enforcing does is counted as what it would do.
_WOULD_COUNTS = {"in_batch_duplicates": "would_drop_in_batch", "cross_batch_duplicates": "would_drop_cross_batch",
                 "stale_dropped": "would_drop_stale",
                 "renamed": "would_rename", "kept_synthetic": "would_keep", "updates": "would_update"}


def counts_of(decision: KeyDecision, populate: bool, observe: bool = False, **work: int) -> BatchCounts:
    """The counts of one decided group: duplicates found by kind, what became of them (observing:
    what would have), what was output (or, for a populate batch, committed to the cache only)."""
    outcomes, actions = decision.outcomes, decision.actions
    dropped = actions == Action.DROP
    in_batch = (outcomes == Outcome.IN_BATCH_NATURAL) | (outcomes == Outcome.IN_BATCH_SYNTHETIC)
    cross_batch = (outcomes == Outcome.CROSS_BATCH_NATURAL) | (outcomes == Outcome.CROSS_BATCH_SYNTHETIC)
    found = {outcome.reason: int(np.count_nonzero(outcomes == outcome)) for outcome in Outcome
             if outcome is not Outcome.KEPT}
    settled = {"in_batch_duplicates": int(np.count_nonzero(in_batch & dropped)),
               "cross_batch_duplicates": int(np.count_nonzero(cross_batch & dropped)),
               "stale_dropped": int(np.count_nonzero((outcomes == Outcome.STALE_VERSION) & dropped)),
               "renamed": int(np.count_nonzero(actions == Action.RENAME)),
               "kept_synthetic": int(np.count_nonzero(actions == Action.KEEP)),
               "updates": int(np.count_nonzero(actions == Action.UPDATE))}
    output = len(actions) if observe else int(np.count_nonzero(~dropped))
    if observe:
        settled = {_WOULD_COUNTS[name]: value for name, value in settled.items()}
    if decision.would_update is not None:
        work["changelog_would_update"] = int(np.count_nonzero(decision.would_update))
    return BatchCounts(output_rows=0 if populate else output, populated=output if populate else 0,
                       **settled, **found, **work)
