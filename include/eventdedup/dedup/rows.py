"""What a decided row says in the output and in the audit (without its raw line, which joins it
once, in input order, when the files are written).

Columns are built natively; per-row Python runs only for the rare renamed and updated rows
(their new id, their superseded batch). In observe mode every row is output as it arrived, and
the audit says what enforcing would have done ("would_" + the action: would_drop, would_rename,
would_keep).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from eventdedup.dedup.decide import Action, KeyDecision, Outcome, renamed_event_id
from eventdedup.tables import AUDIT_SCHEMA, OUTPUT_SCHEMA, repeated_text

# Output rows as decided: every column but the raw line.
DECIDED_OUTPUT = OUTPUT_SCHEMA.remove(OUTPUT_SCHEMA.get_field_index("raw"))
# Audit rows as decided: what was found and done; where the row came from is the job's to add.
DECIDED_AUDIT = pa.schema([AUDIT_SCHEMA.field(name) for name in
                           ("event_id", "event_time", "reason", "action", "kept_in_batch", "batch_id",
                            "would_supersede")])
# Labels indexed by the enums' values (0, 1, 2, ...), so an audit column is one numpy take.
_REASONS = np.array([Outcome(i).reason for i in range(len(Outcome))], dtype=object)
_ACTION_LABELS = np.array([Action(i).label for i in range(len(Action))], dtype=object)
_WOULD_LABELS = np.array([Action(i).would_label for i in range(len(Action))], dtype=object)


def output_columns(batch_id: str, table: pa.Table, decision: KeyDecision) -> pa.Table:
    """The emitted rows (`table`: event_id, fingerprint, event_time per row, in decision order):
    a renamed synthetic copy under the UUIDv5 of its key and fingerprint, its old id in
    original_event_id; a kept one flagged in duplicate_of; an update naming the batch it supersedes."""
    emitted = np.flatnonzero(decision.emitted_mask)
    kept = table.take(pa.array(emitted, pa.int64()))
    actions = decision.actions[emitted]
    rows = len(emitted)
    event_ids = kept.column("event_id").combine_chunks()
    no_text = pa.nulls(rows, pa.string())
    columns: dict[str, Any] = {"event_id": event_ids, "original_event_id": no_text, "duplicate_of": no_text,
                               "op": repeated_text("insert", rows), "supersedes_batch": no_text}
    renamed = actions == Action.RENAME
    if renamed.any():
        at = np.flatnonzero(renamed)
        originals = event_ids.take(pa.array(at, pa.int64())).to_pylist()
        fingerprints = kept.column("fingerprint").take(pa.array(at, pa.int64())).to_pylist()
        new_ids = [renamed_event_id(key, fingerprint) for key, fingerprint in zip(originals, fingerprints, strict=True)]
        mask = pa.array(renamed)
        columns["event_id"] = pc.replace_with_mask(event_ids, mask, pa.array(new_ids, pa.string()))
        columns["original_event_id"] = pc.if_else(mask, event_ids, no_text)
    flagged = actions == Action.KEEP
    if flagged.any():
        columns["duplicate_of"] = pc.if_else(pa.array(flagged), event_ids, no_text)
    updated = actions == Action.UPDATE
    if updated.any():
        superseded = [decision.holder_batch(row) for row in emitted[updated].tolist()]
        mask = pa.array(updated)
        columns["op"] = pc.if_else(mask, pa.scalar("update"), pa.scalar("insert"))
        columns["supersedes_batch"] = pc.replace_with_mask(no_text, mask, pa.array(superseded, pa.string()))
    columns.update(event_time=kept.column("event_time"), batch_id=repeated_text(batch_id, rows))
    return pa.table(columns, schema=DECIDED_OUTPUT)


def observed_output_columns(batch_id: str, table: pa.Table) -> pa.Table:
    """Every row as it arrived (observe mode): under its own id, an insert, nothing flagged; what
    the stream would be without deduplication."""
    rows = table.num_rows
    no_text = pa.nulls(rows, pa.string())
    return pa.table({"event_id": table.column("event_id"), "original_event_id": no_text, "duplicate_of": no_text,
                     "op": repeated_text("insert", rows), "supersedes_batch": no_text,
                     "event_time": table.column("event_time"), "batch_id": repeated_text(batch_id, rows)},
                    schema=DECIDED_OUTPUT)


def audit_columns(batch_id: str, table: pa.Table, decision: KeyDecision,
                  duplicates: npt.NDArray[np.intp], observe: bool = False) -> pa.Table:
    """Every duplicate found, whatever became of it (dropped ones are only ever found here): its
    reason, its action (observing: the action enforcing would take) and the batch holding the kept copy."""
    rows = table.take(pa.array(duplicates, pa.int64()))
    holders = np.array([*decision.owners, batch_id], dtype=object)
    labels = _WOULD_LABELS if observe else _ACTION_LABELS
    return pa.table({
        "event_id": rows.column("event_id"),
        "event_time": rows.column("event_time"),
        "reason": pa.array(_REASONS[decision.outcomes[duplicates]], pa.string()),
        "action": pa.array(labels[decision.actions[duplicates]], pa.string()),
        "kept_in_batch": pa.array(holders[decision.holder[duplicates]], pa.string()),
        "batch_id": repeated_text(batch_id, len(duplicates)),
        "would_supersede": _would_supersede(decision, duplicates),
    }, schema=DECIDED_AUDIT)


def _would_supersede(decision: KeyDecision, duplicates: npt.NDArray[np.intp]) -> pa.Array:
    """Per audited row: for a cross-batch synthetic copy in an ordered store without changelog,
    whether changelog would have emitted it as an update; null otherwise."""
    if decision.would_supersede is None:
        return pa.nulls(len(duplicates), pa.bool_())
    marked = decision.outcomes[duplicates] == Outcome.CROSS_BATCH_SYNTHETIC
    return pa.array(decision.would_supersede[duplicates], pa.bool_(), mask=~marked)
