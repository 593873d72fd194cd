"""Every figure of the report, computed from what `collect` read: one JSON-ready document, which
`report --json` prints and the HTML draws. Pure: no store, no clock.

The rules (docs/report.md says them for people):
- batches: the commits of the range that are batches; a retracted one is listed and flagged but
  left out of every total and figure, as it is out of the committed view;
- copy lag: each duplicate found is a copy; its lag is its batch's as_of minus the as_of of the
  batch holding the kept copy (0 for a copy found in its original's batch, and for a manual batch
  staged before the as_of of the batch it was decided against). Batches arrive at their as_of (an
  interval batch's is its interval's end), so lags are exact to a batch interval. A changelog
  update is a new version, not a copy: a batch that emitted updates has its holders read from the
  audit, which holds duplicates only. A stale version (an ordered store's older version arriving
  after a newer one) counts as a copy of the newer one's batch, which holds it;
- percentiles by nearest rank over every copy: the value at rank ceil(p/100 x copies);
- a lag bin holds lags above the previous bound up to its own (the first holds 0 only).
"""
from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from fractions import Fraction
from typing import Any

from eventdedup.commit.changes import BatchChange
from eventdedup.config import Config
from eventdedup.report.collect import Collected, CommitInRange, copy_holders

HOUR = 3600.0
DAY = 24 * HOUR
# (upper bound in seconds, label); None: unbounded.
LAG_BINS: tuple[tuple[float | None, str], ...] = (
    (0.0, "same batch"), (300.0, "≤ 5 min"), (900.0, "≤ 15 min"), (HOUR, "≤ 1 h"), (6 * HOUR, "≤ 6 h"),
    (DAY, "≤ 1 d"), (2 * DAY, "≤ 2 d"), (3 * DAY, "≤ 3 d"), (7 * DAY, "≤ 7 d"), (14 * DAY, "≤ 14 d"), (None, "> 14 d"))
PERCENTILES = (50, 90, 99, 99.9)
# What each batch's series shows: duplicates found by kind, what became of them, what was set aside.
DUPLICATE_KINDS = ("in_batch_natural", "in_batch_synthetic", "cross_batch_natural", "cross_batch_synthetic")
SERIES_COUNTS = ("input_lines", "output_rows", "in_batch_duplicates", "cross_batch_duplicates", *DUPLICATE_KINDS,
                 "cross_hour_duplicates", "renamed", "kept_synthetic", "updates", "stale_version", "stale_dropped",
                 "changelog_would_update", "would_drop_in_batch", "would_drop_cross_batch", "would_drop_stale",
                 "would_rename", "would_keep", "would_update", "malformed",
                 "inputs_excluded", "inputs_already_consumed", "populated")
NOT_RECORDED = "(not recorded)"


def report_figures(collected: Collected, config: Config) -> dict[str, Any]:
    batches = [c for c in collected.commits if isinstance(c.record.change, BatchChange)]
    live = [c for c in batches if not c.retracted]
    window = config.dedup.window_hours * HOUR
    lags = copy_lags(live, collected)
    audits = collected.audits
    rows = [_batch_row(c) for c in batches]
    return {
        "range": {"since": collected.since.isoformat(), "until": collected.until.isoformat()},
        "log": {"head_version": collected.head_version, "commits_in_range": len(collected.commits),
                "batches": len(live), "retracted_batches": sorted(c.record.batch_id for c in batches if c.retracted),
                "operations": [_operation(c) for c in collected.commits
                               if not isinstance(c.record.change, BatchChange)]},
        "settings": {"window_hours": config.dedup.window_hours, "mode": config.dedup.mode,
                     # What the batches of the range ran under (each commit records its mode).
                     "modes_in_range": dict(Counter(_mode(c) for c in live)),
                     "producer_field": config.report.producer_field,
                     "source_prefix_depth": config.report.source_prefix_depth},
        "totals": _totals(live),
        "batches": rows,
        "copy_lag": lag_figures(lags, window),
        "quarantine_by_reason": dict(_sum(collected.quarantine[c.record.batch_id] for c in live
                                          if c.record.batch_id in collected.quarantine).most_common()),
        "top_sources": _top(_sum(audits[c.record.batch_id].sources for c in live if c.record.batch_id in audits),
                            config.report.top),
        "top_producers": _top(_named(_sum(audits[c.record.batch_id].producers for c in live
                                          if c.record.batch_id in audits)),
                              config.report.top) if config.report.producer_field else [],
        "health": _health([row for row in rows if not row["retracted"]], collected),
        "columns": column_figures(live),
        "read": {"requests_for_columns": collected.cost.requests, "column_bytes_read": collected.cost.bytes_read,
                 "audit_and_quarantine_bytes": collected.cost.object_bytes,
                 # Committed audit files that could not be read: their duplicates are missing from
                 # the sources and producers (run `eventdedup fsck`).
                 "unreadable_files": sorted(problem for c in live if c.record.batch_id in audits
                                            for problem in audits[c.record.batch_id].unreadable)},
    }


