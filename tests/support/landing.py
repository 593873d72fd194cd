"""Landing objects placed in time without waiting for the clock: through the fault proxy, whose
LIST replies show each key's LastModified as the test says (`redate`), and interval batches run
the way a scheduler runs them."""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from eventdedup.config import Config
from eventdedup.inputs.selector import InputSelector
from eventdedup.ops.pipeline import run_batch
from eventdedup.s3store import S3Store, make_client
from eventdedup_dev.s3_fault_proxy import FaultProxy

from .helpers import make_config, put_lines


def through_proxy(dating_proxy: FaultProxy, s3_server: Any, bucket: str, **sections: dict) -> tuple[S3Store, Config]:
    """A store and configuration whose requests go through the dating proxy (2 buckets, 2 partitions)."""
    sections = {**sections, "dedup": {"buckets": 2, **sections.get("dedup", {})}, "spark": {"partitions": 2}}
    config = make_config(dating_proxy.endpoint_url, bucket, **sections)
    return S3Store(make_client(config.s3), bucket), config


def land(store: S3Store, dated: dict[str, datetime], key: str, lines: list[bytes], at: datetime) -> None:
    """Put an object and have listings date it `at`."""
    put_lines(store, key, lines)
    dated[key] = at


def interval_batch(store: S3Store, config: Config, start: datetime, end: datetime, spark: Any,
                   now: datetime | None = None) -> str:
    """The interval [start, end) as a scheduled run processes it, staged a minute after its end
    (or at `now`: a backfill runs long after its interval)."""
    batch_id = start.strftime("%Y%m%dT%H%M%SZ")
    run_batch(store, config, batch_id, InputSelector(since=start, until=end), now or end + timedelta(minutes=1),
              lambda: spark)
    return batch_id
