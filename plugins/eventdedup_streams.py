"""Which streams this Airflow deployment runs, as the DAG files need them at every parse: each
stream's DAG ids, schedule, go-live, pool and output Asset, and why any stream file cannot run.

Two shapes of deployment:
- a folder of stream files, `<name>.toml` each (eventdedup.streams): EVENTDEDUP_STREAMS_DIR names
  it, else `conf/streams/` once it holds a stream file; every stream gets `eventdedup_<name>_pipeline`,
  `_maintenance`, `_populate`, `_retract` and `_reshard`, its tasks reading its own file;
- otherwise one configuration, EVENTDEDUP_CONFIG (default `conf/eventdedup.airflow.toml`), with
  today's DAG ids, its tasks reading whatever EVENTDEDUP_CONFIG names when they run.

The DAG files build every good stream's DAGs; dags/eventdedup_stream_errors.py raises the errors
as its own import error, so Airflow's UI shows them without hiding any other stream's DAGs (an
import error of a DAG file takes every DAG of that file away). That file's name is not this
module's: the DAG folder is on sys.path too, and `import eventdedup_streams` must find this one.
Everything that depends on a stream's values (its schedule's fields, its go-live) is checked here,
before a DAG is built: a bad cron must be its stream's error, not an import error of the file
holding every stream's pipeline.
Parsing reads only the stream files; no connection, no Variable.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from eventdedup_airflow import DEFAULT_CONFIG, PROJECT_ROOT, StreamTarget

from eventdedup.config import Config, load_config
from eventdedup.errors import EventDedupError
from eventdedup.streams import DEFAULT_POOL, deployment_folder, read_stream_folder, store_pool_name

DEFAULT_STREAMS_DIR = PROJECT_ROOT / "conf" / "streams"
DEFAULT_PIPELINE_CRON = "*/5 * * * *"
DEFAULT_MAINTENANCE_CRON = "@daily"


@dataclass(frozen=True)
class DeployedStream:
    """One stream as its DAGs are built: the ids, schedule and resources of every DAG of it."""

    name: str | None  # None: the one-stream deployment, today's DAG ids
    target: StreamTarget
    pipeline_schedule: Any  # a timetable, checked
    start_date: datetime
    maintenance_schedule: str
    output_asset: str
    pool: str
    description: str | None

    def dag_id(self, kind: str) -> str:
        """`eventdedup_<kind>`, or a stream's `eventdedup_<stream>_<kind>`."""
        return f"eventdedup_{kind}" if self.name is None else f"eventdedup_{self.name}_{kind}"

    def tags(self, *kinds: str) -> list[str]:
        return ["eventdedup", *kinds, *([] if self.name is None else [f"stream:{self.name}"])]


@dataclass(frozen=True)
class Deployment:
    """The streams that get DAGs, and what keeps the others from getting any (one line each)."""

    source: str
    streams: tuple[DeployedStream, ...]
    errors: tuple[str, ...]


class StreamConfigurationError(Exception):
    """Stream files that cannot run, raised by dags/eventdedup_stream_errors.py as its import error."""


def streams_folder(environ: Mapping[str, str]) -> Path | None:
    """The folder of stream files this deployment runs (eventdedup.streams.deployment_folder), or
    None for the one-configuration deployment."""
    return deployment_folder(environ, DEFAULT_STREAMS_DIR)


def deployment(environ: Mapping[str, str] | None = None) -> Deployment:
    """What the DAG files build, from the environment as the DAG processor has it."""
    environ = os.environ if environ is None else environ
    folder = streams_folder(environ)
    if folder is None:
        path = environ.get("EVENTDEDUP_CONFIG") or str(DEFAULT_CONFIG)
        try:
            deployed = _deployed(None, Path(path), load_config(path, environ), environ)
        except (EventDedupError, ValueError, OSError) as exc:  # reported by dags/eventdedup_stream_errors.py
            return Deployment(f"EVENTDEDUP_CONFIG {path}", (), (str(exc),))
        return Deployment(f"EVENTDEDUP_CONFIG {path}", (deployed,), ())
    found = read_stream_folder(folder, environ)
    streams, errors = [], [error.message for error in found.errors]
    for stream in found.streams:
        try:
            streams.append(_deployed(stream.name, stream.path, stream.config, environ))
        except ValueError as exc:  # one stream's schedule must not hide the others
            errors.append(str(exc))
    return Deployment(f"the streams folder {folder}", tuple(streams), tuple(errors))


def _deployed(name: str | None, path: Path, config: Config, environ: Mapping[str, str]) -> DeployedStream:
    """A stream's DAG settings: its file's [schedule], else the deployment's environment, else the
    defaults; raises with a message naming the file when one cannot be used."""
    from airflow.sdk import CronDataIntervalTimetable, CronTriggerTimetable, DeltaDataIntervalTimetable

    cron = config.schedule.pipeline_cron or environ.get("EVENTDEDUP_SCHEDULE") or DEFAULT_PIPELINE_CRON
    maintenance = (config.schedule.maintenance_cron or environ.get("EVENTDEDUP_MAINTENANCE_SCHEDULE")
                   or DEFAULT_MAINTENANCE_CRON)
    pipeline = CronDataIntervalTimetable(cron, timezone="UTC")
    for key, timetable in (("pipeline_cron", pipeline), ("maintenance_cron", CronTriggerTimetable(maintenance,
                                                                                                timezone="UTC"))):
        try:
            timetable.validate()
        except Exception as exc:  # noqa: BLE001 - Airflow's own check, its message kept
            raise ValueError(f"{path}: [schedule] {key}: {exc}") from None
    interval_seconds = environ.get("EVENTDEDUP_INTERVAL_SECONDS")  # tests and sub-minute demos: every stream
    if interval_seconds:
        pipeline = DeltaDataIntervalTimetable(timedelta(seconds=int(interval_seconds)))
    start = config.schedule.start_date or _start_date(environ, path)  # raises ValueError, naming the file
    base_pool = environ.get("EVENTDEDUP_STORE_POOL", DEFAULT_POOL)
    bucket, output = config.s3.bucket, config.layout.output_prefix
    if name is None:
        return DeployedStream(None, StreamTarget(), pipeline, start, maintenance,
                              environ.get("EVENTDEDUP_OUTPUT_ASSET") or f"s3://{bucket}/{output}", base_pool, None)
    return DeployedStream(name, StreamTarget(name, str(path)), pipeline, start, maintenance, f"s3://{bucket}/{output}",
                          store_pool_name(base_pool, name), f"eventdedup stream {name} ({path})")


def _start_date(environ: Mapping[str, str], path: Path) -> datetime:
    # Every interval runs, oldest first, from the go-live (catchup): the promotion gate commits an
    # interval only on top of the one before it. There is no default: from any fixed date a first
    # unpause would queue every interval since (weeks of five-minute runs).
    text = environ.get("EVENTDEDUP_START_DATE")
    if not text:
        raise ValueError(f"EVENTDEDUP_START_DATE is not set and {path} sets no [schedule] start_date: set either to "
                         "the pipeline's go-live, e.g. 2026-11-24T00:00:00+00:00 (the first interval it processes; "
                         "every later one runs, in order)")
    return datetime.fromisoformat(text)