def column_figures(batches: Sequence[CommitInRange]) -> list[dict[str, Any]]:
    """Each declared column of the range's batches (types as the latest batch declared them), with
    the output rows of the batches that recorded its figures, and its mismatch and null rates there."""
    types: dict[str, str] = {}
    rows: Counter[str] = Counter()
    mismatched: Counter[str] = Counter()
    nulls: Counter[str] = Counter()
    for commit in batches:
        change = commit.record.change
        if not isinstance(change, BatchChange) or change.column_figures is None:
            continue
        types.update((column.name, column.data_type) for column in change.columns)
        for name, counted in change.column_figures.items():
            rows[name] += commit.record.counts.output_rows
            mismatched[name] += counted.mismatched
            nulls[name] += counted.nulls
    return [{"name": name, "type": kind, "output_rows": rows[name], "mismatched": mismatched[name],
             "nulls": nulls[name], "mismatch_rate": mismatched[name] / rows[name] if rows[name] else None,
             "null_rate": nulls[name] / rows[name] if rows[name] else None} for name, kind in types.items()]


def copy_lags(batches: Sequence[CommitInRange], collected: Collected) -> Counter[float]:
    """Lag in seconds -> copies: every duplicate found by the batches, against its kept copy's batch."""
    lags: Counter[float] = Counter()
    unknown = 0
    for commit in batches:
        record, change = commit.record, commit.record.change
        assert isinstance(change, BatchChange)
        lags[0.0] += record.counts.in_batch_natural + record.counts.in_batch_synthetic
        holders = copy_holders(record, collected.audits.get(record.batch_id))
        # Copies whose holder could not be read (an audit file gone, where the holders come from it).
        unknown += max(0, record.counts.cross_batch_natural + record.counts.cross_batch_synthetic
                       + record.counts.stale_version - sum(holders.values()))
        at = datetime.fromisoformat(record.as_of)
        for holder, copies in holders.items():
            held_at = collected.holder_times.get(holder)
            if held_at is None:
                unknown += copies
                continue
            lags[max(0.0, (at - held_at).total_seconds())] += copies
    if unknown:
        lags[math.nan] = unknown  # holders not in the log, or unread (an audit gone): shown apart
    return lags


def lag_figures(lags: Mapping[float, int], window_seconds: float) -> dict[str, Any]:
    known = sorted((lag, n) for lag, n in lags.items() if not math.isnan(lag) and n)
    copies = sum(n for _, n in known)
    histogram = []
    lower = -1.0
    for upper, label in LAG_BINS:
        in_bin = sum(n for lag, n in known if lower < lag and (upper is None or lag <= upper))
        histogram.append({"label": label, "upper_seconds": upper, "copies": in_bin})
        lower = upper if upper is not None else lower
    beyond = {name: sum(n for lag, n in known if lag > bound) for name, bound in
              (("1h", HOUR), ("1d", DAY), ("half_window", window_seconds / 2),
               ("window_last_tenth", 0.9 * window_seconds), ("window", window_seconds))}
    longest = known[-1][0] if known else None
    return {
        "copies": copies,
        "unknown_holder": next((n for lag, n in lags.items() if math.isnan(lag)), 0),
        "histogram": histogram,
        "percentiles_seconds": {str(p): nearest_rank(known, p) for p in PERCENTILES},
        "max_seconds": longest,
        "beyond": {name: {"copies": n, "share": n / copies if copies else 0.0} for name, n in beyond.items()},
        "window_hours": window_seconds / HOUR,
        "verdict": window_verdict(known, window_seconds, beyond["window_last_tenth"]),
    }


def nearest_rank(sorted_lags: Sequence[tuple[float, int]], percentile: float) -> float | None:
    copies = sum(n for _, n in sorted_lags)
    if not copies:
        return None
    # Exact: 99.9 / 100 is 0.9990000000000001 in binary floating point, one rank too many at 1,000 copies.
    rank = max(1, math.ceil(Fraction(str(percentile)) * copies / 100))
    seen = 0
    for lag, n in sorted_lags:
        seen += n
        if seen >= rank:
            return lag
    return sorted_lags[-1][0]


