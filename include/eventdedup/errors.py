"""Specific exceptions, each with a message a data engineer can act on."""
from __future__ import annotations

from collections.abc import Callable


class EventDedupError(Exception):
    """Base class: every failure eventdedup raises on purpose derives from it."""


class ConfigError(EventDedupError):
    """The configuration file or an environment override is invalid."""


class InvalidNameError(EventDedupError):
    """A batch id or prefix would produce unsafe or ambiguous S3 keys."""


class BatchManifestError(EventDedupError):
    """A batch's frozen input list is missing, unreadable or conflicts with the request."""


class InputChangedError(EventDedupError):
    """An input object changed after its batch was staged; reprocessing it would not be a rerun."""


class CorruptStateError(EventDedupError):
    """A cache segment, commit record or checkpoint does not parse. Never read as empty:
    that would silently leak duplicates."""


class CommitConflictError(EventDedupError):
    """Another commit took the log version this batch needed."""


class StaleBatchError(EventDedupError):
    """The batch was computed against an older committed state than the log head."""


class ExpiredHistoryError(EventDedupError):
    """A committed batch cannot be recomputed: the cache hours it checked have expired."""


class OutOfOrderBatchError(EventDedupError):
    """A batch tried to commit before the batch that must precede it."""


class BatchNotReadyError(EventDedupError):
    """Promotion was asked for a batch whose Spark job has not produced a result."""


class InconsistentStoreError(EventDedupError):
    """An unfinished promotion exists; the pipeline halts until `eventdedup recover` succeeds."""


class ColumnsRefusedError(EventDedupError):
    """The declared columns changed in a way the output's schema cannot take (a removal, a rename,
    a type change that is no widening), or a column operation that cannot run."""


class RetractionRefusedError(EventDedupError):
    """A retraction that would leave the committed view inconsistent (a later batch decided
    against the retracted one) or that names no recent committed batch."""


class EmptyIntervalError(EventDedupError):
    """A store's first interval batch, run by hand, selected no input: it is not committed, since
    committed empty it would fix where the store's intervals start (eventdedup.ops.scheduling)."""

    def __init__(self, explain: Callable[[str], str]) -> None:
        super().__init__(explain("<config>"))
        self.explain = explain  # the message, naming the configuration file its commands should name
