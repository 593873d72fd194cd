"""The embedded S3 server: a real HTTP endpoint on loopback, with snapshots across restarts."""
from __future__ import annotations

from eventdedup_dev.local_s3 import LocalS3Process


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
