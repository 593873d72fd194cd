"""Every S3 object name eventdedup reads or writes, derived from batch id and partition only.

No clock and no randomness in what a commit names: a rerun writes exactly the same final names,
which is what makes reruns idempotent and recovery decidable. Only staging names carry a job
attempt's random token (`Layout.attempt_root`), and no commit records them.
"""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from eventdedup.config import LayoutSettings
from eventdedup.errors import InvalidNameError
from eventdedup.keys import CacheKey, day_guard_head_key, guard_head_key
from eventdedup.naming import validate_batch_id

LOG_VERSION_DIGITS = 20
SEGMENT_SUFFIX = ".seg"
GUARD_SUFFIX = ".guard"


@dataclass(frozen=True)
class Layout:
    settings: LayoutSettings

    # --- batch staging -------------------------------------------------------------------
    def batch_manifest(self, batch_id: str) -> str:
        return f"{self.settings.state_prefix}batches/{validate_batch_id(batch_id)}/manifest.json"

    def batch_committed_marker(self, batch_id: str) -> str:
        """Where a batch that has left the folded state records the log version that committed it."""
        return f"{self.settings.state_prefix}batches/{validate_batch_id(batch_id)}/committed.json"

    def batch_exclusions(self, batch_id: str) -> str:
        """Where `exclude-input` records the batch's excluded inputs, one object each."""
        return f"{self.settings.state_prefix}batches/{validate_batch_id(batch_id)}/excluded/"

    def staging_root(self, batch_id: str) -> str:
        return f"{self.settings.staging_prefix}{validate_batch_id(batch_id)}/"

    def job_result(self, batch_id: str) -> str:
        """Where a job result is written: a name of its own, so that a release that reads only
        unnumbered job results finds none (and refuses to promote) instead of misreading one (a
        rolling upgrade, a rollback; docs/formats.md)."""
        return f"{self.staging_root(batch_id)}job-result.json"

    def legacy_job_result(self, batch_id: str) -> str:
        """The older name of job results: read when `job_result` holds none (docs/formats.md)."""
        return f"{self.staging_root(batch_id)}_job_result.json"

    def attempt_root(self, batch_id: str, attempt: str) -> str:
        """Where one attempt of a batch's job (or operation) stages its objects. A promotion copies
        the objects its journal names, by ETag; an attempt writes only under its own root and
        never deletes another's, so a job rerun while a promoter is about to journal an earlier
        result cannot take that result's objects away. The attempt is a random token: staging
        names are never part of what a commit records (final names derive from the batch id)."""
        return f"{self.staging_root(batch_id)}attempt-{validate_batch_id(attempt)}/"

    def attempt_root_of(self, batch_id: str, key: str) -> str | None:
        """Inverse of attempt_root: the attempt root a staged key of the batch lies under; None for any other key."""
        prefix = f"{self.staging_root(batch_id)}attempt-"
        end = key.find("/", len(prefix)) if key.startswith(prefix) else -1
        return None if end < 0 else key[:end + 1]

    def staged_data(self, batch_id: str, attempt: str, date_text: str, hour_text: str, partition: int) -> str:
        return (f"{self.attempt_root(batch_id, attempt)}data/date={date_text}/hour={hour_text}/"
                f"part-{partition:05d}.parquet")

    def staged_audit(self, batch_id: str, attempt: str, partition: int) -> str:
        return f"{self.attempt_root(batch_id, attempt)}audit/part-{partition:05d}.parquet"

    def staged_quarantine(self, batch_id: str, attempt: str, input_index: int) -> str:
        return f"{self.attempt_root(batch_id, attempt)}quarantine/part-{input_index:05d}.parquet"

    def staged_cache_segment(self, batch_id: str, attempt: str, key: CacheKey) -> str:
        return (f"{self.attempt_root(batch_id, attempt)}cache/date={key.date_text}/hour={key.hour_text}/"
                f"bucket={key.bucket:04d}{SEGMENT_SUFFIX}")

    def staged_guard(self, batch_id: str, attempt: str, hour: int, bucket: int) -> str:
        return f"{self.attempt_root(batch_id, attempt)}cache/{_guard_folder(hour, bucket)}{GUARD_SUFFIX}"

    # --- final, promoted locations ------------------------------------------------------------
    def final_data(self, batch_id: str, date_text: str, hour_text: str, partition: int) -> str:
        return (
            f"{self.settings.output_prefix}date={date_text}/hour={hour_text}/"
            f"{validate_batch_id(batch_id)}-part-{partition:05d}.parquet"
        )

    def backfilled_data(self, key: str, columns_tag: str) -> str:
        """Where a column backfill writes its copy of a batch's data file (the original, or an
        earlier copy): beside it, `<batch>-part-NNNNN.<columns tag>.parquet`, the tag naming the
        columns it holds (eventdedup.ops.backfill_columns), so the copy is still the batch's."""
        if self.data_owner(key) is None or not _COLUMNS_TAG.fullmatch(columns_tag):
            raise InvalidNameError(f"{key} is no batch's data file, or {columns_tag!r} no columns tag")
        folder, _, name = key.rpartition("/")
        number_end = name.rindex("-part-") + len("-part-") + 5
        return f"{folder}/{name[:number_end]}.{columns_tag}.parquet"

    def data_owner(self, key: str) -> str | None:
        """Inverse of final_data (and backfilled_data): the batch a data file (its key, or its path
        below the output prefix) belongs to; None for any other file (one a Delta compaction wrote)."""
        name = key.rsplit("/", 1)[-1]
        stem, sep, tail = name.rpartition("-part-")
        number, dot, tag = tail[:-len(".parquet")].partition(".")
        if not (sep and stem and tail.endswith(".parquet") and len(number) >= 5 and number.isascii()
                and number.isdigit() and (not dot or _COLUMNS_TAG.fullmatch(tag))):
            return None
        try:
            return validate_batch_id(stem)
        except InvalidNameError:
            return None

    def final_audit(self, batch_id: str, partition: int) -> str:
        return f"{self.settings.audit_prefix}batch_id={validate_batch_id(batch_id)}/part-{partition:05d}.parquet"

    def final_quarantine(self, batch_id: str, input_index: int) -> str:
        return f"{self.settings.quarantine_prefix}batch_id={validate_batch_id(batch_id)}/part-{input_index:05d}.parquet"

    def cache_key_prefix(self, key: CacheKey) -> str:
        return f"{self.settings.cache_prefix}date={key.date_text}/hour={key.hour_text}/bucket={key.bucket:04d}/"

    def final_cache_segment(self, batch_id: str, key: CacheKey) -> str:
        return f"{self.cache_key_prefix(key)}{validate_batch_id(batch_id)}{SEGMENT_SUFFIX}"

    def final_guard(self, batch_id: str, hour: int, bucket: int) -> str:
        """The id guard of one arrival hour and bucket, as one batch left it."""
        return f"{self.settings.cache_prefix}{_guard_folder(hour, bucket)}/{validate_batch_id(batch_id)}{GUARD_SUFFIX}"

    def final_day_guard(self, batch_id: str, day: int, bucket: int) -> str:
        """A format-1 id guard of one arrival day (still read: docs/formats.md)."""
        key = CacheKey(day, 0, bucket)
        return (f"{self.settings.cache_prefix}guard/date={key.date_text}/bucket={bucket:04d}/"
                f"{validate_batch_id(batch_id)}{GUARD_SUFFIX}")

    def cache_object_of(self, key: str) -> tuple[str, str] | None:
        """Inverse of final_cache_segment and final_guard: (owner batch, the state's name of the
        head the object is a version of); None for any other object."""
        segment = self.segment_owner_and_key(key)
        if segment is not None:
            return segment[0], str(segment[1])
        parts = key[len(self.settings.cache_prefix):].split("/") if key.startswith(self.settings.cache_prefix) else []
        if len(parts) not in (4, 5) or parts[0] != "guard" or not parts[-1].endswith(GUARD_SUFFIX):
            return None
        try:
            values = [part.split("=", 1)[1] for part in parts[1:-1]]
            names = [part.split("=", 1)[0] for part in parts[1:-1]]
            if names != (["date", "hour", "bucket"] if len(parts) == 5 else ["date", "bucket"]):
                return None
            cache_key = CacheKey.parse(f"{values[0]}/{values[1] if len(parts) == 5 else '00'}/{values[-1]}")
        except (IndexError, ValueError):
            return None
        head = (guard_head_key(cache_key.hour_index, cache_key.bucket) if len(parts) == 5
                else day_guard_head_key(cache_key.day, cache_key.bucket))
        return parts[-1][:-len(GUARD_SUFFIX)], head

    def segment_owner_and_key(self, key: str) -> tuple[str, CacheKey] | None:
        """Inverse of final_cache_segment: '…/date=2026-11-22/hour=05/bucket=0003/<batch>.seg' ->
        (batch, cache key); None for any other object under the cache prefix."""
        parts = key[len(self.settings.cache_prefix):].split("/") if key.startswith(self.settings.cache_prefix) else []
        if len(parts) != 4 or not parts[3].endswith(SEGMENT_SUFFIX):
            return None
        try:
            date_text, hour_text, bucket_text = (part.split("=", 1)[1] for part in parts[:3])
            return parts[3][:-len(SEGMENT_SUFFIX)], CacheKey.parse(f"{date_text}/{hour_text}/{bucket_text}")
        except (IndexError, ValueError):
            return None

    def redshift_manifest(self, batch_id: str) -> str:
        """Redshift COPY manifest of the batch's data files."""
        return f"{self.settings.manifest_prefix}{validate_batch_id(batch_id)}.manifest"

    # --- commit protocol -----------------------------------------------------------------------
    def commit(self, version: int) -> str:
        return f"{self.settings.commit_log_prefix}{version:0{LOG_VERSION_DIGITS}d}.json"

    def version_of_commit_key(self, key: str) -> int | None:
        return _version_named(key, self.settings.commit_log_prefix, ".json")

    @property
    def journal_prefix(self) -> str:
        return f"{self.settings.state_prefix}journal/"

    def journal(self, batch_id: str) -> str:
        return f"{self.journal_prefix}{validate_batch_id(batch_id)}.json"

    def ledger_part(self, first_version: int, last_version: int) -> str:
        """The ingestion ledger's entries of the commits from `first_version` to a checkpoint's
        version (eventdedup.commit.ledger)."""
        return (f"{self.settings.state_prefix}ledger/{last_version:0{LOG_VERSION_DIGITS}d}-"
                f"{first_version:0{LOG_VERSION_DIGITS}d}.json.gz")

    def checkpoint(self, version: int) -> str:
        return f"{self.settings.state_prefix}checkpoints/{version:0{LOG_VERSION_DIGITS}d}.json.gz"

    def view_part(self, block: int, version: int) -> str:
        """The committed view's objects of one block of versions, as of a version (eventdedup.commit.view)."""
        return f"{self.settings.state_prefix}view/block={block:08d}/{version:0{LOG_VERSION_DIGITS}d}.json.gz"

    @property
    def view_parts_prefix(self) -> str:
        return f"{self.settings.state_prefix}view/block="

    @property
    def view_checkpoint_prefix(self) -> str:
        return f"{self.settings.state_prefix}view/checkpoints/"

    def view_checkpoint(self, version: int) -> str:
        return f"{self.view_checkpoint_prefix}{version:0{LOG_VERSION_DIGITS}d}.json"

    def version_of_view_checkpoint_key(self, key: str) -> int | None:
        return _version_named(key, self.view_checkpoint_prefix, ".json")

    @property
    def last_checkpoint(self) -> str:
        return f"{self.settings.state_prefix}checkpoints/_last_checkpoint"

    def alert(self, batch_id: str) -> str:
        return f"{self.settings.alerts_prefix}{validate_batch_id(batch_id)}.json"

    def cache_identity(self) -> str:
        return f"{self.settings.state_prefix}cache_identity.json"

    def own_prefixes(self) -> dict[str, str]:
        """Every prefix eventdedup writes under, by setting name: input may come from none of them."""
        return self.settings.own_prefixes()


# A column backfill's tag in its files' names: "c" and 8 hex digits of its columns' digest.
_COLUMNS_TAG = re.compile(r"c[0-9a-f]{8}")


def is_guard_object(key: str) -> bool:
    """Whether an object (staged or final) is an id guard's version."""
    return key.endswith(GUARD_SUFFIX)


def new_attempt() -> str:
    """A new job attempt's token (`Layout.attempt_root`)."""
    return uuid.uuid4().hex[:16]


def _guard_folder(hour: int, bucket: int) -> str:
    key = CacheKey.of_hour(hour, bucket)
    return f"guard/date={key.date_text}/hour={key.hour_text}/bucket={bucket:04d}"


def _version_named(key: str, prefix: str, suffix: str) -> int | None:
    """Inverse of a log-versioned name (`<prefix><zero-padded version><suffix>`); None for any other key."""
    stem = key[len(prefix):-len(suffix)] if key.startswith(prefix) and key.endswith(suffix) else ""
    return int(stem) if len(stem) == LOG_VERSION_DIGITS and stem.isascii() and stem.isdigit() else None
