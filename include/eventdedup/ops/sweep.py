"""The sweep: landing objects older than every batch's lookback that no batch consumed.

An interval batch lists only its lookback (eventdedup.inputs.landing), so an object that became
visible later than that (a multipart upload started long before it finished, a writer's clock far
behind, an object copied in with an old date) is never taken by one. The maintenance DAG's sweep
lists the `sweep_hours` behind the lookback, and when it finds objects the ingestion ledger does
not hold, it stages them as one batch of their own (`sweep-<time>`), alerts, and the batch is
deduplicated and committed like any other: never a silent skip.

The sweep's reference time is the log's, not the clock's: the end of the latest committed
interval batch. During an outage, objects the backfill will take are not swept from under it.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from eventdedup.commit.log import is_committed, load_committed_state
from eventdedup.config import Config
from eventdedup.inputs.intervals import batch_id_for_interval
from eventdedup.inputs.manifest import BatchManifest, load_batch_manifest_or_none
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.scheduling import BatchPlan, stage_planned_batch
from eventdedup.s3store import S3Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepOutcome:
    plan: BatchPlan
    manifest: BatchManifest

    def pipeline_params(self) -> dict[str, str]:
        """The params of the pipeline run that processes the sweep batch (BatchPlan.for_run)."""
        assert self.plan.selector.sweep_before is not None
        return {"batch_id": self.plan.batch_id, "sweep_before": self.plan.selector.sweep_before.isoformat()}

    @property
    def found(self) -> int:
        return len(self.manifest.inputs)

    def message(self, store: S3Store) -> str:
        keys = ", ".join(store.uri(info.key) for info in self.manifest.inputs[:10])
        more = f" and {self.found - 10} more" if self.found > 10 else ""
        return (f"{self.found} landing object(s) older than the lookback were never consumed by a batch: {keys}{more}. "
                f"They are processed as batch {self.plan.batch_id}; check why they landed late (slow uploads, a "
                f"producer's clock) or raise [inputs] lookback_hours")


def sweep_reference(store: S3Store, config: Config) -> datetime | None:
    """Where the log stands: the end of the latest committed interval batch (None: no interval
    batch has committed, so no batch has a lookback to sweep behind)."""
    layout = Layout(config.layout)
    latest = load_committed_state(store, layout).latest_interval_batch_id
    manifest = None if latest is None else load_batch_manifest_or_none(store, layout, latest)
    return None if manifest is None else manifest.selector.until


def stage_sweep(store: S3Store, config: Config) -> SweepOutcome | None:
    """Stage the sweep batch if the sweep range holds objects no batch consumed; None if it does not.
    Its reference and its as_of are log time: it reads no clock (a cleared old maintenance run
    sweeps exactly what a timely one would)."""
    reference = sweep_reference(store, config)
    if reference is None:
        return None
    before = reference - timedelta(hours=config.inputs.lookback_hours)
    plan = BatchPlan(f"sweep-{batch_id_for_interval(before)}", InputSelector(sweep_before=before))
    layout = Layout(config.layout)
    if is_committed(store, layout, plan.batch_id):
        return None  # this range was swept; a straggler found later waits for the log to move on
    manifest = load_batch_manifest_or_none(store, layout, plan.batch_id) or stage_planned_batch(
        store, config, plan, reference)
    if not manifest.inputs:
        log.info("sweep before %s: every landing object of the sweep range is consumed", before.isoformat())
        return None
    log.warning("sweep batch %s: %d unconsumed landing object(s) older than the lookback", plan.batch_id,
                len(manifest.inputs))
    return SweepOutcome(plan, manifest)
