"""A batch on the embedded store whose disk falls below the store's floor (a tmpfs the test mounts,
filled by another file) while it runs: at staging, at the Spark job's writes, or at promotion.
The store refuses the write with its own message; the batch fails at that step and is not
committed; `status` and `recover` agree that the store is consistent, and recover has nothing to
roll forward; once space is freed, the rerun commits the batch exactly once, with exactly the
rows expected (written out here from the events, not by the code under test)."""
from __future__ import annotations

import pytest

from eventdedup.inputs.selector import InputSelector
from eventdedup.job.driver import run_dedup_job
from eventdedup.ops.pipeline import run_batch
from eventdedup.ops.scheduling import BatchPlan, stage_planned_batch
from eventdedup.ops.status import store_status
from eventdedup.promotion.promote import promote_batch
from eventdedup.promotion.recovery import recover
from eventdedup.s3store import S3Store, make_client
from eventdedup_dev.local_s3 import MIB, LocalS3Process

from ..support.helpers import NOW, commit_counts, committed_rows, make_config, put_lines
from .store_churn import fill, small_filesystems

EVENT = b'{"event_id":"e%d","created_at":"2026-11-22T05:%02d:00Z","v":1}'
LINES = [EVENT % (n, n % 60) for n in range(40)] + [EVENT % (n, n % 60) for n in range(10)]  # 10 exact copies
PHASES = ("staging", "job", "promotion")


def failure_text(exc: BaseException) -> str:
    """The exception and every one it came from (a Spark job's failure carries the executor's)."""
    parts = []
    while exc is not None:
        parts.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return "\n".join(parts)


# The Spark job's writes in the default suite; staging and promotion in `make soak-store` (each
# phase is a store, a batch and its rerun: ~15 s).
@pytest.mark.parametrize("phase", [pytest.param("staging", marks=pytest.mark.soak), "job",
                                   pytest.param("promotion", marks=pytest.mark.soak)])
def test_a_batch_refused_below_the_floor_fails_cleanly_and_its_rerun_commits_once(tmp_path, spark, phase) -> None:
    with small_filesystems(tmp_path) as mount:
        disk = mount("batch", 192)
        with LocalS3Process(data_dir=disk / "data", log_dir=tmp_path / "logs", volume_mb=8,
                            min_free=48 * MIB) as server:
            server.client().create_bucket(Bucket="pipeline")
            config = make_config(server.endpoint_url, "pipeline", dedup={"buckets": 2}, spark={"partitions": 2})
            store = S3Store(make_client(config.s3), "pipeline")
            put_lines(store, "landing/b1/1.jsonl", LINES)
            plan = BatchPlan("b1", InputSelector(input_prefix="landing/b1/"))
            steps = {"staging": lambda: stage_planned_batch(store, config, plan, NOW),
                     "job": lambda: run_dedup_job(spark, config, "b1", store.for_one_batch()),
                     "promotion": lambda: promote_batch(store.for_one_batch(), config, "b1")}
            for done in PHASES[:PHASES.index(phase)]:
                steps[done]()

            filler = fill(disk, leave=24 * MIB)  # another program takes the disk below the 48 MiB floor
            with pytest.raises(Exception) as refused:
                steps[phase]()
            text = failure_text(refused.value)
            assert "InsufficientStorage" in text and f"{disk / 'data'} has " in text, text[-3000:]
            status = store_status(store, config, NOW)
            assert status["consistent"] and status["batches"] == [], status
            report = recover(store, config)  # what status said is pending, and nothing to roll forward
            assert report.consistent and report.actions == [], report.text()
            assert sorted(report.cleanups) == sorted(status["pending"])
            assert "b1" not in commit_counts(store, config)

            filler.unlink()  # space freed: the rerun (what the next scheduled run does) commits it, once
            run_batch(store, config, "b1", plan.selector, NOW, lambda: spark)
            run_batch(store, config, "b1", plan.selector, NOW, lambda: spark)  # a no-op now
            rows = committed_rows(store, config, "data")
            assert sorted((row["event_id"], row["batch_id"]) for row in rows) == sorted(
                (f"e{n}", "b1") for n in range(40))
            assert sorted(row["event_id"] for row in committed_rows(store, config, "audit")) == sorted(
                f"e{n}" for n in range(10))
            assert list(commit_counts(store, config)) == ["b1"]
