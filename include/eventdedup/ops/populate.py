"""Cold start: commit an existing dataset's events to the cache, emitting none of them.

A team moving to eventdedup has months of events already deduplicated (Snowplow ships an
events-manifest populator for this; Delta and Hudi users bootstrap from existing tables).
`populate` reads a prefix of JSON lines or Parquet (eventdedup's own `deduped/` output, whose
`raw` column keeps every event verbatim, or any table with an id and a time column) and runs it
as an ordinary batch through the same Spark job, parser, keys and commit: its events are decided
like any batch's (copies within the dataset, and of events the cache already holds, go to the
audit), and the ones it would emit become cache entries instead, counted as `populated`. It
writes no data file.

Its entries live like any batch's: one window from the populate's arrival. Idempotent: the
default batch id is derived from the prefix and the objects under it (keys and ETags), so a
second populate of an unchanged dataset is the same, committed batch (nothing changes); objects
added since make a new id, and the ingestion ledger skips the ones an earlier populate consumed.
"""
from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from eventdedup.commit.view import dataset_objects
from eventdedup.config import Config
from eventdedup.errors import BatchManifestError
from eventdedup.inputs.selector import InputSelector, checked_selector
from eventdedup.layout import Layout
from eventdedup.naming import validate_batch_id
from eventdedup.ops.pipeline import run_batch
from eventdedup.ops.scheduling import BatchPlan
from eventdedup.promotion.promote import PromotionOutcome
from eventdedup.s3store import S3Store

if TYPE_CHECKING:
    from pyspark import SparkContext

log = logging.getLogger(__name__)
POPULATE_ID_PREFIX = "populate-"


def populate_selector(layout: Layout, source_prefix: str) -> InputSelector:
    """The dataset's selector, refused (before any S3 request) if it overlaps our own state."""
    return checked_selector(layout, InputSelector(input_prefix=source_prefix, populate=True))


def plan_populate(store: S3Store, config: Config, source_prefix: str, batch_id: str | None = None) -> BatchPlan:
    """The populate batch of a dataset: its selector (`populate_selector`) and its id
    (`populate-<16 hex>`: BLAKE2b over the prefix and every object it reads, key and ETag, so the
    same dataset always names the same batch). A dataset with nothing to read is refused, naming
    the prefix: a mistyped prefix must not look like success."""
    layout = Layout(config.layout)
    selector = populate_selector(layout, source_prefix)
    assert selector.input_prefix is not None
    objects = [info for info in dataset_objects(store, layout, selector) if not info.key.endswith("/")]
    if not objects:
        committed = " committed by a batch" if selector.input_prefix.startswith(config.layout.output_prefix) else ""
        raise BatchManifestError(f"nothing to populate: no object{committed} under {store.uri(selector.input_prefix)}; "
                                 "check --source-prefix")
    if batch_id is None:
        digest = hashlib.blake2b(selector.input_prefix.encode("utf-8") + b"\n", digest_size=8)
        for info in sorted(objects, key=lambda item: item.key):
            digest.update(f"{info.key}\t{info.etag}\n".encode())
        batch_id = f"{POPULATE_ID_PREFIX}{digest.hexdigest()}"
    return BatchPlan(validate_batch_id(batch_id), selector)


def run_populate(store: S3Store, config: Config, source_prefix: str, now: datetime,
                 spark: Callable[[], SparkContext], batch_id: str | None = None) -> PromotionOutcome:
    """Stage, compute and commit the populate batch; a committed one is reported, not redone."""
    plan = plan_populate(store, config, source_prefix, batch_id)
    log.info("populate %s from %s", plan.batch_id, plan.selector.input_prefix)
    return run_batch(store, config, plan.batch_id, plan.selector, now, spark)
