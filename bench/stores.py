"""The embedded S3 store as the benchmarks use it: a fresh server and bucket, one configuration for
the job in this process and for a command's file, the landing lines, and history committed directly."""
from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from eventdedup.commit.log import write_checkpoint_if_due, write_commit
from eventdedup.commit.records import CommitRecord
from eventdedup.commit.state import CommittedState
from eventdedup.config import Config, config_from_mapping
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store, make_client
from eventdedup_dev.local_s3 import LocalS3Process


@dataclass(frozen=True)
class BenchSettings:
    """A bench's configuration but for the store's endpoint, as a configuration file's sections:
    the job run here and a command run in a new process read the same settings."""

    bucket: str
    sections: Mapping[str, Mapping[str, object]] = field(default_factory=dict)

    def mapping(self, endpoint: str) -> dict[str, dict[str, object]]:
        return {**{name: dict(values) for name, values in self.sections.items()},
                "s3": {**self.sections.get("s3", {}), "endpoint_url": endpoint, "bucket": self.bucket}}

    def with_values(self, section: str, **values: object) -> BenchSettings:
        """The same settings with `values` set in one section (e.g. another local-copies directory)."""
        return replace(self, sections={**self.sections, section: {**self.sections.get(section, {}), **values}})

    def config(self, endpoint: str) -> Config:
        return config_from_mapping(self.mapping(endpoint))

    def write_file(self, path: Path, endpoint: str) -> Path:
        """The configuration file a command reads (json spells strings, numbers and lists as TOML does)."""
        lines = []
        for name, values in self.mapping(endpoint).items():
            lines += [f"[{name}]", *(f"{key} = {json.dumps(value)}" for key, value in values.items())]
        path.write_text("\n".join(lines) + "\n")
        return path


@contextmanager
def fresh_store(settings: BenchSettings) -> Iterator[tuple[LocalS3Process, Config, S3Store]]:
    """A new embedded S3 server holding the settings' empty bucket."""
    with LocalS3Process() as server:
        server.client().create_bucket(Bucket=settings.bucket)
        config = settings.config(server.endpoint_url)
        yield server, config, S3Store(make_client(config.s3), settings.bucket)


def command_environment() -> dict[str, str]:
    """This process's environment without EVENTDEDUP_* variables, which would override a command's file."""
    return {name: value for name, value in os.environ.items() if not name.startswith("EVENTDEDUP_")}


def upload_lines(store: S3Store, prefix: str, lines: list[bytes], objects: int = 1) -> int:
    """The lines as `objects` landing objects of about equal length, in order; returns their bytes."""
    per, written = -(-len(lines) // objects), 0
    for i in range(objects):
        written += store.put_bytes(f"{prefix}part-{i:03d}.jsonl", b"\n".join(lines[i * per:(i + 1) * per]) + b"\n").size
    return written


def commit_directly(store: S3Store, config: Config, state: CommittedState, record: CommitRecord) -> CommittedState:
    """Write a history commit straight into the log, as promotion would, checkpointing when due."""
    layout = Layout(config.layout)
    write_commit(store, layout, record)
    state = state.apply(record, layout.commit(record.version))
    return write_checkpoint_if_due(store, layout, state, config.dedup.checkpoint_interval)
