"""One validated configuration: a TOML file plus `EVENTDEDUP_<SECTION>__<KEY>` environment overrides.

Validated once at start-up and passed explicitly; nothing deeper in the code reads the
environment. Every dataclass is frozen so the object can be shipped to Spark executors safely.
"""
from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from eventdedup.column_types import ON_MISMATCH, ColumnTypeError, DeclaredColumn, declared_column
from eventdedup.errors import ConfigError, InvalidNameError
from eventdedup.naming import normalize_prefix

ENV_PREFIX = "EVENTDEDUP_"


@dataclass(frozen=True)
class S3Settings:
    bucket: str
    endpoint_url: str | None = None  # None or "" means real AWS
    region: str = "us-east-1"
    max_pool_connections: int = 32


@dataclass(frozen=True)
class LayoutSettings:
    landing_prefix: str = "landing/"
    output_prefix: str = "deduped/"
    cache_prefix: str = "_eventdedup/cache/"
    staging_prefix: str = "_eventdedup/staging/"
    audit_prefix: str = "audit/"
    quarantine_prefix: str = "quarantine/"
    commit_log_prefix: str = "_eventdedup/log/"
    # Batch manifests, promotion journals and log checkpoints.
    state_prefix: str = "_eventdedup/state/"
    # Redshift-COPY-style manifests, one per committed batch.
    manifest_prefix: str = "manifests/"
    alerts_prefix: str = "alerts/"
    # The daily HTML report and its JSON (eventdedup.report), one pair per day and a latest.
    reports_prefix: str = "reports/"

    def own_prefixes(self) -> dict[str, str]:
        """Every prefix eventdedup writes under, by setting name: input may come from none of them,
        and no other stream may write under them (eventdedup.streams)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "landing_prefix"}


@dataclass(frozen=True)
class EventSettings:
    id_field: str = "event_id"
    time_field: str = "created_at"
    # Events outside [min_event_time, as_of + max_future_hours] are quarantined, not processed.
    min_event_time: datetime = datetime(2000, 1, 1, tzinfo=timezone.utc)
    max_future_hours: int = 24
    # Longer lines are quarantined whole: one runaway producer must not blow up a task's memory.
    max_line_bytes: int = 1_048_576
    # Larger objects (after gzip) are quarantined whole, as one finding: a task holds its object
    # in memory (about 3x with the parse), and a gzip bomb inflates 1000:1. Raise both together.
    max_object_bytes: int = 1_073_741_824
    # Parse with the compiled core where it is built (eventdedup.parse.native_core); false: the
    # pure-Python parser only (same rows, several times the CPU), a switch for suspecting the core.
    compiled_parser: bool = True


@dataclass(frozen=True)
class InputSettings:
    """Which landing objects an interval batch lists (eventdedup.inputs.landing)."""

    # How keys under the landing prefix encode their time, hour or coarser, as strftime: e.g.
    # "%Y/%m/%d/%H/" (Firehose), "dt=%Y-%m-%d/hour=%H/" (Hive), "year=%Y/month=%m/day=%d/hour=%H/"
    # (Kafka Connect's TimeBasedPartitioner). A batch lists only the partitions of its lookback.
    partition_format: str = ""
    # Or: keys that begin with their time and so sort by it (e.g. "%Y%m%dT%H%M"): a batch lists
    # from the start of its lookback (StartAfter). Neither set: the whole landing prefix is listed.
    sorted_key_format: str = ""
    # How far back a batch looks for landing objects not yet consumed. Older ones are the sweep's.
    lookback_hours: int = 3
    # How far behind the lookback the maintenance DAG's sweep looks for objects never consumed.
    sweep_hours: int = 168


# strftime directives a partition format may use: hour or coarser, fixed width, so that every
# hour maps to one prefix and prefixes sort as their times do.
PARTITION_DIRECTIVES = frozenset("YmdHj")
SORTED_KEY_DIRECTIVES = frozenset("YmdHMSj")

SYNTHETIC_POLICIES = ("rename", "drop", "keep")
DEDUP_MODES = ("enforce", "observe")
PARTITION_TIMES = ("event", "id")
NORMALIZE_STEPS = ("trim", "lower")
SURVIVOR_KINDS_BY_ORDER = ("first", "last")
SURVIVOR_KINDS_BY_FIELD = ("min", "max")
SURVIVOR_VALUES = ("value", "instant")  # how a survivor field's values compare


def parse_survivor(text: str) -> tuple[str, str | None]:
    """'first' -> ('first', None); 'max:updated_at' -> ('max', 'updated_at'). Unvalidated."""
    kind, _, field_name = text.partition(":")
    return kind, field_name or None


# The bucket count a new cache records when [dedup] buckets is left unset. Every (hour, bucket)
# is a segment object a batch reads and rewrites when it touches them, so the count sets the
# requests per batch (24 hours x 64 buckets was most of a 1M-event batch's 1,800 requests on one
# machine), and the first count bounds the dedup tasks for good (a reshard grows segments'
# count, not the job's parallelism). 16 keeps both modest; a cluster sets its count before its
# first batch.
NEW_CACHE_BUCKETS = 16

# The fingerprint hash (eventdedup.parse.fingerprints) is part of the cache identity: a cache's
# entries hold the fingerprints of the events it saw, and a retransmission is natural only if it
# is fingerprinted alike. An identity that names none is a 64-bit BLAKE2b cache's, which keeps it
# (docs/formats.md). A new cache gets XXH3-64 (~0.1 us a line, BLAKE2b ~0.7).
FINGERPRINT_BLAKE2B = "blake2b-64"
FINGERPRINT_XXH3 = "xxh3-64"
FINGERPRINT_HASHES = (FINGERPRINT_BLAKE2B, FINGERPRINT_XXH3)
NEW_STORE_FINGERPRINT = FINGERPRINT_XXH3


@dataclass(frozen=True)
class DedupSettings:
    # 0 (unset): the cache's own count, recorded by its first batch and grown by reshards; a new
    # cache records NEW_CACHE_BUCKETS. Set, it must equal the cache's current count.
    buckets: int = 0
    window_hours: int = 168
    # A log checkpoint every N commits keeps loading the committed state at O(1) requests.
    checkpoint_interval: int = 10
    # Fields whose (normalised) values form the dedup key; empty means [events] id_field.
    key_fields: tuple[str, ...] = ()
    # Payload fields the fingerprint covers; empty means the whole event.
    fingerprint_fields: tuple[str, ...] = ()
    # Volatile fields left out of the fingerprint (e.g. a collector timestamp).
    fingerprint_exclude: tuple[str, ...] = ()
    # "" (unset): the cache's own fingerprint hash, recorded by its first batch; a new cache records
    # NEW_STORE_FINGERPRINT. Set ("blake2b-64" or "xxh3-64"), it must equal the cache's.
    fingerprint_hash: str = ""
    synthetic: str = "rename"
    survivor: str = "first"
    # How a min:/max: survivor field's values compare (eventdedup.parse.order_keys): "value" (numbers
    # by value, before strings by code point) or "instant" (read as the time field is: ISO-8601 with
    # an offset, epoch seconds or milliseconds). The time field always compares as an instant.
    survivor_values: str = "value"
    changelog: bool = False
    normalize: tuple[str, ...] = ()
    # Which hour an event's cache entry belongs to: "event" (its time_field) or "id" (the time a
    # UUIDv7, UUIDv1 or ULID id carries, so every copy of an id lands in one hour whatever its
    # time_field says; ids that carry no time are quarantined). Part of the cache identity.
    partition_time: str = "event"
    # A cache segment this small is merged into the next head written to its key; a key holding
    # more builds a chain of objects, each batch writing what it adds (eventdedup.cache.heads).
    segment_merge_bytes: int = 96 << 10
    # "enforce": duplicates are dropped (or renamed, kept flagged) as the policies say; "observe":
    # every event is output as it arrived, and the audit says what enforcing would have done. The
    # cache is the one enforcing builds either way, so switching to enforce keeps it.
    mode: str = "enforce"
    # Decide buckets with the compiled dedup core where it is built (eventdedup.native_dedup); false:
    # the Python only (the same output, more CPU), a switch for suspecting the core.
    compiled_stage: bool = True

    @property
    def uses_id_guards(self) -> bool:
        """Whether batches keep id guards (eventdedup.cache.guard): copies of an id may fall in
        different hours. Not under partition_time = "id": every copy of an id lands in its id's
        hour, so no window-wide structure is read or written."""
        return self.partition_time != "id"

    @property
    def new_cache_buckets(self) -> int:
        """The count a first batch records: the configured one, else NEW_CACHE_BUCKETS."""
        return self.buckets or NEW_CACHE_BUCKETS

    @property
    def new_store_fingerprint_hash(self) -> str:
        """The fingerprint hash a first batch records: the configured one, else NEW_STORE_FINGERPRINT."""
        return self.fingerprint_hash or NEW_STORE_FINGERPRINT

    @property
    def survivor_field(self) -> str | None:
        """The field min:/max: survivor policies compare; None for first/last."""
        kind, field_name = parse_survivor(self.survivor)
        return field_name if kind in SURVIVOR_KINDS_BY_FIELD else None

    @property
    def survivor_order(self) -> str | None:
        """"min" or "max" for a survivor that compares a field; None for first/last."""
        kind, _ = parse_survivor(self.survivor)
        return kind if self.survivor_field is not None else None


@dataclass(frozen=True)
class SparkSettings:
    master: str = "local[*]"
    partitions: int = 0  # dedup tasks; 0: from the input's size and Spark's cores (job/read_units.py)
    driver_memory: str = "4g"
    # Executor-local disk copies of cache objects, each used only after S3 confirms its ETag
    # (eventdedup.cache.local_copies): "" for <temp dir>/eventdedup-object-cache; 0 bytes: none.
    local_cache_dir: str = ""
    local_cache_bytes: int = 4 << 30


TABLE_MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class TableSettings:
    """The output as a Delta Lake table, a projection of the commit log (eventdedup.delta)."""

    # "auto": a store created by this release gets the table with its first commit, and a store that
    # has one keeps it; "on": also an existing store's, created from its committed view; "off": files
    # and load manifests only (a table already there is left as it is, and lags).
    delta: str = "auto"
    # The maintenance DAG compacts an output hour (date, hour partition) into files of about this size
    # once it holds compact_min_files files and lies compact_after_hours behind the log's time.
    compact_min_files: int = 8
    compact_target_bytes: int = 256 << 20
    compact_after_hours: int = 24
    # Files the table's own compaction wrote and no longer uses are vacuumed after this long (Delta's
    # own default, 7 days: readers of older table versions keep their files that long). Batches'
    # files are never vacuumed: the commit log names them (eventdedup.delta.upkeep).
    vacuum_retention_hours: int = 168
    # [table.columns]: typed columns of the output beside the dedup columns and `raw`, in declared
    # order, each read from a field of the event (eventdedup.column_types; docs/delta-table.md).
    columns: tuple[DeclaredColumn, ...] = ()
    # A value that does not fit its column's type: "null" (null in that column, the line output as
    # usual, the mismatch counted) or "quarantine" (the line goes to the quarantine with its reason).
    on_mismatch: str = "null"


@dataclass(frozen=True)
class ReportSettings:
    """What `eventdedup report` groups duplicates by (eventdedup.report)."""

    # A top-level field of the event (e.g. "app_id") whose value the audit records for each
    # duplicate, so the report ranks producers by it without reading raw lines. "": not recorded.
    producer_field: str = ""
    # How many leading folders of an input object's key name its source in the report ("landing/
    # app-a/2026/..." at 2 is "landing/app-a/"); 0: the object's whole folder.
    source_prefix_depth: int = 0
    # How many producers and sources the report lists.
    top: int = 10


@dataclass(frozen=True)
class ScheduleSettings:
    """When a scheduler runs this configuration's batches (the Airflow DAGs; the commands ignore it).
    Unset, each falls back to the deployment's setting (docs/operations.md, "Streams")."""

    # The pipeline's data intervals, a cron in UTC: "" is EVENTDEDUP_SCHEDULE, else every 5 minutes.
    pipeline_cron: str = ""
    # The go-live: the first interval the pipeline processes; every later one runs, in order. None is
    # EVENTDEDUP_START_DATE. Moving it later after go-live leaves the intervals before it unprocessed.
    start_date: datetime | None = None
    # The maintenance DAG's runs (expiry, compaction, checks, the day's report): "" is
    # EVENTDEDUP_MAINTENANCE_SCHEDULE, else daily.
    maintenance_cron: str = ""


