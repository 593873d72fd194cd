"""An operator's way out of a wedged batch: quarantine one whole input object of a staged,
uncommitted batch, with a reason, instead of editing S3 by hand.

A batch is its frozen manifest; when one of its objects can never be read as frozen (replaced
or deleted after staging: `InputChangedError` on every attempt, which holds every later interval
behind it), `eventdedup exclude-input` (eventdedup.ops.exclude) records the exclusion beside the manifest. The next job
attempt does not read that object: it becomes one quarantine row for the object as a whole
(line 0, "excluded by operator: <reason>"), committed with the batch and counted as
`inputs_excluded`. Promotion refuses a job result computed under other exclusions, so an
exclusion made while a job ran can never be skipped. The object itself is left alone: a manual
batch can process its new version later. The excluded version (its ETag) counts as consumed in
the ingestion ledger: reading that same version again takes `--reprocess`.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from eventdedup import codec
from eventdedup.errors import BatchManifestError
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store

EXCLUDED_REASON_PREFIX = "excluded by operator: "


@dataclass(frozen=True)
class ExcludedInput:
    key: str
    etag: str  # the frozen ETag: the object version the batch no longer reads
    reason: str
    excluded_at: str

    def to_bytes(self) -> bytes:
        return codec.dumps(self, indent=True)

    @classmethod
    def from_bytes(cls, data: bytes, name: str) -> ExcludedInput:
        try:
            return codec.loads(cls, data)
        except codec.CodecError as exc:
            raise BatchManifestError(f"input exclusion {name} is unreadable: {exc}") from None

    @property
    def quarantine_reason(self) -> str:
        return EXCLUDED_REASON_PREFIX + self.reason


def exclusion_key(layout: Layout, batch_id: str, input_key: str) -> str:
    # A digest names the record: input keys may hold any character, and one record per key.
    return f"{layout.batch_exclusions(batch_id)}{hashlib.sha256(input_key.encode()).hexdigest()[:32]}.json"


def load_exclusions(store: S3Store, layout: Layout, batch_id: str) -> dict[str, ExcludedInput]:
    """The batch's excluded inputs by key (one LIST; usually empty)."""
    found: dict[str, ExcludedInput] = {}
    for item in store.list(layout.batch_exclusions(batch_id)):
        record = ExcludedInput.from_bytes(store.get_bytes(item.key), store.uri(item.key))
        found[record.key] = record
    return found
