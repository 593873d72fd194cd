"""A deployment's streams: one configuration file per stream in a folder, `<folder>/<name>.toml`,
each today's configuration and validated by its loader, no two writing where the other writes.

What is wrong with a file comes back as a value beside the good streams, never raised: one
stream's mistake must not hide the others (the DAG files generate every good stream's DAGs and
report the rest as one import error; `eventdedup streams` lists both). Reading a folder of 50
files takes milliseconds, and nothing here opens a connection: the DAG files do it at every parse.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from eventdedup.config import Config, load_config
from eventdedup.errors import EventDedupError

STREAM_FILE_SUFFIX = ".toml"
# A stream's name goes into DAG ids, pool and metric names: lower case, so that two files can
# never name one stream, and at most 48 characters, so the longest DAG id stays readable.
_STREAM_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,47}")
# Two streams may read the same landing objects (e.g. one in observe mode beside one enforcing):
# each keeps its own ingestion ledger. Every other prefix is written, and so is one stream's alone.
_READ_ONLY_PREFIX = "landing_prefix"
DEFAULT_POOL = "default_pool"


@dataclass(frozen=True)
class Stream:
    """One stream: its name (the file's), its file, and its validated configuration."""

    name: str
    path: Path
    config: Config

    def prefixes(self) -> dict[str, str]:
        """Every prefix the stream reads or writes, by setting name: the landing prefix and its own."""
        return {_READ_ONLY_PREFIX: self.config.layout.landing_prefix, **self.config.layout.own_prefixes()}


@dataclass(frozen=True)
class StreamError:
    """Why files of the folder are not streams: a configuration error (one file) or a collision (two)."""

    files: tuple[Path, ...]
    message: str


@dataclass(frozen=True)
class StreamFolder:
    """The folder as read: the streams that may run, and what refused the others."""

    folder: Path
    streams: tuple[Stream, ...]
    errors: tuple[StreamError, ...]

    @property
    def refused(self) -> tuple[Path, ...]:
        """Every file an error names, in the folder's order."""
        return tuple(sorted({path for error in self.errors for path in error.files}))


class StreamNameError(EventDedupError):
    """A stream file's name cannot name a stream."""


def stream_name(path: Path) -> str:
    """The stream a file configures: its name without `.toml`, checked to be a stream's name."""
    name = path.name.removesuffix(STREAM_FILE_SUFFIX)
    if not _STREAM_NAME.fullmatch(name):
        raise StreamNameError(f"{path}: {name!r} is not a stream name: rename the file to 1-48 characters from "
                              "a-z 0-9 _ -, starting with a letter or digit (the name goes into DAG ids)")
    return name


def store_pool_name(base: str, stream: str) -> str:
    """The pool a stream's store tasks take turns in: `<base>_<stream>`, one per stream, so that one
    stream's catch-up never waits on another's. Airflow's `default_pool`, which serialises nothing,
    is shared as it is."""
    return base if base == DEFAULT_POOL else f"{base}_{stream}"


def deployment_folder(environ: Mapping[str, str], default: Path) -> Path | None:
    """The folder of stream files a deployment runs, or None when it runs one configuration:
    EVENTDEDUP_STREAMS_DIR when set; else `default` once it holds a stream file, unless
    EVENTDEDUP_CONFIG names the one configuration."""
    if environ.get("EVENTDEDUP_STREAMS_DIR"):
        return Path(environ["EVENTDEDUP_STREAMS_DIR"])
    if not environ.get("EVENTDEDUP_CONFIG") and default.is_dir() and stream_files(default):
        return default
    return None


def stream_files(folder: Path) -> list[Path]:
    """The folder's stream files, by name: `*.toml`, not hidden (an editor's `.#web.toml`)."""
    return sorted(path for path in folder.glob(f"*{STREAM_FILE_SUFFIX}") if not path.name.startswith("."))


def read_stream_folder(folder: Path, environ: Mapping[str, str]) -> StreamFolder:
    """Every stream of `folder`, each file validated with `environ`'s overrides as its tasks will be,
    then refused in pairs where two would write the same objects."""
    if not folder.is_dir():
        return StreamFolder(folder, (), (StreamError((folder,), f"the streams folder {folder} does not exist "
                                                                "(EVENTDEDUP_STREAMS_DIR names it)"),))
    loaded: list[Stream] = []
    errors: list[StreamError] = []
    for path in stream_files(folder):
        try:
            loaded.append(Stream(stream_name(path), path, load_config(path, environ)))
        except (EventDedupError, OSError, ValueError) as exc:  # OSError: unreadable; ValueError: not UTF-8
            errors.append(StreamError((path,), str(exc) if isinstance(exc, EventDedupError) else f"{path}: {exc}"))
    collisions = find_collisions(loaded)
    colliding = {path for collision in collisions for path in collision.files}
    streams = tuple(stream for stream in loaded if stream.path not in colliding)
    return StreamFolder(folder, streams, (*errors, *collisions))


def find_collisions(streams: Iterable[Stream]) -> list[StreamError]:
    """One error per pair of streams of one bucket where a prefix of one lies inside (or is) a
    prefix of the other, unless both are landing prefixes; it names both files and every such
    prefix. Sorted prefixes put every prefix right after those it lies inside, so one pass over a
    bucket's prefixes, keeping the chain of enclosing ones, finds every nesting."""
    by_bucket: dict[str, list[tuple[str, str, Stream]]] = {}
    for stream in streams:
        for setting, prefix in stream.prefixes().items():
            by_bucket.setdefault(stream.config.s3.bucket, []).append((prefix, setting, stream))
    overlaps: dict[tuple[Path, Path], list[str]] = {}
    for bucket, entries in by_bucket.items():
        enclosing: list[tuple[str, str, Stream]] = []
        for prefix, setting, stream in sorted(entries, key=lambda entry: (entry[0], str(entry[2].path))):
            while enclosing and not prefix.startswith(enclosing[-1][0]):
                enclosing.pop()
            for outer_prefix, outer_setting, outer in enclosing:
                if outer.path != stream.path and not outer_setting == setting == _READ_ONLY_PREFIX:
                    first, second = sorted([(outer, outer_setting, outer_prefix), (stream, setting, prefix)],
                                           key=lambda side: str(side[0].path))
                    overlaps.setdefault((first[0].path, second[0].path), []).append(
                        f"both {first[1]} s3://{bucket}/{first[2]}" if first[1:] == second[1:] else
                        f"{first[0].name}'s {first[1]} s3://{bucket}/{first[2]} and "
                        f"{second[0].name}'s {second[1]} s3://{bucket}/{second[2]}")
            enclosing.append((prefix, setting, stream))
    return [StreamError(files, f"{files[0]} and {files[1]} would write where the other reads or writes, so "
                               f"neither runs: [layout] " + "; ".join(found) + ". Give one of them prefixes of its "
                               "own (none inside the other's), or a bucket of its own")
            for files, found in sorted(overlaps.items())]