@dataclass(frozen=True)
class Config:
    s3: S3Settings
    layout: LayoutSettings = field(default_factory=LayoutSettings)
    events: EventSettings = field(default_factory=EventSettings)
    dedup: DedupSettings = field(default_factory=DedupSettings)
    spark: SparkSettings = field(default_factory=SparkSettings)
    inputs: InputSettings = field(default_factory=InputSettings)
    table: TableSettings = field(default_factory=TableSettings)
    report: ReportSettings = field(default_factory=ReportSettings)
    schedule: ScheduleSettings = field(default_factory=ScheduleSettings)

    @property
    def key_fields(self) -> tuple[str, ...]:
        return self.dedup.key_fields or (self.events.id_field,)

    def cache_identity(self) -> dict[str, Any]:
        """Settings that decide which cache entry an event maps to. Changing any of them between
        batches would make the committed history unreadable (every retransmission would look new),
        so the commit log records them and a batch computed with different ones is refused."""
        identity: dict[str, Any] = {
            "buckets": self.dedup.new_cache_buckets,
            "key_fields": list(self.key_fields),
            "normalize": list(self.dedup.normalize),
            "fingerprint_fields": list(self.dedup.fingerprint_fields),
            "fingerprint_exclude": list(self.dedup.fingerprint_exclude),
            "fingerprint_hash": self.dedup.new_store_fingerprint_hash,
            "time_field": self.events.time_field,
        }
        if self.dedup.partition_time != "event":  # absent: "event" (docs/formats.md)
            identity["partition_time"] = self.dedup.partition_time
        ordering = self.ordering()
        if ordering is not None:  # absent: a store that keeps no order keys (eventdedup.cache.identity)
            identity["ordering"] = ordering
        return identity

    def ordering(self) -> dict[str, str | bool] | None:
        """The order a min:/max: survivor puts versions in, which an ordered store keeps across
        batches: the survivor, how its field's values compare, and whether the store emits
        versions (changelog) or keeps its first and copies the rest (renamed or kept copies are
        claimed under the key too, so they cannot become versions later). None for first/last."""
        field_name = self.dedup.survivor_field
        if field_name is None:
            return None
        values = "instant" if field_name == self.events.time_field else self.dedup.survivor_values
        return {"survivor": self.dedup.survivor, "values": values, "changelog": self.dedup.changelog}


