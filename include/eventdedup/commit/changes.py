"""What a commit changes: one typed value, one variant per kind of change.

Carried whole from the job result through the promotion journal into the commit record, and
applied to the folded state in one place (`CommittedState.apply`), the way pyiceberg's
`TableUpdate` variants and delta-rs's `Action`s are. Its document is the codec's: an object
with a `kind`.

- `BatchChange`: a batch (scheduled interval, manual prefix, sweep, populate) adds its output,
  cache runs and consumed inputs;
- `Retraction`: batches leave the committed view (eventdedup.ops.retract);
- `Reshard`: hour segments get another bucket count from an hour on (eventdedup.ops.reshard);
- `ColumnBackfill`: an output hour's data files are replaced by copies that hold the declared
  columns (eventdedup.ops.backfill_columns).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from eventdedup.codec import json_name
from eventdedup.column_types import DeclaredColumn
from eventdedup.commit.ledger import LedgerUpdate


@dataclass(frozen=True)
class ColumnFigures:
    """One declared column in the rows a commit wrote: those whose value did not fit its type (null
    there, on_mismatch = "null"), and those where it is null (its field missing or null, or a mismatch)."""

    mismatched: int = 0
    nulls: int = 0

    def __add__(self, other: ColumnFigures) -> ColumnFigures:
        return ColumnFigures(self.mismatched + other.mismatched, self.nulls + other.nulls)


@dataclass(frozen=True)
class BatchChange:
    KIND: ClassVar[str] = "batch"

    # The first hour (hours since the epoch) the batch checked against the cache; a rerun checks
    # the same hours. None in older records (docs/formats.md).
    window_start_hour: int | None = None
    # Hours before this one may leave the state: neither this batch nor a rerun of any batch whose
    # window starts within a window of this one reads them (its window start minus one window).
    retain_from_hour: int | None = None
    # The input objects the batch consumed and the ledger's horizons (eventdedup.commit.ledger);
    # None in older records (docs/formats.md).
    ledger_update: LedgerUpdate | None = field(default=None, metadata=json_name("ledger"))
    # Dedup partitions the batch's job ran with (they lay out its data and audit files): a rerun
    # uses them; a rerun of an older record without them is refused (docs/formats.md).
    partitions: int | None = None
    # Input keys the job quarantined whole on an operator's exclusion (sorted): promotion refuses
    # the change if the batch's exclusions are other than these when it commits.
    excluded_inputs: tuple[str, ...] = ()
    # Whether the batch's window was measured by arrival and its copies found across hours. False
    # only in older records (docs/formats.md): a rerun would see other history, so they are never
    # recomputed.
    arrival_windows: bool = True
    # An interval batch: its id names its interval's start and it selected by time. Recorded, so
    # that a manual batch named like an interval never moves the schedule (older records:
    # docs/formats.md).
    interval: bool = False
    # The hour the batch arrived at (eventdedup.cache.history); None in older records, where it is
    # derived (eventdedup.commit.state.record_arrival_hour; docs/formats.md).
    arrival_hour: int | None = None
    # Earlier batches its decisions depended on: holder of a kept copy -> the batch's rows decided
    # against it (audited: dropped, renamed, kept; emitted: updates, in changelog mode). What
    # `retract` refuses on, read from the log instead of every later batch's audit. None in older
    # records (then the audit is read: docs/formats.md).
    decided_against: Mapping[str, int] | None = None
    # The [dedup] mode its job ran under: "enforce" (also where a record names none), or "observe"
    # (every event output as it arrived, the audit saying what enforcing would have done). A rerun
    # recomputes under it; promotion refuses a job computed under another mode than the configured
    # one (eventdedup.commit.gate).
    mode: str = "enforce"
    # The batch's duplicates found (its audit's rows) by the folder of their input object, and by
    # their [report] producer_field value ("" where it recorded none): each its RECORDED_VALUES most
    # frequent values, the rest under "(others)" (eventdedup.counts.bounded_counts). What
    # `eventdedup report` ranks without reading the audit; None in older records (there the report
    # reads the audit's columns: docs/formats.md).
    duplicates_by_folder: Mapping[str, int] | None = None
    duplicates_by_producer: Mapping[str, int] | None = None
    # decided_against without the batches its changelog updates supersede: the holders of its
    # copies (its audit's kept_in_batch, other than itself). None in older records (docs/formats.md).
    copies_decided_against: Mapping[str, int] | None = None
    # Its quarantined lines by reason class (eventdedup.parse.quarantine_reasons). None in older
    # records (the report reads the quarantine's `error` column).
    quarantined_by_reason: Mapping[str, int] | None = None
    # The declared columns its data files carry ([table.columns] as its job ran: name, type, path)
    # and [table] on_mismatch: a rerun writes the same, whatever the configuration says since; the
    # log's columns are the latest commit's (CommittedState.columns). Empty in older records.
    columns: tuple[DeclaredColumn, ...] = ()
    on_mismatch: str = "null"
    # Per declared column, its output rows that mismatched and that are null (None in older records).
    column_figures: Mapping[str, ColumnFigures] | None = None


@dataclass(frozen=True)
class Retraction:
    """The batches this commit removes from the committed view, and why. Its objects are their
    cache heads without their runs; it consumes no input and owns no cache run."""

    KIND: ClassVar[str] = "retraction"

    retracts: tuple[str, ...]
    reason: str
    retracted_output_rows: int = 0
    cache_keys_rewritten: int = 0
    # Set when the batches it retracts include what the log took for its latest interval although
    # it was none (a manual batch named like an interval, in an older record: docs/formats.md):
    # the latest interval is the one before it again.
    restores_interval: RestoredInterval | None = None
    # The log versions of the batches it retracts (the committed view's index finds their objects
    # by them); empty in older records (docs/formats.md).
    retracted_versions: tuple[int, ...] = ()

    @property
    def figures(self) -> dict[str, int]:
        """What it took out, as the CLI and status show it."""
        return {"retracted_batches": len(self.retracts), "retracted_output_rows": self.retracted_output_rows,
                "cache_keys_rewritten": self.cache_keys_rewritten}


@dataclass(frozen=True)
class Reshard:
    """From `from_hour` on (hours since the epoch), hour segments have `buckets` buckets
    (eventdedup.cache.epochs)."""

    KIND: ClassVar[str] = "reshard"

    from_hour: int
    buckets: int

    @property
    def cutover(self) -> tuple[int, int]:
        return self.from_hour, self.buckets

    @property
    def figures(self) -> dict[str, int]:
        return {"buckets": self.buckets, "from_hour": self.from_hour}


@dataclass(frozen=True)
class ReplacedFile:
    """A data file of the committed view that a column backfill replaces: the commit that named it
    (or the backfill that last replaced it), the batch it belongs to, its key, and the key of the
    file that replaces it (one of the backfill's objects, holding the same rows in the same order)."""

    version: int
    batch_id: str
    key: str
    by: str


@dataclass(frozen=True)
class ColumnBackfill:
    """One output hour's data files replaced by copies that hold `columns`, their values read from
    each row's raw line by the parse's rules (eventdedup.parse.columns; a mismatch is null: no row
    leaves). Readers through the log or the Delta table see the hour's old files or its new ones,
    never a mix; the old ones stay where their commits name them."""

    KIND: ClassVar[str] = "column_backfill"

    hour: int  # hours since the epoch
    columns: tuple[DeclaredColumn, ...]
    replaced: tuple[ReplacedFile, ...]
    rows: int = 0
    column_figures: Mapping[str, ColumnFigures] = field(default_factory=dict)

    @property
    def figures(self) -> dict[str, int]:
        """What it rewrote, as the CLI and status show it."""
        return {"hour": self.hour, "files_rewritten": len(self.replaced), "rows": self.rows,
                "mismatched": sum(figures.mismatched for figures in self.column_figures.values())}


@dataclass(frozen=True)
class RestoredInterval:
    """The latest interval batch once a retraction has taken a false one away (None: no interval
    batch is committed before it), and when it arrived."""

    batch_id: str | None
    arrival_hour: int | None


Change = BatchChange | Retraction | Reshard | ColumnBackfill
