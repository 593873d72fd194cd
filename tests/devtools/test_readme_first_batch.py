"""The README's "Running a batch", run as a new user runs it (issue 59): its lines as written, in
bash, in a fresh directory that holds what a clone holds there (conf/ and the built .venv/). Only
the store's port differs (a free one, so that the test runs beside anything else): the snippet's
`--port 9000`, and the configuration's endpoint through its documented environment override.

What run-batch and status print is the sample's ledger (eventdedup_dev.sample_events): the
generator knows which lines it copied, so the counts are known without running a batch.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import orjson

from eventdedup.counts import BatchCounts
from eventdedup.ops.status import TABLE_COLUMNS
from eventdedup_dev.local_s3 import port_is_free
from eventdedup_dev.sample_upload import sample_batch

REPO = Path(__file__).resolve().parents[2]
# Below the ephemeral range and apart from the store's own internal ports (eventdedup_dev.local_s3).
CANDIDATE_PORTS = range(19000, 19990)


def readme_snippet() -> str:
    """The first code block of the README's "Running a batch" section."""
    section = (REPO / "README.md").read_text(encoding="utf-8").split("\n## Running a batch\n", 1)[1]
    return section.split("```\n", 2)[1]


def expected_counts() -> dict[str, int]:
    """Every count of the sample's batch, by the documented rules: the generator's ledger, and
    exact copies are natural in-batch duplicates (same id, same event, so the same hour); each
    kept event adds one cache entry."""
    planted = sample_batch(datetime(2026, 11, 22, 5, 0, tzinfo=timezone.utc))  # the ledger does not depend on the time
    counts = dict.fromkeys(BatchCounts.names(), 0)
    counts.update(planted.expected_counts(), in_batch_natural=planted.in_batch_duplicates,
                  cache_keys_written=len(planted.unique_ids))
    return counts


def stop_group(shell: subprocess.Popen[str]) -> None:
    """Whatever of the shell's process group is left (the store it started in the background, Spark's
    processes) after it exits, or all of it if it did not: TERM, then KILL."""
    try:
        os.killpg(shell.pid, signal.SIGTERM)
    except ProcessLookupError:
        return  # the shell stopped everything it started
    try:
        shell.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()


def test_the_readmes_first_batch_runs_as_written_and_prints_the_samples_counts(tmp_path) -> None:
    snippet = readme_snippet()
    assert snippet.count("--port 9000") == 1, snippet
    port = next(p for p in random.Random(os.getpid()).sample(list(CANDIDATE_PORTS), 50) if port_is_free(p))
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / ".venv").symlink_to(Path(sys.prefix))
    (clone / "conf").symlink_to(REPO / "conf")
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("AWS_", "EVENTDEDUP_", "PYSPARK_"))}
    env["EVENTDEDUP_S3__ENDPOINT_URL"] = f"http://127.0.0.1:{port}"
    # The snippet leaves the store running in the background: the shell stops it as it exits.
    script = "set -e\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n" + snippet.replace("--port 9000", f"--port {port}")
    shell = subprocess.Popen(["bash", "-c", script], cwd=clone, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = shell.communicate(timeout=900)
    finally:
        stop_group(shell)
    assert shell.returncode == 0, out[-3000:] + err[-3000:]

    lines = out.splitlines()
    assert "uploaded s3://events/landing/sample/part-000.jsonl: 110 lines, 100 events and 10 exact copies of them" \
        in lines, out
    committed = [line for line in lines if line.startswith("batch sample-1 ")]
    assert len(committed) == 1 and committed[0].startswith("batch sample-1 committed as log version 1: "), out
    printed = orjson.loads(committed[0].split(": ", 1)[1])
    assert {name: value for name, value in printed.items() if name not in BatchCounts.WORK} == {
        name: value for name, value in expected_counts().items() if name not in BatchCounts.WORK}
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["version", "batch"])
    expected_row = ["1", "sample-1", *(str(expected_counts()[name]) for name in TABLE_COLUMNS)]
    assert lines[header + 1].split() == expected_row, out
