"""A batch selecting by time that selected no input: what it selects by, and the landing objects
waiting outside it, with the commands that take them. What `eventdedup run-batch` tells a person.

An interval batch takes the landing objects that *arrived* in its range (their LastModified: when
the store received them), not those whose keys or events name its time: a file of last week's
events uploaded today is no part of last week's intervals, whatever folder it is under. So a batch
that selects nothing is often a surprise, and the explanation looks at the store's unconsumed
landing objects around it, from the sweep range before it (the oldest a batch may still take) to
now: one more listing of the landing prefix (partitioned keys: one LIST per hour of that range),
paid only by a batch that selected nothing.
"""
from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from eventdedup.config import Config
from eventdedup.inputs.intervals import IntervalBatch
from eventdedup.inputs.landing import unconsumed_in_range
from eventdedup.inputs.manifest import MAX_CLOCK_SKEW, listed_range
from eventdedup.inputs.selector import InputSelector, utc_iso
from eventdedup.s3store import ObjectInfo, S3Store


@dataclass(frozen=True)
class EmptySelection:
    """A batch that selected no landing object of its range [listed_from, until), and the landing
    objects no batch consumed that arrived outside it since `looked_from`, oldest first."""

    batch_id: str
    is_interval: bool  # an interval batch (its id names its start), not a manual batch selecting by time
    since: datetime
    until: datetime
    listed_from: datetime
    looked_from: datetime
    waiting: tuple[ObjectInfo, ...]
    bucket: str
    landing_prefix: str
    lookback_hours: int
    partition_format: str

    def refused(self, config_path: str) -> str:
        """Why a store's first interval batch, run by hand, is not committed, and what to run instead."""
        return self._text(f"batch {self.batch_id} selected no input, so it is not committed: a store's first "
                          "interval batch run by hand commits only with input (committed empty, it would fix where "
                          "the store's intervals start, and the scheduler's first interval would have to follow on "
                          "from its end)", config_path)

    def committed(self, config_path: str) -> str:
        """What a committed batch that selected nothing is told."""
        why = ("it is committed all the same, so that the interval after it can follow on from its end"
               if self.is_interval else "it is committed as a manual batch, which moves no schedule")
        return self._text(f"batch {self.batch_id} selected no input; {why}", config_path)

    def _text(self, verdict: str, config_path: str) -> str:
        return "\n  ".join([f"{verdict}.", self._selects_by(), *self._waiting(config_path)])

    def _selects_by(self) -> str:
        if self.listed_from == self.until - timedelta(hours=self.lookback_hours):
            span = f"the [inputs] lookback_hours = {self.lookback_hours} before its end"
        elif self.listed_from == self.since:
            span = f"its interval, longer than [inputs] lookback_hours = {self.lookback_hours}"
        else:
            span = "from where the ingestion ledger's memory begins"
        arrived = "arrived (LastModified: when the store received them, whatever time their keys or events name)"
        if self.partition_format:
            return (f"It selects by partition and arrival: the landing objects under the partitions of "
                    f"{utc_iso(self.listed_from)} to {utc_iso(self.until)} ([inputs] partition_format = "
                    f"\"{self.partition_format}\", {span}) that {arrived} before {utc_iso(self.until)} and that no "
                    "batch consumed. None did.")
        return (f"It selects by arrival: the landing objects that {arrived} from {utc_iso(self.listed_from)} to "
                f"{utc_iso(self.until)} ({span}) and that no batch consumed. None did.")

    def _waiting(self, config_path: str) -> list[str]:
        landing = f"s3://{self.bucket}/{self.landing_prefix}"
        if not self.waiting:
            return [f"No landing object under {landing} that arrived since {utc_iso(self.looked_from)} waits for a "
                    "batch either: land the events first."]
        oldest = self.waiting[0]
        later = [info for info in self.waiting if _arrival(info) >= self.until]
        earlier = [info for info in self.waiting if _arrival(info) < self.listed_from]
        inside = len(self.waiting) - len(later) - len(earlier)
        lines = [f"{len(self.waiting)} landing object(s) under {landing} wait for a batch outside it; the oldest, "
                 f"s3://{self.bucket}/{oldest.key}, arrived {utc_iso(_arrival(oldest))}."]
        if later:
            lines.append(f"{len(later)} arrived after its end: the interval batch whose lookback covers their "
                         "arrival takes them (as the scheduler's intervals do).")
        if earlier:
            lines.append(f"{len(earlier)} arrived before its range: the sweep takes them once an interval batch "
                         "after them has committed (`eventdedup sweep`; daily in the maintenance DAG).")
        if inside:
            lines.append(f"{inside} arrived inside its range, under keys its listing does not reach ([inputs] "
                         "partition_format or sorted_key_format): only a batch of their prefix takes them.")
        prefix = _common_folder([info.key for info in self.waiting])
        named = f"--batch-id {_batch_id_of(prefix)} --input-prefix {prefix}" if prefix else (
            "--batch-id <id> --input-prefix <their folder>")  # only with an empty landing prefix
        return [*lines, f"Take them now, as one batch: eventdedup run-batch --config {config_path} {named}"]


def empty_selection(store: S3Store, config: Config, batch_id: str, selector: InputSelector,
                    is_consumed: Callable[[ObjectInfo], bool], floor: datetime | None, now: datetime) -> EmptySelection:
    """The explanation for a batch selecting by time (`selector`) that selected nothing: its range as
    its staging listed it (`floor`: where the ingestion ledger's memory begins), and the landing objects
    `is_consumed` does not claim from the sweep range before it to `now`."""
    assert selector.since is not None and selector.until is not None
    listed_from, until = listed_range(config, selector, floor)
    looked_from = listed_from - timedelta(hours=config.inputs.sweep_hours)
    looked_from = looked_from if floor is None else max(looked_from, floor)
    # Up to now, and the clock skew a batch's end may have beyond it (eventdedup.inputs.manifest).
    found, _ = unconsumed_in_range(store, config, looked_from, max(now, until) + MAX_CLOCK_SKEW, is_consumed)
    return EmptySelection(
        batch_id, IntervalBatch.of_request(batch_id, selector) is not None, selector.since, until, listed_from,
        looked_from, tuple(sorted(found, key=lambda info: (_arrival(info), info.key))), store.bucket,
        config.layout.landing_prefix, config.inputs.lookback_hours, config.inputs.partition_format)


def _arrival(info: ObjectInfo) -> datetime:
    assert info.last_modified is not None  # every listed object has one
    return info.last_modified


def _common_folder(keys: list[str]) -> str:
    """The deepest folder every key is under ("" if none)."""
    common = os.path.commonprefix(keys)
    return common[:common.rfind("/") + 1]


def _batch_id_of(prefix: str) -> str:
    """A manual batch id named after its prefix: landing/2026/11/22/05/ -> landing-2026-11-22-05."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", prefix).strip("-")[:128].strip("-") or "manual"
