"""`eventdedup exclude-input`: quarantine one whole input object of a staged, uncommitted batch
(the record and what it means: eventdedup.inputs.exclusions)."""
from __future__ import annotations

import logging
from datetime import datetime

from eventdedup.commit.job_result import withdraw_job_result
from eventdedup.commit.journal import journal_or_none
from eventdedup.commit.log import is_committed
from eventdedup.errors import BatchManifestError, CommitConflictError, EventDedupError, InconsistentStoreError
from eventdedup.inputs.exclusions import ExcludedInput, exclusion_key
from eventdedup.inputs.manifest import load_batch_manifest
from eventdedup.inputs.selector import utc_iso
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store

log = logging.getLogger(__name__)


def exclude_input(store: S3Store, layout: Layout, batch_id: str, input_key: str, reason: str,
                  now: datetime) -> ExcludedInput:
    """Record that the batch's next job quarantines `input_key` whole. Idempotent for one key."""
    if not reason.strip():
        raise BatchManifestError("an exclusion needs a reason (--reason): it is written to the quarantine")
    manifest = load_batch_manifest(store, layout, batch_id)
    frozen = next((info for info in manifest.inputs if info.key == input_key), None)
    if frozen is None:
        raise BatchManifestError(f"batch {batch_id} has no input {store.uri(input_key)}; its inputs are listed in "
                                 f"{store.uri(layout.batch_manifest(batch_id))}")
    record = ExcludedInput(input_key, frozen.etag, reason.strip(), utc_iso(now))
    key = exclusion_key(layout, batch_id, input_key)
    created = store.put_if_absent(key, record.to_bytes()) is not None
    if not created:
        return ExcludedInput.from_bytes(store.get_bytes(key), store.uri(key))  # excluded before: unchanged
    # The record first, then the checks: a promoter writes its journal, then reads the records
    # again right before its commit (promotion.promote), so whichever order the two interleave in,
    # one of them sees the other. The journal is looked for before the commit: a promotion commits
    # before it deletes its journal, so a journal gone by then means a commit found after it (the
    # other order missed a promotion that committed and cleaned up between the two looks).
    refusal: EventDedupError | None = None
    if journal_or_none(store, layout, batch_id) is not None:
        refusal = InconsistentStoreError(f"batch {batch_id} is being promoted; run `eventdedup recover` first")
    elif is_committed(store, layout, batch_id):
        refusal = CommitConflictError(f"batch {batch_id} is committed: its inputs can no longer be excluded")
    if refusal is not None:
        store.delete_keys([key])
        raise refusal
    # A job result computed before this exclusion must not be promoted (the promotion gate checks
    # it too); without one, the next attempt recomputes.
    withdraw_job_result(store, layout, batch_id)
    log.warning("batch %s: input %s excluded (%s); its next job quarantines it whole", batch_id,
                store.uri(input_key), record.reason)
    return record