_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


_SECTIONS: dict[str, type] = {
    "s3": S3Settings,
    "layout": LayoutSettings,
    "events": EventSettings,
    "dedup": DedupSettings,
    "spark": SparkSettings,
    "inputs": InputSettings,
    "table": TableSettings,
    "report": ReportSettings,
    "schedule": ScheduleSettings,
}


def configuration_keys() -> dict[str, tuple[str, ...]]:
    """Every section and its keys, as a configuration file may spell them."""
    return {name: tuple(spec.name for spec in fields(cls)) for name, cls in _SECTIONS.items()}


def load_config(path: str | Path | None, environ: Mapping[str, str] | None = None) -> Config:
    """Read the TOML file (if any), apply environment overrides and validate everything."""
    raw: dict[str, dict[str, Any]] = {}
    if path is not None:
        try:
            with open(path, "rb") as handle:
                raw = tomllib.load(handle)
        except FileNotFoundError:
            raise ConfigError(f"configuration file {path} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"configuration file {path} is not valid TOML: {exc}") from None
    _apply_env_overrides(raw, os.environ if environ is None else environ)
    return config_from_mapping(raw, source=str(path) if path else "environment")


def config_from_mapping(raw: Mapping[str, Any], source: str = "mapping") -> Config:
    unknown_sections = set(raw) - set(_SECTIONS)
    if unknown_sections:
        raise ConfigError(f"{source}: unknown section(s) {sorted(unknown_sections)}; known: {sorted(_SECTIONS)}")
    built: dict[str, Any] = {}
    for name, cls in _SECTIONS.items():
        section = raw.get(name, {})
        if not isinstance(section, Mapping):
            raise ConfigError(f"{source}: [{name}] must be a table")
        built[name] = _build_section(cls, name, section, source)
    config = Config(**built)
    return _validated(config, source)


def _build_section(cls: type, name: str, section: Mapping[str, Any], source: str) -> Any:
    known = {f.name: f for f in fields(cls)}
    unknown = set(section) - set(known)
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {sorted(unknown)} in [{name}]; known: {sorted(known)}")
    if cls is S3Settings and "bucket" not in section:
        raise ConfigError(f"{source}: [s3] bucket is required")
    values: dict[str, Any] = {}
    for key, value in section.items():
        if cls is TableSettings and key == "columns":
            values[key] = _declared_columns(value, source)
            continue
        values[key] = _coerce(name, key, known[key].type, value, source)
    return cls(**values)


def _declared_columns(value: Any, source: str) -> tuple[DeclaredColumn, ...]:
    """[table.columns], in the order the file declares them: each a type, or {path, type}."""
    where = f"{source}: [table.columns]"
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a table of column = type, got {value!r}")
    columns = []
    try:
        for name, spec in value.items():
            columns.append(declared_column(str(name), spec, where))
    except ColumnTypeError as exc:
        raise ConfigError(str(exc)) from None
    folded = [column.name.lower() for column in columns]
    twice = sorted({name for name in folded if folded.count(name) > 1})
    if twice:
        raise ConfigError(f"{where}: columns {twice} differ only in case: Spark, Athena and Trino would read them "
                          "as one column")
    return tuple(columns)


def _coerce(section: str, key: str, declared: Any, value: Any, source: str) -> Any:
    where = f"{source}: [{section}] {key}"
    declared = str(declared)
    if declared == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, got {value!r}")
        return value
    if declared == "tuple[str, ...]":
        if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) and item for item in value):
            raise ConfigError(f"{where} must be a list of non-empty strings, got {value!r}")
        if len(set(value)) != len(value):
            raise ConfigError(f"{where} lists a name twice: {value!r}")
        return tuple(value)
    if declared == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where} must be an integer, got {value!r}")
        return value
    if declared in ("datetime", "datetime | None"):
        if value == "" and declared == "datetime | None":  # TOML has no null: "" leaves it unset
            return None
        if isinstance(value, datetime):
            parsed = value
        elif isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value)
            except ValueError:
                raise ConfigError(f"{where} must be an ISO-8601 timestamp, got {value!r}") from None
        else:
            raise ConfigError(f"{where} must be a timestamp, got {value!r}")
        if parsed.tzinfo is None:
            raise ConfigError(f"{where} needs a UTC offset, got {value!r}")
        return parsed.astimezone(timezone.utc)
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string, got {value!r}")
    return value


