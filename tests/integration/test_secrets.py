"""No credential value ever reaches a log line, an error, a commit record or any written object."""
from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

from eventdedup.tables import parquet_to_table

from ..support.canaries import CLI_ACCESS_KEY, CLI_SECRET_KEY
from ..support.helpers import put_lines

ACCESS_KEY, SECRET_KEY = CLI_ACCESS_KEY, CLI_SECRET_KEY


def run_cli(*args: str, config: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
    return subprocess.run([sys.executable, "-m", "eventdedup", "--verbose", *args, "--config", str(config)],
                          env=env, capture_output=True, text=True, timeout=300)


def test_a_batch_run_with_recognisable_credentials_writes_them_nowhere(tmp_path, s3_server, bucket, store) -> None:
    config = tmp_path / "eventdedup.toml"
    config.write_text(f'[s3]\nendpoint_url = "{s3_server.endpoint_url}"\nbucket = "{bucket}"\n'
                      '[dedup]\nbuckets = 2\n[spark]\nmaster = "local[2]"\npartitions = 2\n')
    put_lines(store, "landing/b1/1.jsonl", [b'{"event_id":"e1","created_at":"2026-11-22T03:10:00Z"}'] * 2 + [b"bad"])
    put_lines(store, "landing/b2/1.jsonl", [b'{"event_id":"e1","created_at":"2026-11-22T03:10:00Z"}'])
    runs = [
        run_cli("run-batch", "--batch-id", "b1", "--input-prefix", "landing/b1/", config=config),
        run_cli("stage", "--batch-id", "b2", "--input-prefix", "landing/b2/", config=config),
        run_cli("promote", "--batch-id", "b2", config=config),  # fails: b2's job never ran
        run_cli("recover", config=config),
        run_cli("status", "--json", config=config),
    ]
    assert [run.returncode for run in runs] == [0, 0, 1, 0, 0], [run.stderr[-2000:] for run in runs]
    assert "no job result" in runs[2].stderr  # the failure path's message is in the search below too

    written = {item.key: store.get_bytes(item.key) for item in store.list("")}
    assert any(key.startswith("_eventdedup/log/") for key in written) and any(k.startswith("audit/") for k in written)
    texts = {f"s3://{bucket}/{key}": _readable(data) for key, data in written.items()}
    texts.update({f"{run.args[4]} stdout": run.stdout.encode() for run in runs})
    texts.update({f"{run.args[4]} stderr": run.stderr.encode() for run in runs})
    for secret in (SECRET_KEY, ACCESS_KEY):
        leaks = [where for where, text in texts.items() if secret.encode() in text]
        assert leaks == [], f"{secret[:8]}... found in {leaks}"


def _readable(data: bytes) -> bytes:
    """Objects as a reader would see them: gzip unpacked, Parquet decoded to its values (its
    pages are compressed, so the raw bytes would hide a leaked string)."""
    if data.startswith(b"\x1f\x8b"):
        return gzip.decompress(data)
    if data.startswith(b"PAR1"):
        return repr(parquet_to_table(data).to_pylist()).encode()
    return data
