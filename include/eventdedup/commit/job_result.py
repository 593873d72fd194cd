"""What a finished Spark job leaves in staging: every staged object and the batch's counts.

Written last, so its presence means the job completed; promotion trusts nothing else.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from eventdedup.commit.ledger import LedgerUpdate
from eventdedup.errors import BatchNotReadyError, EventDedupError
from eventdedup.layout import Layout
from eventdedup.s3store import ObjectInfo, S3Store

COUNT_NAMES = (
    "input_lines", "malformed", "in_batch_duplicates", "cross_batch_duplicates", "output_rows",
    "cache_keys_written", "cross_hour_duplicates", "guard_hours_loaded",
    "in_batch_natural", "in_batch_synthetic", "cross_batch_natural", "cross_batch_synthetic",
    "renamed", "kept_synthetic", "updates", "inputs_excluded", "inputs_already_consumed", "populated",
)
# Counts of work done, not of results: a rerun may do more of it (the id guards it probes hold
# ids committed after its batch, and name more hours), so verify-rerun does not compare them.
WORK_COUNT_NAMES = ("guard_hours_loaded",)


@dataclass(frozen=True)
class StagedObject:
    kind: str
    staged: ObjectInfo
    final_key: str
    rows: int = 0
    cache_key: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"kind": self.kind, "staged": self.staged.to_json(), "final_key": self.final_key,
                               "rows": self.rows}
        if self.cache_key is not None:
            doc["cache_key"] = self.cache_key
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> StagedObject:
        return cls(doc["kind"], ObjectInfo.from_json(doc["staged"]), doc["final_key"], int(doc.get("rows", 0)),
                   doc.get("cache_key"))


@dataclass(frozen=True)
class JobResult:
    batch_id: str
    # The log version the job read its cache state at; promotion commits base_version + 1.
    base_version: int
    as_of: str
    counts: Mapping[str, int]
    objects: tuple[StagedObject, ...]
    # Input keys the job quarantined whole on an operator's exclusion (sorted); promotion
    # refuses the result if the batch's exclusions changed since.
    excluded_inputs: tuple[str, ...] = ()
    # The hours the job checked against the cache, and the horizon its commit records
    # (eventdedup.cache.history): both go into the commit record.
    window_start_hour: int | None = None
    retain_from_hour: int | None = None
    # The inputs this batch consumed and the ledger's horizons (eventdedup.commit.ledger).
    ledger_update: LedgerUpdate | None = None
    # Dedup partitions the job ran with (they lay out its data and audit files): a rerun uses them.
    partitions: int | None = None
    # A retraction's (eventdedup.ops.retract): the batches it removes from the committed view.
    retracts: tuple[str, ...] = ()
    reason: str | None = None
    reshard: tuple[int, int] | None = None  # a reshard's cut-over (eventdedup.ops.reshard)

    def to_bytes(self) -> bytes:
        return orjson.dumps({
            "batch_id": self.batch_id, "base_version": self.base_version, "as_of": self.as_of,
            "counts": {name: int(self.counts.get(name, 0)) for name in sorted(self.counts)},
            "objects": [obj.to_json() for obj in self.objects],
            "excluded_inputs": list(self.excluded_inputs),
            "window_start_hour": self.window_start_hour, "retain_from_hour": self.retain_from_hour,
            "ledger": None if self.ledger_update is None else self.ledger_update.to_json(),
            "partitions": self.partitions, "retracts": list(self.retracts), "reason": self.reason,
            "reshard": None if self.reshard is None else list(self.reshard),
        }, option=orjson.OPT_INDENT_2)

    @classmethod
    def from_bytes(cls, data: bytes) -> JobResult:
        doc = orjson.loads(data)
        return cls(doc["batch_id"], int(doc["base_version"]), doc["as_of"], dict(doc["counts"]),
                   tuple(StagedObject.from_json(o) for o in doc["objects"]),
                   tuple(doc.get("excluded_inputs", ())), doc.get("window_start_hour"), doc.get("retain_from_hour"),
                   LedgerUpdate.from_json(doc.get("ledger")), doc.get("partitions"), tuple(doc.get("retracts", ())),
                   doc.get("reason"), _cutover(doc.get("reshard")))


def _cutover(value: list[int] | None) -> tuple[int, int] | None:
    return None if value is None else (int(value[0]), int(value[1]))


def load_job_result(store: S3Store, layout: Layout, batch_id: str) -> JobResult:
    data = store.get_bytes_or_none(layout.job_result(batch_id))
    if data is None:
        raise BatchNotReadyError(
            f"batch {batch_id}: no job result at {store.uri(layout.job_result(batch_id))}; "
            f"the Spark job has not completed (run or rerun the dedup step)"
        )
    return JobResult.from_bytes(data)


def check_counts_balance(counts: Mapping[str, int]) -> None:
    """Every input line is accounted for exactly once: quarantined, dropped with a reason, output,
    or (a populate batch) committed to the cache only."""
    accounted = (counts["malformed"] + counts["in_batch_duplicates"] + counts["cross_batch_duplicates"]
                 + counts["output_rows"] + counts.get("populated", 0))
    if accounted != counts["input_lines"]:
        raise EventDedupError(f"counts do not balance: {accounted} accounted for, {counts['input_lines']} input lines")
    found = sum(counts[kind] for kind in ("in_batch_natural", "in_batch_synthetic", "cross_batch_natural",
                                          "cross_batch_synthetic"))
    settled = (counts["in_batch_duplicates"] + counts["cross_batch_duplicates"] + counts["renamed"]
               + counts["kept_synthetic"])
    if found != settled:
        raise EventDedupError(f"counts do not balance: {found} duplicates found, {settled} dropped, renamed or kept")
