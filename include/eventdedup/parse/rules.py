"""What a valid event looks like for one batch: the rules every parser of the package applies
(the compiled core, the Python fast path and the reference parser alike), below all of them."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from eventdedup.column_types import DeclaredColumn
from eventdedup.config import Config
from eventdedup.parse.fingerprints import FingerprintRules

DEFAULT_MAX_OBJECT_BYTES = 1_073_741_824  # [events] max_object_bytes


@dataclass(frozen=True)
class ParseRules:
    """What a valid event looks like for one batch; picklable for Spark executors."""

    key_fields: tuple[str, ...]
    time_field: str
    min_time_us: int
    max_time_us: int
    max_line_bytes: int = 1_048_576
    max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES
    fingerprint: FingerprintRules = FingerprintRules()
    trim: bool = False
    lower: bool = False
    # The field min:/max: survivor policies compare; None for first/last.
    survivor_field: str | None = None
    # How the survivor field's values compare: "value" or "instant" (read as the time field is).
    survivor_values: str = "value"
    partition_time: str = "event"  # [dedup] partition_time: whose hour files an event's cache entry
    compiled: bool = True  # [events] compiled_parser: the compiled core may vouch for lines
    # The declared columns the batch writes (eventdedup.parse.columns), and [table] on_mismatch.
    columns: tuple[DeclaredColumn, ...] = ()
    on_mismatch: str = "null"

    @property
    def quarantine_mismatches(self) -> bool:
        return self.on_mismatch == "quarantine"

    @property
    def checked_columns(self) -> tuple[DeclaredColumn, ...]:
        """The declared columns whose values the parse checks: all under on_mismatch = "quarantine"
        (a line with a value that does not fit is quarantined, never deduplicated), else none. The
        parse extracts no value: the dedup stage does, for the output rows only
        (eventdedup.parse.columns_fast.columns_of_raw)."""
        return self.columns if self.quarantine_mismatches else ()

    @classmethod
    def for_batch(cls, config: Config, as_of: datetime, *, fingerprint_hash: str,
                  columns: tuple[DeclaredColumn, ...] | None = None, on_mismatch: str | None = None) -> ParseRules:
        """The rules of a batch at `as_of` on a cache whose identity records `fingerprint_hash`
        (eventdedup.cache.identity.check_cache_identity): never the configuration's alone, which
        may leave it unset. `columns` and `on_mismatch`: a rerun's, as its commit recorded them
        (else the configuration's)."""
        events, dedup = config.events, config.dedup
        max_time = as_of.timestamp() + events.max_future_hours * 3600
        return cls(
            key_fields=config.key_fields,
            time_field=events.time_field,
            min_time_us=int(events.min_event_time.timestamp() * 1_000_000),
            max_time_us=int(max_time * 1_000_000),
            max_line_bytes=events.max_line_bytes,
            max_object_bytes=events.max_object_bytes,
            fingerprint=FingerprintRules(dedup.fingerprint_fields, dedup.fingerprint_exclude, fingerprint_hash),
            trim="trim" in dedup.normalize,
            lower="lower" in dedup.normalize,
            survivor_field=dedup.survivor_field,
            survivor_values=dedup.survivor_values,
            partition_time=dedup.partition_time,
            compiled=events.compiled_parser,
            columns=config.table.columns if columns is None else columns,
            on_mismatch=on_mismatch or config.table.on_mismatch,
        )