def _validated(config: Config, source: str) -> Config:
    s3 = config.s3
    if not _BUCKET_NAME.fullmatch(s3.bucket):  # what S3 accepts: an Asset URI and every key depend on it
        raise ConfigError(f"{source}: [s3] bucket {s3.bucket!r} is not a valid bucket name (3 to 63 lower-case "
                          "letters, digits, dots and hyphens, beginning and ending with a letter or digit)")
    endpoint = s3.endpoint_url or None
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        raise ConfigError(f"{source}: [s3] endpoint_url must start with http:// or https://, got {endpoint!r}")
    layout_values = {}
    try:
        for f in fields(LayoutSettings):
            layout_values[f.name] = normalize_prefix(getattr(config.layout, f.name), what=f"[layout] {f.name}")
    except InvalidNameError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    _check_prefixes_disjoint(layout_values, source)
    if not 0 <= config.dedup.buckets <= 65536:
        raise ConfigError(f"{source}: [dedup] buckets must be between 1 and 65536 (or 0, the default: the cache's own "
                          f"count), got {config.dedup.buckets}")
    if config.dedup.window_hours < 1:
        raise ConfigError(f"{source}: [dedup] window_hours must be at least 1, got {config.dedup.window_hours}")
    if config.dedup.checkpoint_interval < 1:
        raise ConfigError(f"{source}: [dedup] checkpoint_interval must be at least 1")
    if config.dedup.segment_merge_bytes < 0:
        raise ConfigError(f"{source}: [dedup] segment_merge_bytes may not be negative")
    if config.spark.local_cache_bytes < 0:
        raise ConfigError(f"{source}: [spark] local_cache_bytes may not be negative (0: no local copies)")
    if config.spark.partitions < 0:
        raise ConfigError(f"{source}: [spark] partitions must be positive (or 0: from the input and the cores)")
    if config.events.max_line_bytes < 64:
        raise ConfigError(f"{source}: [events] max_line_bytes must be at least 64")
    if config.events.max_object_bytes < config.events.max_line_bytes:
        raise ConfigError(f"{source}: [events] max_object_bytes must be at least max_line_bytes")
    if config.events.max_future_hours < 0:
        raise ConfigError(f"{source}: [events] max_future_hours may not be negative")
    for key in ("id_field", "time_field"):
        if not getattr(config.events, key):
            raise ConfigError(f"{source}: [events] {key} may not be empty")
    _validate_semantics(config.dedup, source)
    _validate_inputs(config.inputs, source)
    _validate_table(config.table, source)
    _validate_schedule(config.schedule, source)
    if config.report.source_prefix_depth < 0 or config.report.top < 1:
        raise ConfigError(f"{source}: [report] source_prefix_depth may not be negative and top must be at least 1")
    return replace(config, s3=replace(s3, endpoint_url=endpoint), layout=LayoutSettings(**layout_values))


