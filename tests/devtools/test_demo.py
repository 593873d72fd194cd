"""`make demo` prints per-batch counts; they must equal what the sample generator planted."""
from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from eventdedup.ops.status import TABLE_COLUMNS
from eventdedup_dev.planted_demo import planted_batches

REPO = Path(__file__).resolve().parents[2]


def demo_command() -> list[str]:
    venv = Path(sys.prefix)
    if (venv / ".installed").exists():  # the Makefile's virtualenv: run the README's command itself
        return ["make", "--no-print-directory", "demo", f"VENV={venv}"]
    return [sys.executable, "-m", "eventdedup_dev", "planted-batches"]  # the same batches, without Airflow


def test_make_demo_prints_the_planted_counts_for_each_batch() -> None:
    done = subprocess.run(demo_command(), cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["version", "batch"])
    printed = {}
    for line in lines[header + 1: header + 4]:
        version, batch, *numbers = line.split()
        printed[batch] = (int(version), dict(zip(TABLE_COLUMNS, map(int, numbers), strict=False)))
    # The planted counts do not depend on the start time: any fixed one gives the ledger (no clock read here).
    expected = {b.name: b.expected_counts() for b in planted_batches(datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc))}
    assert printed == {name: (i + 1, expected[name]) for i, name in enumerate(["demo-001", "demo-002", "demo-003"])}
    assert "all counts match the planted duplicates" in done.stdout
    if demo_command()[0] == "make":  # make demo ends with the output's Delta table, read with deltalake
        rows = sum(counts["output_rows"] for counts in expected.values())
        # A new store: table version 0 created before its first commit, then one version per batch.
        # Before it, the report of the three batches: every duplicate the generator planted is a copy.
        copies = sum(counts["in_batch_duplicates"] + counts["cross_batch_duplicates"] for counts in expected.values())
        assert lines[-2].startswith(f"report .demo/report.html: 3 batches, {copies} copies; ")
        assert (REPO / ".demo" / "report.html").read_text().count('<svg class="chart"') >= 8
        assert lines[-1].startswith("Delta table s3://") and lines[-1].endswith(
            f"/deduped: version 3, {rows} rows (read with deltalake), reflecting log version 3"), lines[-1]
