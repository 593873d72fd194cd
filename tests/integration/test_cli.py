"""The command line as other tools call it: exit codes and machine-readable output."""
from __future__ import annotations

from pathlib import Path

import orjson

from eventdedup.cli import EXIT_FAILED, EXIT_INCONSISTENT, main
from eventdedup.journal import PromotionJournal
from eventdedup.job_result import StagedObject
from eventdedup.layout import Layout
from eventdedup.s3store import ObjectInfo


def config_file(tmp_path: Path, endpoint: str, bucket: str) -> str:
    path = tmp_path / "eventdedup.toml"
    path.write_text(f'[s3]\nendpoint_url = "{endpoint}"\nbucket = "{bucket}"\n[dedup]\nbuckets = 4\n')
    return str(path)


def test_status_of_an_empty_store_is_consistent(tmp_path, s3_server, bucket, capsys) -> None:
    assert main(["status", "--config", config_file(tmp_path, s3_server.endpoint_url, bucket), "--json"]) == 0
    status = orjson.loads(capsys.readouterr().out)
    assert status == {"consistent": True, "problems": [], "pending": [], "head_version": 0, "batches": []}


def test_recover_exits_3_and_names_the_lost_object(tmp_path, s3_server, bucket, store, config, capsys) -> None:
    entry = StagedObject("data", ObjectInfo("_eventdedup/staging/b9/data/x.parquet", 5, '"e"'), "deduped/x.parquet", 1)
    journal = PromotionJournal("b9", "tok", 1, None, "2026-11-22T06:00:00+00:00", {}, (entry,))
    store.put_bytes(Layout(config.layout).journal("b9"), journal.to_bytes())
    path = config_file(tmp_path, s3_server.endpoint_url, bucket)
    assert main(["recover", "--config", path]) == EXIT_INCONSISTENT
    out = capsys.readouterr().out
    assert f"s3://{bucket}/deduped/x.parquet is missing" in out and "INCONSISTENT: batch b9" in out
    assert main(["status", "--config", path]) == EXIT_INCONSISTENT


def test_bad_batch_id_is_refused_with_exit_1(tmp_path, s3_server, bucket, capsys) -> None:
    path = config_file(tmp_path, s3_server.endpoint_url, bucket)
    assert main(["run-batch", "--config", path, "--batch-id", "../x", "--input-prefix", "landing/"]) == EXIT_FAILED
    assert "batch id '../x' is invalid" in capsys.readouterr().err
