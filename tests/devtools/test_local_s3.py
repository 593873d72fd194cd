"""The embedded S3 store, SeaweedFS: what the project relies on an S3 store doing, held to S3's
rules against the store itself, so an upgrade that changes any of it fails here, loudly:
restarts keep data; ranged GETs; conditional PUTs (If-None-Match: *, If-Match), GETs (304) and
copies; ETags of copies (SeaweedFS leaves the quotes out of CopyObject's XML: S3Store.copy
quotes them) and of multipart uploads; LastModified; LIST order, pagination and StartAfter;
batch deletes; error codes of missing objects; requests signed with an unknown key refused.
The conditional PUT under real races: tests/faults/test_real_races.py."""
from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from eventdedup.s3store import ObjectInfo, S3Store, make_client
from eventdedup_dev.local_s3 import PORT_BASES, LocalS3Process

from ..support.helpers import make_config


def test_a_data_dir_keeps_the_store_across_a_restart_and_every_listener_is_on_loopback(tmp_path) -> None:
    data_dir = tmp_path / "s3data"
    with LocalS3Process(data_dir=data_dir) as server:
        assert server.endpoint_url.startswith("http://127.0.0.1:")
        assert server.port in PORT_BASES  # below the ephemeral range
        listening = _listening_ports(server.pid) + _listening_ports(server.keeper_pid)  # weed's, the guard's
        assert listening and all(address == "127.0.0.1" for address, _ in listening), listening
        assert ("127.0.0.1", server.port) in _listening_ports(server.keeper_pid)  # S3 is served through the guard
        server.client().create_bucket(Bucket="persisted")
        server.client().put_object(Bucket="persisted", Key="a/b/c.json", Body=b'{"x": "\xc3\xa9"}')
        server.client().put_object(Bucket="persisted", Key="folder/x", Body=b"")
    with LocalS3Process(data_dir=data_dir) as server:
        client = server.client()
        listed = client.list_objects_v2(Bucket="persisted")["Contents"]
        assert sorted(item["Key"] for item in listed) == ["a/b/c.json", "folder/x"]
        assert client.get_object(Bucket="persisted", Key="a/b/c.json")["Body"].read() == b'{"x": "\xc3\xa9"}'


RANGE_CASES = ["bytes=0-0", "bytes=5-9", "bytes=5-", "bytes=-3", "bytes=-5000", "bytes=990-5000", "bytes=0-999",
               "bytes=999-", "bytes=0-1,3-4", "bytes=abc", "bytes=-0", "bytes=1000-", "bytes=2000-3000"]


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
    # Where SeaweedFS differs from S3, in a range the project never asks: a last byte before the
    # first is a 416 (S3 ignores the header and answers 200 with the whole object).
    with pytest.raises(ClientError) as backwards:
        client.get_object(Bucket="ranges", Key="object", Range="bytes=9-5")
    assert backwards.value.response["ResponseMetadata"]["HTTPStatusCode"] == 416
    client.put_object(Bucket="ranges", Key="empty", Body=b"")
    with pytest.raises(ClientError) as empty:
        client.get_object(Bucket="ranges", Key="empty", Range="bytes=0-")
    assert empty.value.response["ResponseMetadata"]["HTTPStatusCode"] == 416



