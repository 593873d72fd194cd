"""What a scheduler needs from eventdedup, without importing one: the batch a run processes, its
staging behind the promotion gate, and the consistency gate that halts the pipeline.

The Airflow DAGs call these; each task body stays one or two calls.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventdedup.commit.gate import check_may_start
from eventdedup.commit.ledger import legacy_floor, listing_floor
from eventdedup.commit.ledger_reader import LedgerReader, consumed_predicate
from eventdedup.commit.log import load_committed_state
from eventdedup.commit.state import CommittedState
from eventdedup.commit.view import dataset_objects
from eventdedup.config import Config
from eventdedup.errors import BatchManifestError, EmptyIntervalError, InconsistentStoreError
from eventdedup.inputs.empty_interval import EmptySelection, empty_selection
from eventdedup.inputs.intervals import IntervalBatch
from eventdedup.inputs.manifest import BatchManifest, freeze_batch_inputs, load_batch_manifest_or_none
from eventdedup.inputs.selector import InputSelector, checked_selector, utc_iso
from eventdedup.layout import Layout
from eventdedup.naming import validate_batch_id
from eventdedup.promotion.recovery import RecoveryReport, examine, recover
from eventdedup.s3store import ObjectInfo, S3Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchPlan:
    """The batch one scheduler run processes: its data interval, or a prefix a person named."""

    batch_id: str
    selector: InputSelector

    def __post_init__(self) -> None:
        validate_batch_id(self.batch_id)  # also when read back from XCom (eventdedup.codec)

    @classmethod
    def for_run(cls, params: Mapping[str, Any], interval_start: datetime | None,
                interval_end: datetime | None) -> BatchPlan:
        """Explicit params (`batch_id` with `input_prefix`, optionally `reprocess` or `populate`; `batch_id` with
        `sweep_before`, a sweep staged by the maintenance DAG; or `since` and `until`, an interval of the
        operator's, e.g. one bridging a gap a schedule change left) win; otherwise the data interval."""
        batch_id, prefix = params.get("batch_id"), params.get("input_prefix")
        if params.get("since") or params.get("until"):
            if prefix or not (params.get("since") and params.get("until")):
                raise BatchManifestError("an interval run needs both params since and until, and no input_prefix")
            interval = IntervalBatch.for_interval(datetime.fromisoformat(str(params["since"])),
                                                  datetime.fromisoformat(str(params["until"])))
            if batch_id and batch_id != interval.batch_id:
                raise BatchManifestError(
                    f"an interval run's batch id is its start's, {interval.batch_id}, not {batch_id}")
            return cls(interval.batch_id, InputSelector(since=interval.since, until=interval.until))
        if params.get("sweep_before"):
            sweep_before = datetime.fromisoformat(str(params["sweep_before"]))
            return cls(validate_batch_id(str(batch_id)), InputSelector(sweep_before=sweep_before))
        if batch_id or prefix:
            if not (batch_id and prefix):
                raise BatchManifestError("a manual batch needs both params batch_id and input_prefix")
            selector = InputSelector(input_prefix=str(prefix), reprocess=bool(params.get("reprocess")),
                                     populate=bool(params.get("populate")))
            return cls(validate_batch_id(str(batch_id)), selector)
        if interval_start is None or interval_end is None:
            raise BatchManifestError("this run has no data interval: trigger it with params batch_id and input_prefix")
        interval = IntervalBatch.for_interval(interval_start, interval_end)
        return cls(interval.batch_id, InputSelector(since=interval.since, until=interval.until))



def stage_planned_batch(store: S3Store, config: Config, plan: BatchPlan, now: datetime,
                        by_hand: bool = False) -> BatchManifest:
    """The promotion gate first (a refused batch costs no Spark work), then the frozen inputs.
    An unsafe or overlapping prefix is refused before any S3 request.

    An interval that selects nothing is staged, and commits, to keep the schedule moving, but for
    one case: `by_hand` (a person's run, `eventdedup run-batch`), the store's first interval batch
    is refused (EmptyIntervalError) before its manifest is written. Committed empty, it would fix
    where the store's intervals start (eventdedup.commit.gate), and nothing waits for it."""
    layout = Layout(config.layout)
    checked_selector(layout, plan.selector)
    state = _StateOnce(store, layout)
    check_may_start(store, layout, plan.batch_id, plan.selector, state.get, config.dedup.window_hours)
    committed = state.get()
    if plan.selector.populate:  # the job skips what the ledger holds, and counts it
        manifest = freeze_batch_inputs(store, config, plan.batch_id, plan.selector, now,
                                       objects=lambda: dataset_objects(store, layout, plan.selector),
                                       log_version=committed.version)
    elif plan.selector.input_prefix is not None:
        manifest = freeze_batch_inputs(store, config, plan.batch_id, plan.selector, now, log_version=committed.version)
    else:
        consumed, floor = _ledger_filter(store, layout, committed)
        first_by_hand = (by_hand and committed.latest_interval_batch_id is None
                         and IntervalBatch.of_request(plan.batch_id, plan.selector) is not None)

        def refuse_if_empty(inputs: tuple[ObjectInfo, ...]) -> None:
            if not inputs:
                raise EmptyIntervalError(
                    empty_selection(store, config, plan.batch_id, plan.selector, consumed, floor, now).refused)

        manifest = freeze_batch_inputs(store, config, plan.batch_id, plan.selector, now, consumed, floor,
                                       log_version=committed.version,
                                       before_freezing=refuse_if_empty if first_by_hand else None)
        if not manifest.inputs and manifest.interval is not None:
            log.info("batch %s: its interval %s .. %s selected no landing object (none that no batch consumed "
                     "arrived in the lookback before its end); it commits empty, so that the interval after it can "
                     "follow on from its end", manifest.batch_id, utc_iso(manifest.interval.since),
                     utc_iso(manifest.interval.until))
    log.info("batch %s staged: %d input object(s)", manifest.batch_id, len(manifest.inputs))
    return manifest


def explain_empty_selection(store: S3Store, config: Config, batch_id: str, now: datetime) -> EmptySelection | None:
    """Why a staged batch that selects by time selected nothing, and what waits outside it (None: it
    selected input, or selects a prefix). What `eventdedup run-batch` prints after its commit line."""
    layout = Layout(config.layout)
    manifest = load_batch_manifest_or_none(store, layout, batch_id)
    if manifest is None or manifest.inputs or manifest.selector.since is None:
        return None
    consumed, floor = _ledger_filter(store, layout, load_committed_state(store, layout))
    return empty_selection(store, config, batch_id, manifest.selector, consumed, floor, now)


def _ledger_filter(store: S3Store, layout: Layout,
                   committed: CommittedState) -> tuple[Callable[[ObjectInfo], bool], datetime | None]:
    """What the ingestion ledger says of listed landing objects: whether each was consumed, and where
    listings stop (eventdedup.commit.ledger)."""
    floor = legacy_floor(store, layout, committed.ledger, committed.latest_interval_batch_id)
    consumed = consumed_predicate(LedgerReader(store, committed.ledger, layout), committed.version, floor)
    return consumed, listing_floor(committed.ledger)


class _StateOnce:
    """The committed state, loaded on first use and then reused within one staging."""

    def __init__(self, store: S3Store, layout: Layout) -> None:
        self.store, self.layout = store, layout
        self.state: CommittedState | None = None

    def get(self) -> CommittedState:
        if self.state is None:
            self.state = load_committed_state(self.store, self.layout)
        return self.state


def consistency_gate(store: S3Store, config: Config) -> RecoveryReport:
    """Diagnose without repairing; raise if anything is unfinished or inconsistent.

    The pipeline does not repair itself between runs: an unfinished promotion means a run died
    in the one step that must be atomic, and a person should look before it is rolled forward.
    `eventdedup recover` (which finishes or abandons it) reopens the pipeline."""
    report = examine(store, config)
    if report.cleanups and not (report.problems or report.actions):
        report = recover(store, config)  # only leftovers of committed batches: tidy and go on
    if report.problems or report.actions:
        findings = [f"inconsistent: {p}" for p in report.problems] + [f"unfinished: {a}" for a in report.actions]
        raise InconsistentStoreError(
            "the pipeline is halted until `eventdedup recover` succeeds:\n  " + "\n  ".join(findings)
        )
    return report
