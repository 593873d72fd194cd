"""The embedded S3 server: a real HTTP endpoint on loopback, with snapshots across restarts."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from botocore.exceptions import ClientError

from eventdedup_dev.local_s3 import LocalS3Process, LocalS3Server, _wanted_part, read_part, serve_ranges_in_place


def test_data_dir_snapshot_survives_a_restart(tmp_path) -> None:
    data_dir = tmp_path / "s3data"
    with LocalS3Process(data_dir=data_dir) as server:
        assert server.endpoint_url.startswith("http://127.0.0.1:")
        server.client().create_bucket(Bucket="persisted")
        server.client().put_object(Bucket="persisted", Key="a/b/c.json", Body=b'{"x": "\xc3\xa9"}')
        server.client().put_object(Bucket="persisted", Key="folder/", Body=b"")
    with LocalS3Process(data_dir=data_dir) as server:
        client = server.client()
        listed = client.list_objects_v2(Bucket="persisted")["Contents"]
        assert sorted(item["Key"] for item in listed) == ["a/b/c.json", "folder/"]
        assert client.get_object(Bucket="persisted", Key="a/b/c.json")["Body"].read() == b'{"x": "\xc3\xa9"}'


RANGE_CASES = ["bytes=0-0", "bytes=5-9", "bytes=5-", "bytes=-3", "bytes=-5000", "bytes=990-5000", "bytes=0-999",
               "bytes=999-", "bytes=9-5", "bytes=0-1,3-4", "bytes=abc", "bytes=-0", "bytes=1000-", "bytes=2000-3000"]


def expected_range_response(header: str, body: bytes) -> tuple[int, bytes, str | None]:
    """S3's answer to a single Range header (RFC 9110 byte ranges; S3 serves one range only):
    status, body, Content-Range; 416 when nothing of the object is asked."""
    spec = header.removeprefix("bytes=")
    size = len(body)
    if "," in spec or spec.count("-") != 1:
        return 200, body, None
    first, last = spec.split("-")
    if not (first.isdigit() or first == "") or not (last.isdigit() or last == "") or not (first or last):
        return 200, body, None
    if first == "":  # the last n bytes
        if int(last) == 0:
            return 416, b"", None
        start = max(size - int(last), 0)
        stop = size
    else:
        start = int(first)
        if start >= size:
            return 416, b"", None
        stop = size if last == "" else min(int(last) + 1, size)
        if stop <= start:  # a last byte before the first: not a valid range, so ignored
            return 200, body, None
    return 206, body[start:stop], f"bytes {start}-{stop - 1}/{size}"


def test_ranged_gets_answer_by_s3_rules(s3_server: LocalS3Process) -> None:
    client = s3_server.client()
    client.create_bucket(Bucket="ranges")
    body = bytes(range(256)) * 3 + b"x" * 232  # 1,000 distinct-enough bytes
    etag = client.put_object(Bucket="ranges", Key="object", Body=body)["ETag"]
    for header in RANGE_CASES:
        status, part, content_range = expected_range_response(header, body)
        try:
            response = client.get_object(Bucket="ranges", Key="object", Range=header, IfMatch=etag)
        except ClientError as exc:
            assert (header, exc.response["ResponseMetadata"]["HTTPStatusCode"]) == (header, status)
            continue
        assert (header, response["ResponseMetadata"]["HTTPStatusCode"]) == (header, status)
        assert response["Body"].read() == part, header
        assert response.get("ContentRange") == content_range, header
    with pytest.raises(ClientError) as refused:  # a ranged GET still honours its conditions
        client.get_object(Bucket="ranges", Key="object", Range="bytes=0-9", IfMatch='"0123"')
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    client.put_object(Bucket="ranges", Key="empty", Body=b"")
    with pytest.raises(ClientError) as empty:
        client.get_object(Bucket="ranges", Key="empty", Range="bytes=0-")
    assert empty.value.response["ResponseMetadata"]["HTTPStatusCode"] == 416


def test_this_moto_serves_ranges_without_reading_whole_objects() -> None:
    """The pinned moto has what the patch wraps: a moto upgrade that changes it fails here, not as
    a silent return of whole-object reads on every ranged GET (a benchmark regression)."""
    assert serve_ranges_in_place() is True
    assert serve_ranges_in_place() is True  # applying it twice wraps once


@pytest.mark.parametrize("size", [1, 7, 1000])
def test_the_part_read_is_the_part_moto_slices(size: int) -> None:
    for header in RANGE_CASES:
        status, _, content_range = expected_range_response(header, bytes(size))
        wanted = _wanted_part(header, size)
        if status == 206:
            assert content_range is not None
            start, last = content_range.removeprefix("bytes ").split("/")[0].split("-")
            assert (header, wanted) == (header, (int(start), int(last) + 1))
        else:  # moto answers these without a part (416, or the whole object)
            assert (header, wanted) == (header, None)


@pytest.mark.parametrize("spool_limit", [1 << 20, 100])  # in memory; rolled over to a file
def test_a_part_is_read_without_moving_the_buffers_shared_position(spool_limit: int) -> None:
    """moto seeks and reads a key's buffer for its ETag outside the key's lock: the range must be
    read at its own offsets, whatever the shared position is, and leave that position alone."""
    body = bytes(range(256)) * 4
    buffer = tempfile.SpooledTemporaryFile(spool_limit)
    buffer.write(body)  # a rolled-over buffer may still hold part of this in its writer
    buffer.seek(17)
    assert read_part(buffer, 300, 700) == body[300:700]
    assert read_part(buffer, 1000, 5000) == body[1000:]
    assert buffer.tell() == 17
    assert buffer.read(3) == body[17:20]


def test_ranged_gets_of_an_object_spooled_to_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto keeps objects above its buffer size in a file: ranges are read from it too (the
    server keeps objects up to IN_MEMORY_OBJECT_BYTES in memory; this one is told 1 MiB)."""
    monkeypatch.setenv("MOTO_S3_DEFAULT_KEY_BUFFER_SIZE", str(1 << 20))
    with LocalS3Server() as server:
        client = server.client()
        client.create_bucket(Bucket="spooled")
        body = np.random.default_rng(1).bytes(6 * 1024 * 1024 + 7)
        client.put_object(Bucket="spooled", Key="big", Body=body)
        assert _stored_key("spooled", "big")._value_buffer._rolled  # the case under test: in a file
        _assert_ranges_served(client, body)


