"""Kill `backfill-columns` at each of its S3 requests in turn, in both flavours (the request never
sent; sent but its response lost): whatever the log shows right after is whole and the Delta table
is the view as of the version it reflects; recovery plus the command run again reach exactly the
state of a backfill that never crashed, each row once, with its column filled. The command runs on
the driver only, so the client wrapper sees every request of eventdedup's own, in one order (the
Delta table's are delta-rs's, swept for a projection in tests/integration/test_delta_table.py)."""
from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import orjson
import pytest

from eventdedup.config import Config
from eventdedup.inputs.selector import InputSelector
from eventdedup.ops.backfill_columns import backfill_columns
from eventdedup.ops.pipeline import run_batch
from eventdedup.promotion.recovery import recover
from eventdedup.s3store import S3Store
from eventdedup_dev.s3_requests import FaultPoint, points_of

from ..support.helpers import NOW, bucket_listing, committed_rows, make_config, put_lines
from ..support.invariants import assert_commits_are_whole
from ..support.s3_faults import CrashingClient, SimulatedCrash
from ..support.sweeps import Unreached
from .conftest import SETTINGS, committed_state_of, fresh_copy

E = '{"event_id":"e%d","created_at":"2026-11-22T03:%02d:00Z","n":%s}'
LINES = [(E % (i, i, value)).encode() for i, value in enumerate(["1", "2", '"three"', "null", "4"])]
SINCE, UNTIL = datetime(2026, 11, 22, 3, tzinfo=timezone.utc), datetime(2026, 11, 22, 4, tzinfo=timezone.utc)


def config_with(endpoint_url: str, bucket: str, columns: dict[str, str]) -> Config:
    return make_config(endpoint_url, bucket, **SETTINGS, table={"columns": columns})


@pytest.fixture(scope="module")
def before_backfill(s3_server, spark):  # type: ignore[no-untyped-def]
    """b1 committed without columns (hour 3, in two files); `n` declared since."""
    bucket = f"backfill-src-{os.getpid()}"
    s3_server.client().create_bucket(Bucket=bucket)
    store = S3Store(s3_server.client(), bucket)
    put_lines(store, "landing/b1/1.jsonl", LINES)
    run_batch(store, make_config(s3_server.endpoint_url, bucket, **SETTINGS), "b1",
              InputSelector(input_prefix="landing/b1/"), NOW, lambda: spark)
    return bucket


def outcome_of(store: S3Store, config: Config) -> dict[str, Any]:
    rows = sorted((row["event_id"], row["n"], row["raw"]) for row in committed_rows(store, config, "data"))
    assert len(rows) == len({row[0] for row in rows}), "a row appears twice"
    return {**committed_state_of(store, config), "filled": rows}


# Every point of both flavours is 114 runs (~3 minutes on 2 cores): `make test` crashes at the log
# commit and at every STRIDEth point of each flavour (4 of 57), the flavours at points apart;
# `pytest -m soak` at every point.
STRIDE = 19


@pytest.mark.parametrize("flavour, offset", [("raise_before", 0), ("lose_response", STRIDE // 2)])
def test_backfill_killed_at_s3_requests_across_the_command_recovers_to_exactly_the_clean_state(
        s3_server, before_backfill, flavour, offset) -> None:
    sweep(s3_server, before_backfill, flavour, lambda points, commit: sorted(
        {*range(offset, len(points), STRIDE), commit}))


@pytest.mark.soak
@pytest.mark.parametrize("flavour", ["raise_before", "lose_response"])
def test_backfill_killed_at_every_s3_request_recovers_to_exactly_the_clean_state(
        s3_server, before_backfill, flavour) -> None:
    sweep(s3_server, before_backfill, flavour, lambda points, commit: list(range(len(points))))


def sweep(s3_server: Any, source: str, flavour: str,
          chosen: Callable[[list[FaultPoint], int], list[int]]) -> None:
    """Crash the backfill at each chosen point (by its position among the clean run's requests,
    given with the position of its log commit's PUT)."""
    clean_bucket = fresh_copy(s3_server, source)
    clean_config = config_with(s3_server.endpoint_url, clean_bucket, {"n": "long"})
    counting = CrashingClient(s3_server.client(), None)
    backfill_columns(S3Store(counting, clean_bucket), clean_config, SINCE, UNTIL, NOW)
    expected = outcome_of(S3Store(s3_server.client(), clean_bucket), clean_config)
    # Documented rule: a JSON integer within int64 is a long; a string is a mismatch, null.
    assert expected["filled"] == sorted(
        (f"e{i}", value if type(value) is int else None, line.decode())
        for i, (line, value) in enumerate((line, orjson.loads(line)["n"]) for line in LINES))
    points = points_of(counting.calls)
    commit = next(number for number, request in enumerate(counting.calls)
                  if request.verb == "PUT" and request.key.startswith("_eventdedup/log/"))
    unreached = Unreached(f"backfill crashes, {flavour}")
    for point in [points[number] for number in chosen(points, commit)]:
        bucket = fresh_copy(s3_server, source)
        config = config_with(s3_server.endpoint_url, bucket, {"n": "long"})
        store = S3Store(s3_server.client(), bucket)
        crashing = CrashingClient(s3_server.client(), point, flavour=flavour)
        where = f"crash at {point} ({flavour})"
        with pytest.raises(SimulatedCrash):
            backfill_columns(S3Store(crashing, bucket), config, SINCE, UNTIL, NOW)
        unreached.note(point, crashing.faulted)
        # Right after the crash: whatever the log shows is whole, the table the view at its version.
        assert_commits_are_whole(store, config)
        report = recover(store, config)
        assert report.consistent, (where, report.problems)
        backfill_columns(store, config, SINCE, UNTIL, NOW)
        assert outcome_of(store, config) == expected, where
        leftovers = [k for k in bucket_listing(store)
                     if k.startswith(("_eventdedup/staging/", "_eventdedup/state/journal/"))]
        assert leftovers == [], (where, leftovers)
    unreached.report(at_most=0)