def _validate_semantics(dedup: DedupSettings, source: str) -> None:
    if dedup.mode not in DEDUP_MODES:
        raise ConfigError(f"{source}: [dedup] mode must be one of {list(DEDUP_MODES)}, got {dedup.mode!r}")
    if dedup.synthetic not in SYNTHETIC_POLICIES:
        raise ConfigError(
            f"{source}: [dedup] synthetic must be one of {list(SYNTHETIC_POLICIES)}, got {dedup.synthetic!r}")
    if dedup.fingerprint_hash and dedup.fingerprint_hash not in FINGERPRINT_HASHES:
        raise ConfigError(f"{source}: [dedup] fingerprint_hash must be one of {list(FINGERPRINT_HASHES)} (or unset: "
                          f"the cache's own), got {dedup.fingerprint_hash!r}")
    if dedup.partition_time not in PARTITION_TIMES:
        raise ConfigError(f"{source}: [dedup] partition_time must be one of {list(PARTITION_TIMES)}, "
                          f"got {dedup.partition_time!r}")
    if dedup.partition_time == "id" and len(dedup.key_fields) > 1:
        raise ConfigError(f"{source}: [dedup] partition_time = \"id\" takes the hour from a single id; "
                          f"key_fields {list(dedup.key_fields)} has several fields")
    unknown_steps = [step for step in dedup.normalize if step not in NORMALIZE_STEPS]
    if unknown_steps:
        raise ConfigError(f"{source}: [dedup] normalize accepts {list(NORMALIZE_STEPS)}, got {unknown_steps}")
    if dedup.survivor_values not in SURVIVOR_VALUES:
        raise ConfigError(f"{source}: [dedup] survivor_values must be one of {list(SURVIVOR_VALUES)}, "
                          f"got {dedup.survivor_values!r}")
    kind, survivor_field = parse_survivor(dedup.survivor)
    by_input_order = kind in SURVIVOR_KINDS_BY_ORDER and ":" not in dedup.survivor
    by_field = kind in SURVIVOR_KINDS_BY_FIELD and survivor_field is not None
    if not (by_input_order or by_field):
        raise ConfigError(
            f"{source}: [dedup] survivor must be 'first', 'last', 'min:<field>' or 'max:<field>', "
            f"got {dedup.survivor!r}"
        )


