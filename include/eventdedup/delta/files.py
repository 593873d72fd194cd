"""A committed data file as the Delta Lake table sees it: its path, partition values and statistics.

The table's schema is the output schema plus its two partition columns, which live in the
object's folders (`date=YYYY-MM-DD/hour=HH/`), not in the file, as Hive and Delta both expect.
Statistics come from the file's own Parquet footer (one ranged GET, the file's last 64 KiB), so
the table's data skipping agrees with the bytes: row count, null counts of the top-level columns
that are not nested, and minimum and maximum of `event_time`, `batch_id` and the declared columns
([table.columns]) of a scalar type. Delta keeps timestamp statistics to the millisecond: the
minimum is rounded down and the maximum up, so that no reader's skipping can pass over a row (a
decimal's, beyond what a binary64 holds, likewise outwards). Event ids and payloads get none (they
are random, and strings past 32 characters would need truncating), nor do nested columns.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from eventdedup.commit.records import PromotedObject
from eventdedup.errors import CorruptStateError
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store
from eventdedup.tables import OUTPUT_SCHEMA, read_parquet_tail

PARTITION_COLUMNS = ("date", "hour")
TABLE_SCHEMA = OUTPUT_SCHEMA.append(pa.field("date", pa.date32())).append(pa.field("hour", pa.int32()))

FOOTER_READ = 64 << 10
_MIN_MAX_COLUMNS = ("event_time", "batch_id")
_MAX_STAT_CHARS = 32


def relative_path(layout: Layout, key: str) -> str:
    """A data file's path in the table: its key below the output prefix (the table's root)."""
    prefix = layout.settings.output_prefix
    if not key.startswith(prefix):
        raise CorruptStateError(f"data file {key} lies outside the output prefix {prefix}")
    return key[len(prefix):]


def partition_values(path: str) -> dict[str, str | None]:
    """'date=2026-11-22/hour=05/<batch>-part-00000.parquet' -> {'date': '2026-11-22', 'hour': '5'},
    as Delta serialises a date and an integer."""
    folders = dict(part.split("=", 1) for part in path.split("/")[:-1] if "=" in part)
    try:
        day = datetime.strptime(folders["date"], "%Y-%m-%d").date()
        hour = int(folders["hour"])
    except (KeyError, ValueError):
        raise CorruptStateError(f"data file {path} is not in a date=/hour= folder") from None
    return {"date": day.isoformat(), "hour": str(hour)}


def file_statistics(store: S3Store, key: str, etag: str) -> str:
    """Delta's `stats` of one data file, from its footer (the version the commit names, by ETag)."""
    metadata = read_parquet_tail(store, key, FOOTER_READ, etag=etag, what="data file").metadata
    return json.dumps(statistics_of(metadata), separators=(",", ":"), sort_keys=True)


def statistics_of(metadata: pq.FileMetaData) -> dict[str, Any]:
    """numRecords, nullCount of every top-level, not nested column whose row groups all carry a
    count, and minValues / maxValues of the columns readers filter batches and times by, and of the
    declared columns (every column the output's own are not)."""
    nulls: dict[str, int] = {}
    minima: dict[str, Any] = {}
    maxima: dict[str, Any] = {}
    for index in range(metadata.num_columns):
        name = metadata.schema.column(index).path
        if "." in name:  # a leaf of a nested column: Delta would want it under its parents; left out
            continue
        chunks = [metadata.row_group(g).column(index).statistics for g in range(metadata.num_row_groups)]
        if not chunks or any(chunk is None for chunk in chunks):
            continue
        if all(chunk.has_null_count for chunk in chunks):
            nulls[name] = sum(chunk.null_count for chunk in chunks)
        bounded = [chunk for chunk in chunks if chunk.has_min_max]
        if (name in _MIN_MAX_COLUMNS or name not in OUTPUT_SCHEMA.names) and bounded and len(bounded) == len(chunks):
            low, high = min(chunk.min for chunk in bounded), max(chunk.max for chunk in bounded)
            _bounds(name, low, high, minima, maxima)
    stats: dict[str, Any] = {"numRecords": metadata.num_rows, "nullCount": nulls}
    if minima:
        stats.update(minValues=minima, maxValues=maxima)
    return stats


def _bounds(name: str, low: Any, high: Any, minima: dict[str, Any], maxima: dict[str, Any]) -> None:
    if isinstance(low, datetime):
        minima[name], maxima[name] = _millis_text(low, up=False), _millis_text(high, up=True)
    elif isinstance(low, date):
        minima[name], maxima[name] = low.isoformat(), high.isoformat()
    elif isinstance(low, str) and len(low) <= _MAX_STAT_CHARS and len(high) <= _MAX_STAT_CHARS:
        minima[name], maxima[name] = low, high
    elif isinstance(low, Decimal):
        minima[name], maxima[name] = _outward(low, down=True), _outward(high, down=False)
    elif type(low) in (int, float) and math.isfinite(low) and math.isfinite(high):  # not a boolean's
        minima[name], maxima[name] = low, high


def _outward(value: Decimal, *, down: bool) -> float | int:
    """A decimal as a JSON number no reader's skipping passes over: itself where a binary64 (or an
    integer) holds it exactly, else the nearest double beyond it."""
    if value == value.to_integral_value():
        return int(value)
    near = float(value)
    if Decimal(near) == value:
        return near
    if down and Decimal(near) > value:
        return math.nextafter(near, -math.inf)
    if not down and Decimal(near) < value:
        return math.nextafter(near, math.inf)
    return near


def _millis_text(moment: datetime, *, up: bool) -> str:
    moment = moment.astimezone(timezone.utc) if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
    floor = moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    if up and floor != moment:
        floor += timedelta(milliseconds=1)
    return floor.strftime("%Y-%m-%dT%H:%M:%S.") + f"{floor.microsecond // 1000:03d}Z"


def modification_millis(as_of: str) -> int:
    """An add action's modificationTime: its commit's as_of (log time, the same for every projector)."""
    moment = datetime.fromisoformat(as_of)
    moment = moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def partition_of_object(layout: Layout, obj: PromotedObject) -> tuple[str, Mapping[str, str | None]]:
    path = relative_path(layout, obj.key)
    return path, partition_values(path)
