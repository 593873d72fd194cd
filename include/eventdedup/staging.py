"""Freeze a batch's input list as a manifest on S3 before anything is processed.

A batch is its id plus this frozen list: a rerun reuses it and never re-lists, so late-arriving
objects can never change what a batch id means.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import orjson

from .config import Config
from .errors import BatchManifestError, InvalidNameError
from .layout import Layout
from .naming import normalize_prefix, validate_batch_id
from .s3store import ObjectInfo, S3Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InputSelector:
    """Either every object under a prefix, or landing objects with since <= LastModified < until."""

    input_prefix: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        by_prefix = self.input_prefix is not None
        by_time = self.since is not None or self.until is not None
        if by_prefix == by_time:
            raise BatchManifestError("give either --input-prefix or both --since and --until")
        if by_time:
            if self.since is None or self.until is None:
                raise BatchManifestError("--since and --until go together")
            for moment in (self.since, self.until):
                if moment.tzinfo is None:
                    raise BatchManifestError(f"{moment.isoformat()} needs a UTC offset")
            if not self.since < self.until:
                raise BatchManifestError(f"--since {self.since.isoformat()} must be before --until {self.until.isoformat()}")

    def to_json(self) -> dict[str, Any]:
        if self.input_prefix is not None:
            return {"input_prefix": self.input_prefix}
        assert self.since is not None and self.until is not None
        return {"since": _iso(self.since), "until": _iso(self.until)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> InputSelector:
        if "input_prefix" in data:
            return cls(input_prefix=data["input_prefix"])
        return cls(since=datetime.fromisoformat(data["since"]), until=datetime.fromisoformat(data["until"]))


@dataclass(frozen=True)
class BatchManifest:
    batch_id: str
    selector: InputSelector
    # The batch's reference time: the dedup window and the future-timestamp bound are
    # measured from it, so a rerun next week judges events exactly as the first run did.
    as_of: datetime
    inputs: tuple[ObjectInfo, ...]

    def to_bytes(self) -> bytes:
        return orjson.dumps(
            {
                "batch_id": self.batch_id,
                "selector": self.selector.to_json(),
                "as_of": _iso(self.as_of),
                "inputs": [item.to_json() for item in self.inputs],
            },
            option=orjson.OPT_INDENT_2,
        )

    @classmethod
    def from_bytes(cls, data: bytes, name: str) -> BatchManifest:
        try:
            doc = orjson.loads(data)
            return cls(
                batch_id=doc["batch_id"],
                selector=InputSelector.from_json(doc["selector"]),
                as_of=datetime.fromisoformat(doc["as_of"]),
                inputs=tuple(ObjectInfo.from_json(item) for item in doc["inputs"]),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise BatchManifestError(f"batch manifest {name} is unreadable: {exc}") from None


def stage_batch(
    store: S3Store, config: Config, batch_id: str, selector: InputSelector, now: datetime
) -> BatchManifest:
    """Return the batch's manifest, writing it first if this batch id is new."""
    validate_batch_id(batch_id)
    selector = checked_selector(config, selector)
    layout = Layout(config.layout)
    key = layout.batch_manifest(batch_id)
    existing = load_manifest_or_none(store, layout, batch_id)
    if existing is not None:
        return _reused(existing, selector, store.uri(key))
    inputs = tuple(_list_inputs(store, config, selector))
    as_of = selector.until if selector.until is not None else now.astimezone(timezone.utc)
    manifest = BatchManifest(batch_id, selector, as_of.astimezone(timezone.utc), inputs)
    if store.put_if_absent(key, manifest.to_bytes()) is None:
        # Another stager won the race; its manifest is the batch's definition.
        winner = load_manifest_or_none(store, layout, batch_id)
        assert winner is not None
        return _reused(winner, selector, store.uri(key))
    log.info("staged batch %s: %d input objects (%s)", batch_id, len(inputs), selector.to_json())
    return manifest


def load_manifest(store: S3Store, layout: Layout, batch_id: str) -> BatchManifest:
    manifest = load_manifest_or_none(store, layout, batch_id)
    if manifest is None:
        raise BatchManifestError(
            f"batch {batch_id}: no manifest at {store.uri(layout.batch_manifest(batch_id))}; stage the batch first"
        )
    return manifest


def load_manifest_or_none(store: S3Store, layout: Layout, batch_id: str) -> BatchManifest | None:
    key = layout.batch_manifest(batch_id)
    data = store.get_bytes_or_none(key)
    return None if data is None else BatchManifest.from_bytes(data, store.uri(key))


def _reused(existing: BatchManifest, requested: InputSelector, uri: str) -> BatchManifest:
    if existing.selector != requested:
        raise BatchManifestError(
            f"batch {existing.batch_id} already exists with inputs {existing.selector.to_json()} ({uri}); "
            f"refusing a different input list {requested.to_json()}: use a new batch id"
        )
    log.info("batch %s: reusing its frozen manifest (%d inputs)", existing.batch_id, len(existing.inputs))
    return existing


def checked_selector(config: Config, selector: InputSelector) -> InputSelector:
    """The selector with its prefix normalised; refuses unsafe names and our own prefixes."""
    if selector.input_prefix is None:
        return selector
    prefix = normalize_prefix(selector.input_prefix, what="input prefix")
    layout = config.layout
    own = {
        "output_prefix": layout.output_prefix, "cache_prefix": layout.cache_prefix,
        "staging_prefix": layout.staging_prefix, "audit_prefix": layout.audit_prefix,
        "quarantine_prefix": layout.quarantine_prefix, "commit_log_prefix": layout.commit_log_prefix,
        "state_prefix": layout.state_prefix, "manifest_prefix": layout.manifest_prefix,
    }
    for name, own_prefix in own.items():
        if prefix.startswith(own_prefix) or own_prefix.startswith(prefix):
            raise InvalidNameError(f"input prefix {prefix!r} overlaps eventdedup's own {name} {own_prefix!r}")
    return InputSelector(input_prefix=prefix)


def _list_inputs(store: S3Store, config: Config, selector: InputSelector) -> list[ObjectInfo]:
    prefix = selector.input_prefix if selector.input_prefix is not None else config.layout.landing_prefix
    found = []
    for item in store.list(prefix):
        if item["Key"].endswith("/"):
            continue  # a console-created "folder" marker, not data
        if selector.since is not None and selector.until is not None:
            modified = item["LastModified"]
            if not selector.since <= modified < selector.until:
                continue
        found.append(ObjectInfo(item["Key"], int(item["Size"]), item["ETag"]))
    return sorted(found, key=lambda info: info.key)


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat()