def _validate_inputs(inputs: InputSettings, source: str) -> None:
    if inputs.partition_format and inputs.sorted_key_format:
        raise ConfigError(f"{source}: [inputs] set partition_format or sorted_key_format, not both")
    for name, allowed in (("partition_format", PARTITION_DIRECTIVES), ("sorted_key_format", SORTED_KEY_DIRECTIVES)):
        text = getattr(inputs, name)
        directives = set(re.findall(r"%(.)", text.replace("%%", "")))
        if text and ("Y" not in directives or not directives <= allowed):
            raise ConfigError(
                f"{source}: [inputs] {name} {text!r} must use %Y and only the fixed-width directives "
                f"{''.join(f'%{d}' for d in sorted(allowed))}")
    if inputs.partition_format and not inputs.partition_format.endswith("/"):
        raise ConfigError(f"{source}: [inputs] partition_format must end with '/' (a folder per partition)")
    if inputs.lookback_hours < 1 or inputs.sweep_hours < 1:
        raise ConfigError(f"{source}: [inputs] lookback_hours and sweep_hours must be at least 1")


def _validate_table(table: TableSettings, source: str) -> None:
    if table.delta not in TABLE_MODES:
        raise ConfigError(f"{source}: [table] delta must be one of {list(TABLE_MODES)}, got {table.delta!r}")
    if table.compact_min_files < 2 or table.compact_target_bytes < 1 << 20:
        raise ConfigError(f"{source}: [table] compact_min_files must be at least 2 and compact_target_bytes at "
                          "least 1 MiB")
    if table.compact_after_hours < 0:
        raise ConfigError(f"{source}: [table] compact_after_hours may not be negative")
    if table.vacuum_retention_hours < 1:
        raise ConfigError(f"{source}: [table] vacuum_retention_hours must be at least 1: a compaction still "
                          "writing its files is younger than that")
    if table.on_mismatch not in ON_MISMATCH:
        raise ConfigError(f"{source}: [table] on_mismatch must be one of {list(ON_MISMATCH)}, "
                          f"got {table.on_mismatch!r}")