def window_verdict(sorted_lags: Sequence[tuple[float, int]], window_seconds: float, near_edge: int) -> str:
    """One plain sentence: does the window look long enough for the lags caught?"""
    late = [(lag, n) for lag, n in sorted_lags if lag > 0]
    hours = window_seconds / HOUR
    if not late:
        return ("No copy arrived after its original's batch in this range: nothing here tests the "
                f"{hours:g} h window.")
    longest = late[-1][0]
    if not near_edge:
        return (f"The window looks long enough: the longest lag caught was {duration_text(longest)} "
                f"({longest / window_seconds:.0%} of the {hours:g} h window), and no copy arrived in its last tenth.")
    suggested = math.ceil(2 * longest / DAY) * 24
    copies = sum(n for _, n in sorted_lags)
    return (f"The window may be too short: {near_edge} of {copies} copies ({near_edge / copies:.1%}) arrived in "
            f"the last tenth of the {hours:g} h window, and a copy a little later would pass as a new event; "
            f"{suggested} h would hold twice the longest lag caught ({duration_text(longest)}).")


def duration_text(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * HOUR:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * DAY:
        return f"{seconds / HOUR:.1f} h"
    return f"{seconds / DAY:.1f} d"


def _batch_row(commit: CommitInRange) -> dict[str, Any]:
    record = commit.record
    as_of = datetime.fromisoformat(record.as_of)
    return {"version": record.version, "batch_id": record.batch_id, "as_of": as_of.isoformat(),
            "committed_at": commit.committed_at.isoformat(), "retracted": commit.retracted,
            "mode": _mode(commit),
            "counts": {name: record.counts.get(name, 0) for name in SERIES_COUNTS},
            "seconds": _stages(commit, as_of)}


def _stages(commit: CommitInRange, as_of: datetime) -> dict[str, float | None]:
    """Latency behind the clock and its stages, from the objects' own times (None: not found)."""
    def between(start: datetime | None, end: datetime | None) -> float | None:
        return None if start is None or end is None else (end - start).total_seconds()

    # The store dates objects to the whole second (LastModified), and a manual batch's as_of has
    # microseconds: an object written within as_of's second would come out before it. As_of is
    # taken to the same second.
    as_of = as_of.replace(microsecond=0)
    return {"latency": between(as_of, commit.committed_at), "staging": between(as_of, commit.staged_at),
            "dedup_job": between(commit.staged_at, commit.promoted_at),
            "promotion": between(commit.promoted_at, commit.committed_at)}


def _mode(commit: CommitInRange) -> str:
    change = commit.record.change
    return change.mode if isinstance(change, BatchChange) else "enforce"


def _operation(commit: CommitInRange) -> dict[str, Any]:
    return {"version": commit.record.version, "batch_id": commit.record.batch_id,
            "kind": type(commit.record.change).__name__.lower(), "committed_at": commit.committed_at.isoformat()}


def _totals(batches: Sequence[CommitInRange]) -> dict[str, int]:
    return {name: sum(c.record.counts.get(name, 0) for c in batches) for name in SERIES_COUNTS}


def _health(rows: Sequence[Mapping[str, Any]], collected: Collected) -> dict[str, Any]:
    """From the batches' rows (their stage times) and every commit of the range (cache written)."""
    stages: dict[str, list[float]] = {}
    for row in rows:
        for name, seconds in row["seconds"].items():
            if seconds is not None:
                stages.setdefault(name, []).append(seconds)
    written: dict[str, dict[str, int]] = {}
    for commit in collected.commits:
        day = written.setdefault(commit.committed_at.date().isoformat(), {"objects": 0, "bytes": 0})
        day["objects"] += commit.cache_objects
        day["bytes"] += commit.cache_bytes
    return {"seconds": {name: {"median": statistics.median(values), "max": max(values)}
                        for name, values in stages.items()},
            "cache_written_by_day": written, "live_cache_objects_by_day": collected.live_cache_by_day,
            "ingestion": collected.ingestion}


def _sum(counters: Iterable[Counter[Any]]) -> Counter[Any]:
    total: Counter[Any] = Counter()
    for counter in counters:
        total.update(counter)
    return total


def _named(counter: Counter[str | None]) -> Counter[str]:
    return Counter({NOT_RECORDED if key is None else key: n for key, n in counter.items()})


def _top(counter: Counter[str], top: int) -> list[dict[str, Any]]:
    total = sum(counter.values())
    ranked = sorted(counter.items(), key=lambda item: (-item[1], item[0]))[:top]
    return [{"name": name, "duplicates": n, "share": n / total} for name, n in ranked]