def test_a_server_for_one_run_keeps_objects_in_memory_and_a_persistent_one_spools_them(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MOTO_S3_DEFAULT_KEY_BUFFER_SIZE", raising=False)
    for data_dir, spooled in ((None, False), (tmp_path / "s3data", True)):
        with LocalS3Server(data_dir=data_dir) as server:
            client = server.client()
            bucket = "persistent" if data_dir else "one-run"
            client.create_bucket(Bucket=bucket)
            client.put_object(Bucket=bucket, Key="data", Body=bytes(6 * 1024 * 1024 + 7))
            assert _stored_key(bucket, "data")._value_buffer._rolled is spooled
        assert "MOTO_S3_DEFAULT_KEY_BUFFER_SIZE" not in os.environ  # ours is gone with the server


def _stored_key(bucket: str, key: str) -> Any:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    return s3_backends[DEFAULT_ACCOUNT_ID]["aws"].buckets[bucket].keys[key]


def _assert_ranges_served(client: Any, body: bytes) -> None:
    for header in ["bytes=0-0", f"bytes={len(body) - 10}-", "bytes=-4096", "bytes=5000000-5300000",
                   f"bytes=0-{len(body)}"]:
        status, part, content_range = expected_range_response(header, body)
        response = client.get_object(Bucket="spooled", Key="big", Range=header)
        assert (header, response["ResponseMetadata"]["HTTPStatusCode"], response.get("ContentRange")) == (
            header, status, content_range)
        assert response["Body"].read() == part, header
