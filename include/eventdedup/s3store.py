"""A thin, typed layer over one boto3 S3 client and one bucket.

All S3 traffic of eventdedup goes through `S3Store`, which is what the fault-injection tests
wrap. Clients use boto3's standard retry mode and are created where they are used (inside
Spark tasks too): they survive neither pickling nor forking.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import boto3
import botocore.session
from botocore.config import Config as BotoConfig
from botocore.exceptions import ClientError

from eventdedup.codec import TRANSIENT
from eventdedup.config import S3Settings

log = logging.getLogger(__name__)

# A 409 on a conditional write is transient (AWS: "you can retry the request").
CONFLICT_ATTEMPTS = 6
CONFLICT_BACKOFF_SECONDS = 0.05


class S3Client(Protocol):
    """The boto3 client methods eventdedup uses (a fault-injecting wrapper provides the same)."""

    def get_object(self, **kwargs: Any) -> Any: ...
    def put_object(self, **kwargs: Any) -> Any: ...
    def head_object(self, **kwargs: Any) -> Any: ...
    def copy_object(self, **kwargs: Any) -> Any: ...
    def delete_object(self, **kwargs: Any) -> Any: ...
    def delete_objects(self, **kwargs: Any) -> Any: ...
    def list_objects_v2(self, **kwargs: Any) -> Any: ...


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str
    # Set only on objects read from a listing or a HEAD: when the upload started, not when the object
    # became visible, so it is never part of an object's identity.
    last_modified: datetime | None = field(default=None, compare=False, metadata=TRANSIENT)


def boto_config(settings: S3Settings) -> BotoConfig:
    """Every S3 client eventdedup makes (its own, or the Airflow hook's) uses these: standard
    retries, a pool as large as the promotion's copy threads, path-style for a custom endpoint."""
    return BotoConfig(
        retries={"mode": "standard", "max_attempts": 5},
        max_pool_connections=settings.max_pool_connections,
        s3={"addressing_style": "path"} if settings.endpoint_url else {},
    )


def make_client(settings: S3Settings) -> S3Client:
    client: S3Client = _new_session().client(
        "s3", endpoint_url=settings.endpoint_url, region_name=settings.region, config=boto_config(settings)
    )
    return client


_shared_loaders: list[Any] = []  # botocore's data loader: the first session's, shared by the rest
_loader_lock = threading.Lock()


def _new_session() -> boto3.session.Session:
    """A new session, which looks credentials up afresh as ever, reading botocore's service
    models through the process's one data loader. Each session's own loader parsed botocore's S3
    model and endpoint rules again: ~50 ms of every client on a quiet 2-core host, about three
    times that on a busy one, paid by every command and every Spark worker. Forked Spark workers
    inherit the loader warm (warm_service_models, eventdedup.spark.daemon)."""
    with _loader_lock:
        core = botocore.session.get_session()
        if _shared_loaders:
            core.register_component("data_loader", _shared_loaders[0])
        session = boto3.session.Session(botocore_session=core)
        loader = core.get_component("data_loader")
        if not _shared_loaders:
            _shared_loaders.append(loader)
        # boto3 appends its data directory to the loader's search path for each session: keep one.
        loader.search_paths[:] = list(dict.fromkeys(loader.search_paths))
    return session


def warm_service_models() -> None:
    """Load the S3 client's models into the shared loader: a client with placeholder credentials
    and no endpoint, never used, so nothing looks credentials up or connects."""
    _new_session().client("s3", region_name="us-east-1", aws_access_key_id="unused", aws_secret_access_key="unused")


_process_clients: dict[tuple[int, S3Settings], S3Client] = {}  # (pid, settings without the bucket)
_process_lock = threading.Lock()


def process_client(settings: S3Settings) -> S3Client:
    """One client per process and settings: Spark reuses Python workers across tasks, and creating
    a client costs tens of milliseconds, which per task would dominate small partitions (and per
    job, the fixed cost of a small batch). Keyed by pid so a forked child never inherits its
    parent's connections. Credentials come from boto3's chain once, when the client is made;
    refreshable ones (instance roles, web identity) refresh themselves."""
    key = (os.getpid(), dataclasses.replace(settings, bucket=""))  # a client serves every bucket
    with _process_lock:
        if key not in _process_clients:
            _process_clients[key] = make_client(settings)
        return _process_clients[key]


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def is_not_found(exc: ClientError) -> bool:
    return error_code(exc) in ("NoSuchKey", "404", "NotFound")


def is_precondition_failed(exc: ClientError) -> bool:
    """The condition was evaluated and is false (HTTP 412): another object is there, or changed."""
    return error_code(exc) in ("PreconditionFailed", "412")


def is_conditional_conflict(exc: ClientError) -> bool:
    """HTTP 409: AWS could not evaluate the condition because a conflicting write was in flight.
    Nothing was written and nothing is known about the key: the request must be retried."""
    return error_code(exc) in ("ConditionalRequestConflict", "409")


def is_changed_or_missing(exc: ClientError) -> bool:
    """A conditional read (IfMatch) found the object replaced or gone."""
    return is_precondition_failed(exc) or is_not_found(exc)


def quoted_etag(etag: str) -> str:
    """An ETag as S3's headers spell it, in quotes. Some stores (SeaweedFS) leave the quotes out
    of a CopyObject result's XML: compared as given, a copy would never match its source."""
    return etag if etag.startswith('"') or etag.startswith('W/"') else f'"{etag}"'


class BatchReads:
    """What the steps of one batch have read of the store's metadata, handed from step to step
    (`S3Store.for_one_batch`): the bytes of each object that never changes once written (commit
    records, checkpoints, ledger parts: `S3Store.get_immutable_or_none`), and values derived from
    such reads that a later step may take instead of reading again (the folded state, a table
    snapshot: `held`/`hold`, each named by its owner). Thread-safe; lives as long as the batch."""

    def __init__(self) -> None:
        self._objects: dict[str, bytes] = {}
        self._values: dict[str, Any] = {}
        self._lock = threading.Lock()

    def object(self, key: str) -> bytes | None:
        with self._lock:
            return self._objects.get(key)

    def remember(self, key: str, data: bytes) -> None:
        with self._lock:
            self._objects[key] = data

    def held(self, name: str) -> Any:
        with self._lock:
            return self._values.get(name)

    def hold(self, name: str, value: Any) -> None:
        with self._lock:
            self._values[name] = value


class S3Store:
    """Bucket-scoped operations with the semantics the commit protocol needs."""

    def __init__(self, client: S3Client, bucket: str, reads: BatchReads | None = None) -> None:
        self.client = client
        self.bucket = bucket
        self.reads = reads  # set for one batch's steps: metadata read once (BatchReads)

    def for_one_batch(self) -> S3Store:
        """The same bucket and client, remembering what one batch reads of its metadata: the
        steps of a batch (staging, the job's driver, the promotion, the table's projection) each
        need the folded state and the records, and read them once between them."""
        return S3Store(self.client, self.bucket, BatchReads())

    def get_immutable_or_none(self, key: str) -> bytes | None:
        """An object that never changes once written (None: absent): read once per batch."""
        known = None if self.reads is None else self.reads.object(key)
        if known is not None:
            return known
        data = self.get_bytes_or_none(key)
        if data is not None and self.reads is not None:
            self.reads.remember(key, data)
        return data

    def wrote_immutable(self, key: str, data: bytes) -> None:
        """This batch wrote (or found) an immutable object with these bytes: it need not read it."""
        if self.reads is not None:
            self.reads.remember(key, data)

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def get_bytes(self, key: str, *, if_match: str | None = None, byte_range: tuple[int, int] | None = None) -> bytes:
        """The object's bytes, or bytes [start, stop) of it (stop past the end reads to the end)."""
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
        if if_match:
            kwargs["IfMatch"] = if_match
        if byte_range is not None:
            start, stop = byte_range
            if stop <= start:
                return b""
            kwargs["Range"] = f"bytes={start}-{stop - 1}"
        body: bytes = self.client.get_object(**kwargs)["Body"].read()
        return body

    def get_tail(self, key: str, length: int, *, if_match: str | None = None) -> tuple[bytes, int]:
        """The object's last `length` bytes (all of it if shorter) and its whole size; `if_match`:
        only of that version (else a 412)."""
        kwargs: dict[str, Any] = {"IfMatch": if_match} if if_match else {}
        response = self.client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes=-{length}", **kwargs)
        data: bytes = response["Body"].read()
        content_range = response.get("ContentRange")
        size = int(content_range.rsplit("/", 1)[1]) if content_range else len(data)
        return data, size

    def get_versioned(self, key: str, *, unless_etag: str | None = None) -> tuple[bytes, str] | None:
        """The object's bytes and ETag; None when it is still the version `unless_etag` (a
        conditional GET answered 304 Not Modified: no bytes cross the network)."""
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
        if unless_etag is not None:
            kwargs["IfNoneMatch"] = unless_etag
        try:
            response = self.client.get_object(**kwargs)
        except ClientError as exc:
            if unless_etag is not None and exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 304:
                return None
            raise
        return response["Body"].read(), response["ETag"]

    def get_bytes_or_none(self, key: str) -> bytes | None:
        try:
            return self.get_bytes(key)
        except ClientError as exc:
            if is_not_found(exc):
                return None
            raise

    def put_bytes(self, key: str, body: bytes, *, content_type: str = "application/octet-stream") -> ObjectInfo:
        response = self.client.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType=content_type)
        return ObjectInfo(key, len(body), response["ETag"])

    def put_if_absent(self, key: str, body: bytes, *, content_type: str = "application/json") -> ObjectInfo | None:
        """Create the object only if no object has that key; None if one already existed."""
        return self._put_conditionally(key, body, content_type, IfNoneMatch="*")

    def put_if_match(self, key: str, body: bytes, etag: str, *,
                     content_type: str = "application/json") -> ObjectInfo | None:
        """Replace the object only while it is still the version `etag`; None if it changed or went."""
        return self._put_conditionally(key, body, content_type, IfMatch=etag)

    def _put_conditionally(self, key: str, body: bytes, content_type: str, **condition: str) -> ObjectInfo | None:
        """A 409 (a racing conditional write) is retried with backoff: it says nothing about the
        key, so taking it for "the condition is false" would skip a write that never happened.
        The retry's own answer (written, or 412) is the truth."""
        for attempt in range(CONFLICT_ATTEMPTS):
            try:
                response = self.client.put_object(
                    Bucket=self.bucket, Key=key, Body=body, ContentType=content_type, **condition
                )
            except ClientError as exc:
                if is_precondition_failed(exc) or ("IfMatch" in condition and is_not_found(exc)):
                    return None
                if is_conditional_conflict(exc) and attempt + 1 < CONFLICT_ATTEMPTS:
                    log.info("conditional PUT of %s conflicted with another write (409); retrying", key)
                    time.sleep(min(CONFLICT_BACKOFF_SECONDS * 2**attempt, 2.0))
                    continue
                raise
            return ObjectInfo(key, len(body), response["ETag"])
        raise AssertionError("unreachable: the last attempt returns or raises")

    def head(self, key: str) -> ObjectInfo | None:
        try:
            response = self.client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if is_not_found(exc):
                return None
            raise
        return ObjectInfo(key, int(response["ContentLength"]), response["ETag"], response.get("LastModified"))

    @property
    def endpoint(self) -> str:
        """Where the client sends requests: two stores may hold buckets of one name."""
        return str(getattr(getattr(self.client, "meta", None), "endpoint_url", ""))

    def copy(self, source: ObjectInfo, dest_key: str) -> ObjectInfo:
        """Server-side copy that fails if the source changed since it was recorded."""
        response = self.client.copy_object(
            Bucket=self.bucket,
            Key=dest_key,
            CopySource={"Bucket": self.bucket, "Key": source.key},
            CopySourceIfMatch=source.etag,
        )
        return ObjectInfo(dest_key, source.size, quoted_etag(response["CopyObjectResult"]["ETag"]))

    def list(self, prefix: str, *, start_after: str | None = None) -> Iterator[ObjectInfo]:
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
        if start_after:
            kwargs["StartAfter"] = start_after
        while True:
            page = self.client.list_objects_v2(**kwargs)
            for item in page.get("Contents", []):
                yield ObjectInfo(item["Key"], int(item["Size"]), item["ETag"], item.get("LastModified"))
            if not page.get("IsTruncated"):
                return
            kwargs["ContinuationToken"] = page["NextContinuationToken"]

    def delete_keys(self, keys: Sequence[str]) -> None:
        for start in range(0, len(keys), 1000):
            chunk = keys[start:start + 1000]
            response = self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True}
            )
            if response.get("Errors"):
                raise RuntimeError(f"could not delete {len(response['Errors'])} objects: {response['Errors'][:3]}")

    def delete_prefix(self, prefix: str) -> int:
        keys = [info.key for info in self.list(prefix)]
        self.delete_keys(keys)
        return len(keys)
