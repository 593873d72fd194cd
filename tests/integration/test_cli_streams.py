"""`eventdedup streams`: every stream of a folder at once, on a real store: each stream's
consistency, log head and ingestion lag from its own prefixes, a store that cannot be read as that
stream's line, the files that cannot run, and the exit code of the worst."""
from __future__ import annotations

from pathlib import Path

import orjson

from eventdedup.cli import EXIT_FAILED, EXIT_INCONSISTENT, main
from eventdedup.commit.job_result import JobResult, StagedObject
from eventdedup.commit.journal import PromotionJournal
from eventdedup.config import load_config
from eventdedup.counts import BatchCounts
from eventdedup.layout import Layout
from eventdedup.s3store import ObjectInfo, S3Store

PREFIXES = ("landing", "output", "cache", "staging", "audit", "quarantine", "commit_log", "state", "manifest",
            "alerts", "reports")

# What config says of a bucket name S3 would refuse.
RULE = " (3 to 63 lower-case letters, digits, dots and hyphens, beginning and ending with a letter or digit)"


def stream_file(folder: Path, name: str, endpoint: str, bucket: str) -> Path:
    path = folder / f"{name}.toml"
    path.write_text(f'[s3]\nendpoint_url = "{endpoint}"\nbucket = "{bucket}"\n[layout]\n'
                    + "".join(f'{p}_prefix = "{name}/{p}/"\n' for p in PREFIXES))
    return path


def test_streams_lists_each_streams_state_lag_and_consistency_and_the_files_that_cannot_run(
        tmp_path, s3_server, bucket, capsys) -> None:
    endpoint = s3_server.endpoint_url
    store = S3Store(s3_server.client(), bucket)
    web = stream_file(tmp_path, "web", endpoint, bucket)
    mobile = stream_file(tmp_path, "mobile", endpoint, bucket)
    stream_file(tmp_path, "gone", endpoint, "no-such-bucket")
    (tmp_path / "broken.toml").write_text('[s3]\nbucket = "x"\n')  # too short a bucket name
    store.put_bytes("web/landing/2026/a.jsonl", b'{"event_id":"e1","created_at":"2026-11-22T05:00:00Z"}\n')
    # mobile: a promotion journal whose staged object is gone, as a crash mid-promotion leaves it
    mobile_layout = Layout(load_config(mobile, {}).layout)
    entry = StagedObject("data", ObjectInfo("mobile/staging/b9/data/x.parquet", 5, '"e"'), "mobile/output/x.parquet", 1)
    journal = PromotionJournal("tok", None, JobResult("b9", 0, "2026-11-22T06:00:00+00:00", BatchCounts(), (entry,)))
    store.put_bytes(mobile_layout.journal("b9"), journal.to_bytes())

    assert main(["streams", "--dir", str(tmp_path), "--json"]) == EXIT_INCONSISTENT
    status = orjson.loads(capsys.readouterr().out)
    lines = {line["stream"]: line for line in status["streams"]}
    assert list(lines) == ["gone", "mobile", "web"]
    assert lines["web"]["consistent"] is True and lines["web"]["head_version"] == 0
    assert lines["web"]["store"] == f"s3://{bucket}/web/output/" and lines["web"]["config"] == str(web)
    assert (lines["web"]["ingestion"]["unconsumed"], lines["web"]["ingestion"]["oldest_unconsumed"]) == (
        1, "web/landing/2026/a.jsonl")
    assert lines["mobile"]["consistent"] is False and "batch b9" in " ".join(lines["mobile"]["problems"])
    assert "NoSuchBucket" in lines["gone"]["error"]
    assert status["refused"] == [{"files": [str(tmp_path / "broken.toml")],
                                  "message": f"{tmp_path / 'broken.toml'}: [s3] bucket 'x' is not a valid bucket name"
                                  + RULE}]

    assert main(["streams", "--dir", str(tmp_path)]) == EXIT_INCONSISTENT
    table = capsys.readouterr().out.splitlines()
    assert table[0] == f"3 stream(s) in {tmp_path}"
    assert table[1].split() == ["stream", "state", "log", "version", "latest", "batch", "waiting", "oldest", "waiting"]
    assert table[2].split()[:2] == ["gone", "UNREADABLE"] and table[3].split()[:2] == ["mobile", "INCONSISTENT"]
    assert table[4].split()[:4] == ["web", "consistent", "0", "1"]
    assert table[-1] == f"refused: {tmp_path / 'broken.toml'}: [s3] bucket 'x' is not a valid bucket name" + RULE

    # Without the inconsistent stream, a refused file or an unreadable store is exit 1.
    mobile.unlink()
    assert main(["streams", "--dir", str(tmp_path), "--json"]) == EXIT_FAILED
