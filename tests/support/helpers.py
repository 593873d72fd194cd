"""Readers for what a test checks: committed rows, read back through the commit log only."""
from __future__ import annotations

import atexit
import gzip
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from datetime import datetime, timezone
from typing import Any

import xxhash

from eventdedup.cache.segment import decode_segment
from eventdedup.commit.log import committed_version, load_committed_state, read_commit
from eventdedup.commit.view import committed_objects
from eventdedup.config import Config, config_from_mapping
from eventdedup.keys import is_guard_head_key
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store
from eventdedup.tables import parquet_to_table

NOW = datetime(2026, 11, 22, 6, 0, tzinfo=timezone.utc)


def put_lines(store: S3Store, key: str, lines: list[bytes], gz: bool = False) -> None:
    body = b"".join(line + b"\n" for line in lines)
    store.put_bytes(key, gzip.compress(body, mtime=0) if gz else body)


def committed_rows(store: S3Store, config: Config, kind: str) -> list[dict[str, Any]]:
    """Every row of the given kind (data, audit, quarantine) of every batch in the committed view
    (the log, without retracted batches: what a reader through the log sees)."""
    rows: list[dict[str, Any]] = []
    for obj in committed_objects(store, Layout(config.layout), kind):
        rows += parquet_to_table(store.get_bytes(obj.key, if_match=obj.etag)).to_pylist()
    return rows


def commit_counts(store: S3Store, config: Config) -> dict[str, dict[str, int]]:
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    out = {}
    for version in range(1, state.version + 1):  # every commit, also of batches that left the state
        record = read_commit(store, layout, version)
        assert record is not None
        out[record.batch_id] = dict(record.counts)
    return out


def as_format_1(record: bytes, without: tuple[str, ...] = (), without_counts: tuple[str, ...] = ()) -> bytes:
    """A commit record as format 1 wrote it (its change's fields loose in the record), less the
    fields an earlier release did not write yet."""
    doc = json.loads(record)
    change = doc.pop("change")
    doc.update({key: value for key, value in change.items() if key != "kind" and key not in without}, format=1)
    doc["counts"] = {name: value for name, value in doc["counts"].items() if name not in without_counts}
    return json.dumps(doc).encode()


def bucket_listing(store: S3Store) -> dict[str, str]:
    return {item.key: item.etag for item in store.list("")}


# Written out from the documented rule, independently of eventdedup.keys: UUIDv5 in the
# project's namespace over "<original key>\n<fingerprint as 16 hex digits>", the fingerprint
# being the cache's hash of the event as compact JSON with sorted keys: XXH3-64 (seed 0) for a cache
# a test creates, 8-byte BLAKE2b for one made before the hash was part of the cache identity.
_RENAME_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/eventdedup/synthetic-duplicate")
NEW_STORE_HASH, OLD_STORE_HASH = "xxh3-64", "blake2b-64"


def expected_fingerprint(event: dict[str, Any] | bytes, fingerprint_hash: str = NEW_STORE_HASH) -> int:
    doc = json.loads(event) if isinstance(event, bytes) else event
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    if fingerprint_hash == OLD_STORE_HASH:
        return int.from_bytes(hashlib.blake2b(canonical, digest_size=8).digest(), "big")
    assert fingerprint_hash == NEW_STORE_HASH, fingerprint_hash
    return xxhash.xxh3_64(canonical, seed=0).intdigest()


def expected_renamed_id(original_key: str, event: dict[str, Any] | bytes, fingerprint_hash: str = NEW_STORE_HASH) -> str:
    return str(uuid.uuid5(_RENAME_NAMESPACE, f"{original_key}\n{expected_fingerprint(event, fingerprint_hash):016x}"))


def recorded_fingerprint_hash(store: S3Store, config: Config) -> str:
    """The fingerprint hash the store's cache identity records, read as the documented format says
    (an identity that names none: BLAKE2b-64, the hash of caches made before it was; no identity
    yet, so nothing committed: a new store's)."""
    data = store.get_bytes_or_none(Layout(config.layout).cache_identity())
    return NEW_STORE_HASH if data is None else str(json.loads(data).get("fingerprint_hash", OLD_STORE_HASH))


def committed_cache_entries(store: S3Store, config: Config) -> list[tuple[str, bytes, int]]:
    """(owner batch, 16 key bytes, fingerprint) of every entry in the committed cache heads (the
    hour segments; the id guards only locate them)."""
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    entries = []
    for name, segment_key in state.cache_heads.items():
        if is_guard_head_key(name):
            continue
        for run in decode_segment(store.get_bytes(segment_key), segment_key):
            assert committed_version(store, layout, state, run.owner) is not None, \
                f"{segment_key} holds entries of uncommitted batch {run.owner}"
            keys = run.digests.tobytes()
            entries += [(run.owner, keys[i * 16:(i + 1) * 16], int(fp)) for i, fp in enumerate(run.fingerprints)]
    return sorted(entries)


# The executor-local copies of cache objects (eventdedup.cache.local_copies) of this test process.
LOCAL_COPIES = tempfile.mkdtemp(prefix="eventdedup-test-copies-")
atexit.register(shutil.rmtree, LOCAL_COPIES, True)


# `EVENTDEDUP_TEST_COMPILED=0 make test` (make test-reference): every batch a test configures runs
# the Python reference paths, the compiled parse and dedup cores off; the same assertions must hold.
COMPILED = os.environ.get("EVENTDEDUP_TEST_COMPILED", "1") != "0"


def make_config(endpoint_url: str, bucket: str, **sections: dict) -> Config:
    raw: dict = {
        "s3": {"endpoint_url": endpoint_url, "bucket": bucket},
        "events": {"compiled_parser": COMPILED},
        "dedup": {"buckets": 4, "checkpoint_interval": 3, "compiled_stage": COMPILED},
        "spark": {"master": "local[2]", "partitions": 4, "driver_memory": "2g", "local_cache_dir": LOCAL_COPIES},
    }
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    return config_from_mapping(raw, source="test")