def _validate_schedule(schedule: ScheduleSettings, source: str) -> None:
    """The cron's shape only: the scheduler checks its fields when it builds the DAG."""
    for key in ("pipeline_cron", "maintenance_cron"):
        text = getattr(schedule, key)
        if text and not (text.startswith("@") or 5 <= len(text.split()) <= 7):
            raise ConfigError(f"{source}: [schedule] {key} {text!r} is not a cron expression: five fields "
                              "(e.g. \"*/5 * * * *\") or a preset such as @hourly or @daily")


def _check_prefixes_disjoint(prefixes: Mapping[str, str], source: str) -> None:
    """Nested prefixes would let one kind of object be mistaken for another (e.g. input for output)."""
    items = sorted(prefixes.items(), key=lambda item: item[1])
    for (name_a, a), (name_b, b) in zip(items, items[1:], strict=False):
        if b.startswith(a):
            raise ConfigError(f"{source}: [layout] {name_b} {b!r} lies inside {name_a} {a!r}; prefixes must not nest")


def _apply_env_overrides(raw: dict[str, dict[str, Any]], environ: Mapping[str, str]) -> None:
    """EVENTDEDUP_S3__ENDPOINT_URL=http://... overrides [s3] endpoint_url; values parse as TOML if they can."""
    for name, text in environ.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        section, _, key = name[len(ENV_PREFIX):].lower().partition("__")
        if section not in _SECTIONS:
            raise ConfigError(f"environment variable {name}: unknown section {section!r}")
        raw.setdefault(section, {})[key] = _parse_env_value(text)


def _parse_env_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