def _listening_ports(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket the process listens on (from /proc: no ss needed)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                address, port = fields[1].split(":")
                ipv4 = ".".join(str(int(address[i:i + 2], 16)) for i in (6, 4, 2, 0)) if len(address) == 8 else address
                found.append((ipv4, int(port, 16)))
    return found


def _code(exc: pytest.ExceptionInfo[ClientError]) -> tuple[int, str]:
    return exc.value.response["ResponseMetadata"]["HTTPStatusCode"], exc.value.response["Error"]["Code"]


def test_conditional_writes_reads_and_copies_answer_as_s3_does(s3_server: LocalS3Process, bucket: str) -> None:
    client, store = s3_server.client(), S3Store(s3_server.client(), bucket)
    first = store.put_if_absent("log/1.json", b"one")
    assert first is not None and store.put_if_absent("log/1.json", b"two") is None  # 412 underneath
    assert store.get_bytes("log/1.json") == b"one"
    with pytest.raises(ClientError) as wrong_etag:
        client.put_object(Bucket=bucket, Key="log/1.json", Body=b"three", IfMatch='"0123456789abcdef0123456789abcdef"')
    assert _code(wrong_etag)[0] == 412
    with pytest.raises(ClientError) as unchanged:
        client.get_object(Bucket=bucket, Key="log/1.json", IfNoneMatch=first.etag)
    assert _code(unchanged)[0] == 304
    copied = store.copy(first, "log/copy.json")  # CopySourceIfMatch: the source as recorded
    assert copied.etag == first.etag == store.head("log/copy.json").etag  # type: ignore[union-attr]
    with pytest.raises(ClientError) as changed:
        store.copy(ObjectInfo("log/1.json", 3, '"0123456789abcdef0123456789abcdef"'), "log/copy2.json")
    assert _code(changed)[0] == 412
    assert store.head("log/copy2.json") is None


def test_etags_of_uploads_and_multipart_uploads_are_s3s(s3_server: LocalS3Process, bucket: str) -> None:
    client = s3_server.client()
    assert client.put_object(Bucket=bucket, Key="small", Body=b"abc")["ETag"] == f'"{hashlib.md5(b"abc").hexdigest()}"'
    parts = [os.urandom(5 << 20), os.urandom(1 << 20)]
    upload = client.create_multipart_upload(Bucket=bucket, Key="big")["UploadId"]
    etags = [client.upload_part(Bucket=bucket, Key="big", UploadId=upload, PartNumber=n, Body=part)["ETag"]
             for n, part in enumerate(parts, start=1)]
    client.complete_multipart_upload(Bucket=bucket, Key="big", UploadId=upload, MultipartUpload={
        "Parts": [{"ETag": etag, "PartNumber": n} for n, etag in enumerate(etags, start=1)]})
    joined = hashlib.md5(b"".join(hashlib.md5(part).digest() for part in parts)).hexdigest()
    assert client.head_object(Bucket=bucket, Key="big")["ETag"] == f'"{joined}-2"'
    assert client.get_object(Bucket=bucket, Key="big")["Body"].read() == b"".join(parts)


def test_listing_is_in_key_order_paginates_and_starts_after(s3_server: LocalS3Process, bucket: str) -> None:
    client, store = s3_server.client(), S3Store(s3_server.client(), bucket)
    keys = [f"p/{n:04d}" for n in range(1, 2_051, 2)] + ["p/a b", "p/é", "p/x=1/y", "q/0"]  # 1,028 under p/
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda key: client.put_object(Bucket=bucket, Key=key, Body=key.encode()), keys))
    expected = sorted((key for key in keys if key.startswith("p/")), key=lambda key: key.encode())
    listed = list(store.list("p/"))  # pages of 1,000: continuation tokens
    assert [item.key for item in listed] == expected
    assert all(item.size == len(item.key.encode()) for item in listed)
    assert [item.key for item in store.list("p/", start_after="p/2000")] == [k for k in expected if k > "p/2000"]
    assert [item.key for item in store.list("p/", start_after="p/0002")][0] == "p/0003"  # a key never written
    page = client.list_objects_v2(Bucket=bucket, Prefix="p/", Delimiter="/", MaxKeys=5)
    assert [item["Key"] for item in page["Contents"]] == expected[:5] and page["IsTruncated"]


def test_last_modified_is_in_whole_seconds_never_goes_back_and_list_and_head_agree(
        s3_server: LocalS3Process, bucket: str) -> None:
    """The ledger dates an input by its LastModified hour: whole seconds are enough, an object
    written after another is never dated before it, and a listing and a HEAD say the same (no
    clock of this process is read: the store's dates are compared with each other)."""
    client, store = s3_server.client(), S3Store(s3_server.client(), bucket)
    client.put_object(Bucket=bucket, Key="dated/1", Body=b"1")
    client.put_object(Bucket=bucket, Key="dated/2", Body=b"2")
    first, second = list(store.list("dated/"))
    assert first.last_modified is not None and second.last_modified is not None
    assert first.last_modified.tzinfo is not None and first.last_modified.microsecond == 0
    assert first.last_modified <= second.last_modified
    assert client.head_object(Bucket=bucket, Key="dated/1")["LastModified"] == first.last_modified


