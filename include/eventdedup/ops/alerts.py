"""Alert records: a failed promotion, a halted pipeline or a failed fsck, written where operators and machines
look (an object under the alerts prefix and one structured log line). Delivery to people (SNS,
e-mail) is the scheduler's: see plugins/eventdedup_airflow.py."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timezone

import orjson

from eventdedup import codec
from eventdedup.config import Config
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Alert:
    """A failed promotion or a halted pipeline, as written to alerts/<batch_id>.json and the log."""

    batch_id: str
    kind: str  # promotion_failed | pipeline_halted | fsck_failed
    message: str
    run_id: str
    at: str

    @classmethod
    def now(cls, batch_id: str, kind: str, message: str, run_id: str) -> Alert:
        return cls(batch_id, kind, message, run_id, datetime.now(timezone.utc).isoformat())

    @property
    def subject(self) -> str:
        return f"eventdedup {self.kind.replace('_', ' ')}: batch {self.batch_id}"


def record_alert(store: S3Store, config: Config, alert: Alert) -> str:
    """Write the alert object and the structured log line; returns the object's URI."""
    key = Layout(config.layout).alert(alert.batch_id)
    store.put_bytes(key, codec.dumps(alert, indent=True), content_type="application/json")
    log.error("EVENTDEDUP_ALERT %s", orjson.dumps({**codec.to_doc(alert), "object": store.uri(key)}).decode())
    return store.uri(key)


def read_alert(store: S3Store, config: Config, batch_id: str) -> Alert | None:
    """The batch's alert object, if one was written (the latest: one object per batch)."""
    body = store.get_bytes_or_none(Layout(config.layout).alert(batch_id))
    if body is None:
        return None
    return codec.loads(Alert, body)
