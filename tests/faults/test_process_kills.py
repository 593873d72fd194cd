"""SIGKILL the real `eventdedup run-batch` process -- its Spark driver while the job runs, and the
promoter during promotion -- at exact points, then recover and rerun: exactly the clean state.

The kill is triggered by the fault proxy when the process's request at that point arrives
(the request is not served, or for the commit: served, then the process dies before the reply),
and takes the whole process group: Python driver, its JVM and the Python workers.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from eventdedup.ops.pipeline import run_batch
from eventdedup.promotion.recovery import recover
from eventdedup.s3store import S3Store
from eventdedup_dev.s3_requests import FaultPoint, S3Request, first_request

from ..support.helpers import NOW, bucket_listing
from ..support.invariants import assert_commits_are_whole, assert_seen_ids_match_output
from .conftest import B2_SELECTOR, committed_state_of, config_for, fresh_copy

KILL_POINTS: dict[str, tuple[FaultPoint, str]] = {
    "driver: Spark job reading its first input": (
        first_request(lambda r: r.verb == "GET" and r.key.startswith("landing/b2/"), "the first GET of an input"), "raise_before"),
    "driver: first staged data write": (
        first_request(lambda r: r.verb == "PUT" and r.key.startswith("_eventdedup/staging/b2/attempt-") and "/data/" in r.key,
              "the first staged data PUT"), "raise_before"),
    "driver: writing the job result": (
        first_request(lambda r: r.verb == "PUT" and r.key.endswith("/job-result.json"), "the job result's PUT"), "raise_before"),
    "promoter: after writing its journal": (first_request(lambda r: r.verb == "COPY", "the first COPY"), "raise_before"),
    "promoter: commit written, reply never read": (
        first_request(lambda r: r.verb == "PUT" and r.key.startswith("_eventdedup/log/"), "the commit's PUT"), "lose_response"),
}


def write_config(path: Path, endpoint_url: str, bucket: str) -> Path:
    path.write_text(f'[s3]\nendpoint_url = "{endpoint_url}"\nbucket = "{bucket}"\n'
                    '[dedup]\nbuckets = 2\ncheckpoint_interval = 2\n'
                    '[spark]\nmaster = "local[2]"\npartitions = 2\ndriver_memory = "1g"\n')
    return path


@pytest.mark.parametrize("point", KILL_POINTS)
def test_sigkill_at_each_point_then_recover_and_rerun_gives_exactly_the_clean_state(
        s3_server, proxy, before_b2, clean_run, spark, tmp_path, point) -> None:
    _, expected = clean_run
    at, flavour = KILL_POINTS[point]
    bucket = fresh_copy(s3_server, before_b2)
    victim: dict[str, subprocess.Popen] = {}

    def kill(request: S3Request) -> None:
        os.killpg(victim["process"].pid, signal.SIGKILL)

    proxy.arm(at, flavour, on_fault=kill)
    victim["process"] = subprocess.Popen(
        [sys.executable, "-m", "eventdedup", "run-batch", "--config",
         str(write_config(tmp_path / "c.toml", proxy.endpoint_url, bucket)), "--batch-id", "b2",
         "--input-prefix", "landing/b2/"],
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    returncode = victim["process"].wait(timeout=300)
    assert returncode == -signal.SIGKILL, f"{point}: the process was not killed (exit {returncode})"
    assert proxy.dead and proxy.faulted is not None and at.matches(proxy.faulted), point
    proxy.heal()

    direct = config_for(s3_server.endpoint_url, bucket)
    store = S3Store(s3_server.client(), bucket)
    assert_commits_are_whole(store, direct)
    assert_seen_ids_match_output(store, direct)
    report = recover(store, direct)
    assert report.consistent, (point, report.problems)
    run_batch(store, direct, "b2", B2_SELECTOR, NOW, lambda: spark)
    assert committed_state_of(store, direct) == expected, point
    leftovers = [k for k in bucket_listing(store) if k.startswith(("_eventdedup/staging/", "_eventdedup/state/journal/"))]
    assert leftovers == [], (point, leftovers)