def test_missing_objects_and_batch_deletes_answer_as_s3_does(s3_server: LocalS3Process, bucket: str) -> None:
    client, store = s3_server.client(), S3Store(s3_server.client(), bucket)
    with pytest.raises(ClientError) as missing:
        client.get_object(Bucket=bucket, Key="nothing")
    assert _code(missing) == (404, "NoSuchKey")
    assert store.head("nothing") is None and store.get_bytes_or_none("nothing") is None
    for n in range(3):
        store.put_bytes(f"d/{n}", b"x")
    store.delete_keys(["d/0", "d/2", "d/never"])
    assert [item.key for item in store.list("d/")] == ["d/1"]
    with pytest.raises(ClientError) as no_bucket:
        client.put_object(Bucket=f"{bucket}-none", Key="k", Body=b"x")  # no bucket made on the fly
    assert _code(no_bucket) == (404, "NoSuchBucket")


def test_a_request_signed_with_an_unknown_key_is_refused(s3_server: LocalS3Process, bucket: str) -> None:
    import boto3

    known = make_client(replace(make_config(s3_server.endpoint_url, bucket).s3))  # the environment's keys

    client = boto3.client("s3", endpoint_url=s3_server.endpoint_url, region_name="us-east-1",
                          aws_access_key_id="AKIAUNKNOWN", aws_secret_access_key="whatever")
    with pytest.raises(ClientError) as refused:
        client.list_objects_v2(Bucket=bucket)
    assert _code(refused) == (403, "InvalidAccessKeyId")
    assert known.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_a_moto_snapshot_of_an_earlier_release_is_imported_once(tmp_path) -> None:
    """`make airflow` and `make stack` kept the moto store's data as a snapshot: index.json (bucket
    -> keys and blob digests) and blobs/. The first SeaweedFS start puts those objects in."""
    data_dir = tmp_path / "s3"
    (data_dir / "blobs").mkdir(parents=True)
    body = b'{"event_id": "e1"}'
    digest = hashlib.sha256(body).hexdigest()
    (data_dir / "blobs" / digest).write_bytes(body)
    (data_dir / "index.json").write_text(json.dumps({"events": [{"key": "landing/a b/1.jsonl", "blob": digest}]}))
    with LocalS3Process(data_dir=data_dir) as server:
        assert server.client().get_object(Bucket="events", Key="landing/a b/1.jsonl")["Body"].read() == body
    assert not (data_dir / "index.json").exists() and (data_dir / "index.json.imported").exists()
    with LocalS3Process(data_dir=data_dir) as server:  # kept by SeaweedFS itself from now on
        assert [item["Key"] for item in server.client().list_objects_v2(Bucket="events")["Contents"]] == [
            "landing/a b/1.jsonl"]


def test_where_seaweedfs_lists_otherwise_than_s3_a_slash_sorts_first(s3_server: LocalS3Process, bucket: str) -> None:
    """SeaweedFS walks directories: a key's `/` sorts before every other character, and a
    StartAfter naming a "directory" without its slash skips what is under it. S3 lists in byte
    order ('-' and '.' before '/'). The project's listings hold under both: landing keys differ
    in digits where they differ (a time format), and the sorted-key listing starts an hour before
    the range it needs, so a skipped boundary "directory" holds nothing it takes
    (eventdedup.inputs.landing). Pinned here: an upgrade that changes it fails loudly."""
    client = s3_server.client()
    for key in ["p/b-c", "p/b.d", "p/b/x", "p/b0", "p/20261122T0400/part-0", "p/20261122T0401/part-0"]:
        client.put_object(Bucket=bucket, Key=key, Body=b"x")

    def listed(**kwargs: str) -> list[str]:
        return [item["Key"] for item in client.list_objects_v2(Bucket=bucket, Prefix="p/", **kwargs)["Contents"]]

    assert listed() == ["p/20261122T0400/part-0", "p/20261122T0401/part-0", "p/b/x", "p/b-c", "p/b.d", "p/b0"]
    assert listed(StartAfter="p/20261122T0400") == ["p/20261122T0401/part-0", "p/b/x", "p/b-c", "p/b.d", "p/b0"]
    assert listed(StartAfter="p/20261122T0400/")[0] == "p/20261122T0400/part-0"
