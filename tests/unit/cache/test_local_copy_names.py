"""A local copy's name holds the store's endpoint, its bucket and the object key: stores reached
from one host whose buckets share a name keep their copies apart."""
from __future__ import annotations

from pathlib import Path

from eventdedup.cache.local_copies import LocalCopies, LocalCopySettings
from eventdedup.config import S3Settings
from eventdedup.s3store import S3Store, make_client


def _store(endpoint: str, bucket: str = "events") -> S3Store:
    return S3Store(make_client(S3Settings(bucket=bucket, endpoint_url=endpoint)), bucket)


def test_stores_of_one_bucket_name_at_two_endpoints_keep_separate_copies(tmp_path: Path) -> None:
    copies = LocalCopies(LocalCopySettings(str(tmp_path), 1 << 20))
    first, second = _store("http://127.0.0.1:9001"), _store("http://127.0.0.1:9002")
    key = "_eventdedup/cache/date=2026-11-22/hour=11/bucket=0003/b1.seg"
    assert copies.path_of(first, key) != copies.path_of(second, key)
    assert copies.path_of(first, key) == copies.path_of(_store("http://127.0.0.1:9001"), key)  # stable
    assert copies.path_of(first, key) != copies.path_of(_store("http://127.0.0.1:9001", "other"), key)
    assert copies.path_of(first, key).parent == tmp_path
