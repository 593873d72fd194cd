"""The output as a Delta Lake table (issue 41): read with delta-rs and with pyarrow datasets over its
snapshot, it holds exactly the committed batches' rows; retractions leave it in one commit;
repeated and racing projections commit each log version once; time travel finds the table before
a batch.

Expected rows come from the documented rules (first copy of an id wins; a retracted batch is seen
by nobody), built here from the input lines, never from a run of the code under test.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError

from eventdedup.commit.log import load_committed_state, read_commit
from eventdedup.config import Config, TableSettings
from eventdedup.delta import projection
from eventdedup.delta.projection import APP_ID, project, table_status
from eventdedup.delta.storage import storage_options, table_location
from eventdedup.delta.upkeep import maintain_table
from eventdedup.inputs.manifest import freeze_batch_inputs
from eventdedup.inputs.selector import InputSelector
from eventdedup.job.driver import run_dedup_job
from eventdedup.layout import Layout
from eventdedup.ops.fsck import fsck
from eventdedup.ops.pipeline import run_batch
from eventdedup.ops.retract import retract_batch
from eventdedup.ops.status import format_status, store_status
from eventdedup.promotion.promote import promote_batch
from eventdedup.promotion.recovery import examine, recover
from eventdedup.s3store import S3Store, make_client
from eventdedup.s3store import make_client as s3_client
from eventdedup_dev.s3_fault_proxy import FaultProxy
from eventdedup_dev.s3_requests import points_of

from ..support.helpers import NOW, bucket_listing, make_config, put_lines
from ..support.invariants import assert_table_is_the_view_at_its_version
from ..support.s3_faults import clone_bucket
from ..support.sweeps import Unreached


def ev(event_id: str, hour: int, **payload: object) -> bytes:
    return orjson.dumps({"event_id": event_id, "created_at": f"2026-11-22T0{hour}:10:00Z", **payload})


B1 = [ev(f"a{i}", 3 + i % 2) for i in range(6)]
B2 = [ev(f"b{i}", 4 + i % 2) for i in range(4)] + [ev("a0", 3), ev("b1", 5)]  # a0: cross-batch; b1: in-batch
B3 = [ev(f"c{i}", 5) for i in range(3)] + [ev("b2", 4)]


def run(store: S3Store, config: Config, spark: Any, batch_id: str, lines: list[bytes]) -> None:
    put_lines(store, f"landing/{batch_id}/1.jsonl", lines)
    run_batch(store, config, batch_id, InputSelector(input_prefix=f"landing/{batch_id}/"), NOW, lambda: spark)


def expected_ids(*batches: list[bytes]) -> dict[str, str]:
    """event id -> the hour folder its first copy lands in, over the batches in order."""
    seen: dict[str, str] = {}
    for lines in batches:
        for line in lines:
            row = orjson.loads(line)
            seen.setdefault(row["event_id"], row["created_at"][11:13])
    return seen


def open_delta(store: S3Store, config: Config, version: int | None = None) -> DeltaTable:
    return DeltaTable(table_location(store, config), version=version, storage_options=storage_options(store, config.s3))


def table_ids(table: DeltaTable) -> dict[str, str]:
    rows = table.to_pyarrow_table(columns=["event_id", "hour"]).to_pylist()
    ids = [row["event_id"] for row in rows]
    assert len(ids) == len(set(ids)), "an id appears twice in the table"
    return {row["event_id"]: f"{row['hour']:02d}" for row in rows}


def test_the_table_holds_exactly_the_committed_batches_and_names_each_commit(store, config, spark) -> None:
    layout = Layout(config.layout)
    run(store, config, spark, "b1", B1)
    run(store, config, spark, "b2", B2)
    table = open_delta(store, config)
    assert table_ids(table) == expected_ids(B1, B2)
    # pyarrow's dataset over the snapshot: the same rows, and partition pruning by the table's values.
    dataset = table.to_pyarrow_dataset()
    assert sorted(dataset.to_table(columns=["event_id"]).column(0).to_pylist()) == sorted(expected_ids(B1, B2))
    hour_4 = dataset.to_table(filter=ds.field("hour") == 4, columns=["event_id"]).column(0).to_pylist()
    assert sorted(hour_4) == sorted(i for i, h in expected_ids(B1, B2).items() if h == "04")
    # One Delta commit per log commit, each carrying (eventdedup, N) and naming its batch and counts.
    state = load_committed_state(store, layout)
    assert table.transaction_version(APP_ID) == state.version == state.batches["b2"]
    history = {entry["version"]: entry for entry in table.history()}
    assert history[table.version()]["eventdedup.batch_id"] == "b2"
    assert history[table.version()]["eventdedup.log_version"] == state.batches["b2"]
    assert history[table.version()]["eventdedup.counts"]["output_rows"] == len(expected_ids(B1, B2)) - len(expected_ids(B1))
    # Time travel: the version before b2's commit holds b1 alone.
    assert table_ids(open_delta(store, config, table.version() - 1)) == expected_ids(B1)


def test_statistics_come_from_the_files_and_never_skip_a_row(store, config, spark) -> None:
    lines = B1 + [orjson.dumps({"event_id": "late", "created_at": "2026-11-22T04:59:59.999501Z"})]
    run(store, config, spark, "b1", lines)
    table = open_delta(store, config)
    files = pa.table(table.get_add_actions(flatten=False)).to_pylist()  # the statistics as delta-rs reads them
    by_hour: dict[int, list[dict[str, Any]]] = {}
    for action in files:
        by_hour.setdefault(action["partition"]["hour"], []).append(action)
    expected = expected_ids(lines)
    assert sorted(by_hour) == sorted({int(hour) for hour in expected.values()})
    for hour, actions in by_hour.items():
        assert sum(a["num_records"] for a in actions) == sum(1 for h in expected.values() if int(h) == hour)
        assert all(a["null_count"]["event_id"] == 0 and a["min"]["batch_id"] == "b1" == a["max"]["batch_id"]
                   for a in actions)
        # Every event of the hour is at HH:10:00 but one at 04:59:59.999501, whose maximum rounds up.
        assert min(a["min"]["event_time"] for a in actions) == datetime(2026, 11, 22, hour, 10, tzinfo=timezone.utc)
        top = datetime(2026, 11, 22, 5, tzinfo=timezone.utc) if hour == 4 else datetime(2026, 11, 22, hour, 10,
                                                                                        tzinfo=timezone.utc)
        assert max(a["max"]["event_time"] for a in actions) == top
    # A filter at the last event's exact microsecond finds it: skipping by the statistics passes no row over.
    moment = pa.scalar(datetime(2026, 11, 22, 4, 59, 59, 999501, tzinfo=timezone.utc), pa.timestamp("us", tz="UTC"))
    found = table.to_pyarrow_dataset().to_table(filter=ds.field("event_time") >= moment, columns=["event_id"])
    assert sorted(found.column(0).to_pylist()) == sorted(["late"] + [i for i, h in expected.items() if h == "05"])


def test_a_retraction_removes_its_batch_in_one_commit_and_time_travel_still_finds_it(store, config, spark) -> None:
    run(store, config, spark, "b1", B1)
    run(store, config, spark, "b2", B2)
    run(store, config, spark, "b3", B3)
    before = open_delta(store, config).version()
    retract_batch(store, config, "b3", "bad producer", NOW)
    table = open_delta(store, config)
    assert table.version() == before + 1
    assert table_ids(table) == expected_ids(B1, B2)
    assert table_ids(open_delta(store, config, before)) == expected_ids(B1, B2, B3)
    assert table.history(1)[0]["eventdedup.retracts"] == ["b3"]


def delta_commits(table: DeltaTable) -> list[tuple[int, int | None]]:
    """(table version, the eventdedup log version its commit names), oldest first."""
    return sorted((entry["version"], entry.get("eventdedup.log_version")) for entry in table.history())


def test_a_projector_that_read_a_stale_table_loses_the_race_and_writes_nothing(store, config, spark,
                                                                              monkeypatch) -> None:
    run(store, config, spark, "b1", B1)
    table = open_delta(store, config)
    version = table.version()
    assert project(store, config).projected == ()  # repeated: nothing left, no second commit
    stale = open_delta(store, config, version - 1)  # read just before b1's projection landed
    with pytest.raises(CommitFailedError):  # checked on its snapshot it holds no log version 1, so it tries:
        projection._commit(stale, [], 1, {})  # the conditional PUT of a taken table version refuses it
    # Through project(): the refused commit is read again, found done, and not written a second time.
    monkeypatch.setattr(projection, "open_table", lambda *_: open_delta(store, config, version - 1))
    assert project(store, config).projected == ()
    assert delta_commits(open_delta(store, config)) == [(0, None), (1, 1)]


def test_projectors_racing_on_the_real_store_commit_each_log_version_exactly_once(store, config, spark) -> None:
    run(store, config, spark, "b1", B1)
    off = replace(config, table=TableSettings(delta="off"))
    run(store, off, spark, "b2", B2)
    run(store, off, spark, "b3", B3)
    barrier = threading.Barrier(4)

    def racer() -> tuple[int, ...]:
        barrier.wait(timeout=60)
        return project(S3Store(s3_client(config.s3), store.bucket), config).projected

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: racer(), range(4)))
    assert sorted(v for projected in results for v in projected) == [2, 3]  # each by one racer
    table = open_delta(store, config)
    assert delta_commits(table) == [(0, None), (1, 1), (2, 2), (3, 3)]
    assert table_ids(table) == expected_ids(B1, B2, B3)


def test_a_lagging_table_is_reported_and_rolled_forward_by_recover(store, config, spark) -> None:
    run(store, config, spark, "b1", B1)
    off = replace(config, table=TableSettings(delta="off"))
    run(store, off, spark, "b2", B2)
    status = table_status(store, config)
    assert status.lag == 1
    examined = examine(store, config)  # a lag is a leftover to tidy, never a reason to halt the pipeline
    assert examined.actions == [] and any("lags the log by 1" in cleanup for cleanup in examined.cleanups)
    report = recover(store, config)
    assert report.consistent and any("rolled forward" in cleanup for cleanup in report.cleanups)
    assert table_ids(open_delta(store, config)) == expected_ids(B1, B2)
    assert table_status(store, config).lag == 0


@pytest.mark.parametrize("mode", ["auto", "on"])
def test_a_store_that_predates_the_table_gets_one_only_when_asked(store, config, spark, mode) -> None:
    off = replace(config, table=TableSettings(delta="off"))
    run(store, off, spark, "b1", B1)
    run(store, off, spark, "b2", B2)
    chosen = replace(config, table=TableSettings(delta=mode))
    run(store, chosen, spark, "b3", B3)
    status = table_status(store, chosen)
    if mode == "auto":
        assert not status.exists
        return
    assert status.exists and status.lag == 0
    assert table_ids(open_delta(store, chosen)) == expected_ids(B1, B2, B3)


def batch_files(store: S3Store, config: Config) -> set[str]:
    """Every data file any commit names, retracted batches' included (the log's, never vacuumed)."""
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    named = set()
    for version in range(1, state.version + 1):
        record = read_commit(store, layout, version)
        assert record is not None
        named |= {obj.key for obj in record.objects if obj.kind == "data"}
    return named


def test_compaction_keeps_the_rows_a_retraction_after_it_removes_its_batch_and_vacuum_keeps_every_batch_file(
        store, config, spark) -> None:
    upkeep = replace(config, table=TableSettings(compact_min_files=2, compact_after_hours=0,
                                                 vacuum_retention_hours=0))
    run(store, upkeep, spark, "b1", B1)
    run(store, upkeep, spark, "b2", B2)
    run(store, upkeep, spark, "b3", B3)
    before = {path: info["partition"] for path, info in projection.table_files(open_delta(store, upkeep)).items()}
    report = maintain_table(store, upkeep)
    # Hours 04 and 05 hold files of several batches (and, with 4 tasks, several files each); 03 may too.
    crowded = sorted({f"{p['date']}/{int(p['hour']):02d}" for p in before.values()
                      if sum(1 for q in before.values() if q == p) >= 2})
    assert report.compacted == crowded and "2026-11-22/05" in crowded
    table = open_delta(store, upkeep)
    after = projection.table_files(table)
    assert all(sum(1 for q in after.values() if q["partition"] == p["partition"]) == 1 for p in after.values()
               if f"{p['partition']['date']}/{int(p['partition']['hour']):02d}" in crowded)
    assert table_ids(table) == expected_ids(B1, B2, B3)
    compacted_version = table.version()
    # b3 lives only in compacted files now: its retraction sets its hours back to the view's own files.
    retract_batch(store, upkeep, "b3", "bad producer", NOW)
    table = open_delta(store, upkeep)
    assert table.version() == compacted_version + 1
    assert table_ids(table) == expected_ids(B1, B2)
    assert table_ids(open_delta(store, upkeep, compacted_version)) == expected_ids(B1, B2, B3)
    # Vacuum (retention 0 here): compaction's files the table no longer uses go; no batch file ever does.
    report = maintain_table(store, upkeep)
    listed = set(bucket_listing(store))
    assert batch_files(store, upkeep) <= listed
    assert report.vacuumed and all(Layout(upkeep.layout).data_owner(key) is None for key in report.vacuumed)
    assert report.kept_batch_files > 0
    assert not set(report.vacuumed) & listed
    assert table_ids(open_delta(store, upkeep)) == expected_ids(B1, B2)


def test_status_and_fsck_report_the_table_and_fsck_fails_on_a_file_it_uses_that_is_gone(store, config, spark) -> None:
    run(store, config, spark, "b1", B1)
    off = replace(config, table=TableSettings(delta="off"))
    run(store, off, spark, "b2", B2)
    status = store_status(store, config, NOW)
    assert status["table"]["lag"] == 1 and status["table"]["projected_log_version"] == 1
    assert "lags by 1" in format_status(status)
    # The pending list says what `recover --dry-run` says of the lag (docs/delta-table.md).
    lag = (f"the Delta table {status['table']['location']} lags the log by 1 commit(s) (at 1, the log at 2); "
           "would catch it up")
    assert status["pending"] == [lag] and f"  pending: {lag}" in format_status(status).splitlines()
    report = fsck(store, config)
    assert report.consistent and "lags by 1" in report.text()
    recover(store, config)
    # A lifecycle rule deletes a file the table's snapshot uses (the data file also a commit names).
    used = sorted(projection.table_files(open_delta(store, config)))[0]
    store.delete_keys([config.layout.output_prefix + used])
    report = fsck(store, config)
    assert not report.consistent and report.table_missing == [config.layout.output_prefix + used]
    assert f"missing: a file the Delta table uses: {config.layout.output_prefix + used}" in report.text()
    # Two problems, the file gone as a commit's data object and as the table's; the table's own line
    # (its version) is information.
    assert (len(report.missing), len(report.table_missing)) == (1, 1)
    assert report.text().splitlines()[-1].endswith("LIST request(s): 2 problem(s)"), report.text()


def test_a_compaction_of_a_snapshot_a_retraction_has_changed_gives_way_and_the_retracted_rows_stay_out(
        store, config, spark, monkeypatch) -> None:
    upkeep = replace(config, table=TableSettings(compact_min_files=2, compact_after_hours=0))
    run(store, upkeep, spark, "b1", B1)
    run(store, upkeep, spark, "b2", B2)
    run(store, upkeep, spark, "b3", B3)
    stale = open_delta(store, upkeep)  # a compaction read the table here...
    retract_batch(store, upkeep, "b3", "bad producer", NOW)  # ...then b3's files left it
    from eventdedup.delta import upkeep as upkeep_module
    monkeypatch.setattr(upkeep_module, "open_table", lambda *_: stale)
    hour_5 = {path: info for path, info in projection.table_files(stale).items() if info["partition"]["hour"] == "5"}
    assert len(hour_5) >= 2 and any(path.rsplit("/", 1)[1].startswith("b3-") for path in hour_5)
    monkeypatch.setattr(upkeep_module, "table_files", lambda _: hour_5)  # that hour alone, as the stale read saw it
    report = upkeep_module.UpkeepReport()
    upkeep_module.compact(store, upkeep, report)
    assert report.gave_way == ["2026-11-22/05"] and report.compacted == []  # delta-rs refuses to bring b3's back
    assert table_ids(open_delta(store, upkeep)) == expected_ids(B1, B2)


def test_a_table_eventdedup_did_not_create_is_refused_and_left_untouched(store, config, spark) -> None:
    """A `CONVERT TO DELTA` of the output folders, or another team's table, at the output prefix:
    the batch commits, the table is not written (it would hold uncommitted and retracted files),
    the task fails naming it, and fsck reports it."""
    foreign = DeltaTable.create(table_location(store, config), pa.schema([("x", pa.int64())]),
                                storage_options=storage_options(store, config.s3))
    with pytest.raises(projection.TableProjectionError, match="is not eventdedup's"):
        run(store, config, spark, "b1", B1)
    assert "b1" in load_committed_state(store, Layout(config.layout)).batches  # the log is unharmed
    assert open_delta(store, config).version() == foreign.version() == 0
    report = fsck(store, config)
    assert not report.consistent and "is not eventdedup's" in report.table_problems[0]
    off = replace(config, table=TableSettings(delta="off"))  # the way out the message names
    run(store, off, spark, "b2", B2)
    assert recover(store, off).consistent and fsck(store, off).consistent


def test_vacuum_deletes_what_a_compaction_wrote_and_never_committed_and_no_batch_file(store, config, spark) -> None:
    upkeep = replace(config, table=TableSettings(vacuum_retention_hours=0))  # below the configurable floor
    run(store, upkeep, spark, "b1", B1)
    orphan = (f"{config.layout.output_prefix}date=2026-11-22/hour=3/"
              "part-00000-0badc0de-f007-475e-af12-c79396ad540b-c000.zstd.parquet")
    store.put_bytes(orphan, b"a compaction that gave way after writing its output")
    somebody_elses = f"{config.layout.output_prefix}date=2026-11-22/hour=3/notes.parquet"
    store.put_bytes(somebody_elses, b"not ours, not delta-rs's")
    report = maintain_table(store, upkeep)
    assert report.vacuumed == [orphan] and report.kept_other == 1
    assert store.head(somebody_elses) is not None
    assert batch_files(store, upkeep) <= set(bucket_listing(store))
    assert table_ids(open_delta(store, upkeep)) == expected_ids(B1)


def test_the_first_promotion_of_a_new_store_killed_at_each_s3_request_leaves_the_table_the_view(
        s3_server, bucket, spark) -> None:
    """The table is created before the store's first commit: killed at each of delta-rs's requests
    of that promotion up to its commit, and at the commit itself (through the proxy; the promotion's
    other requests are swept in tests/faults/test_promotion_crashes.py, and the projection after a
    commit with every batch's, tests/faults/test_batch_crashes.py), the table holds the view as of
    the log version it reflects, and after `recover` and the retried promotion, exactly b1."""
    source = make_config(s3_server.endpoint_url, bucket)
    put_lines(S3Store(s3_server.client(), bucket), "landing/b1/1.jsonl", B1)
    freeze_batch_inputs(S3Store(s3_server.client(), bucket), source, "b1", InputSelector(input_prefix="landing/b1/"),
                        NOW)
    run_dedup_job(spark, source, "b1")
    with FaultProxy(s3_server.endpoint_url) as proxy:
        counted = make_config(proxy.endpoint_url, bucket)
        copy = f"{bucket}-c"
        clone_bucket(s3_server.client(), bucket, copy)
        proxy.arm(None)
        promote_batch(S3Store(make_client(counted.s3), copy), replace(counted, s3=replace(counted.s3, bucket=copy)),
                      "b1")
        requests = list(proxy.requests)
        commit = next(number for number, request in enumerate(requests)
                      if request.verb == "PUT" and request.key.startswith("_eventdedup/log/"))
        points = [point for request, point in zip(requests[:commit + 1], points_of(requests), strict=False)
                  if "_delta_log/" in request.key or request is requests[commit]]
        assert len(points) > 3  # the table is created before the commit
        unreached = Unreached("the table's creation")
        for number, point in enumerate(points):
            target = f"{bucket}-k{number}"
            clone_bucket(s3_server.client(), bucket, target)
            via_proxy = make_config(proxy.endpoint_url, target)
            direct = make_config(s3_server.endpoint_url, target)
            store = S3Store(s3_server.client(), target)
            proxy.arm(point)
            try:
                promote_batch(S3Store(make_client(via_proxy.s3), target), via_proxy, "b1")
            except Exception:  # noqa: BLE001, S110 - the injected crash, at any request
                pass
            unreached.note(point, proxy.faulted)
            crash_at = str(point)
            proxy.heal()
            assert_table_is_the_view_at_its_version(store, direct)
            assert recover(store, direct).consistent, crash_at
            promote_batch(store, direct, "b1")
            assert assert_table_is_the_view_at_its_version(store, direct, caught_up=True) == 1, crash_at
        unreached.report(at_most=0)


def test_with_the_table_off_an_unreadable_table_fails_nothing(store, config, spark) -> None:
    run(store, config, spark, "b1", B1)
    store.put_bytes(f"{config.layout.output_prefix}_delta_log/{2:020d}.json", b"{not json")  # a damaged log
    assert not fsck(store, config).consistent and fsck(store, config).table_problems
    off = replace(config, table=TableSettings(delta="off"))
    run(store, off, spark, "b2", B2)  # the promotion reads nothing of the table
    assert recover(store, off).consistent and fsck(store, off).consistent
    assert "b2" in load_committed_state(store, Layout(config.layout)).batches


def test_a_compaction_of_a_stale_snapshot_is_rebased_over_a_projection_that_only_added_files(
        store, config, spark, monkeypatch) -> None:
    upkeep = replace(config, table=TableSettings(compact_min_files=2, compact_after_hours=0))
    run(store, upkeep, spark, "b1", B1)
    run(store, upkeep, spark, "b2", B2)
    stale = open_delta(store, upkeep)  # a compaction read the table here...
    run(store, upkeep, spark, "b3", [ev("c9", 3)])  # ...then b3's projection added a file (hour 03)
    from eventdedup.delta import upkeep as upkeep_module
    monkeypatch.setattr(upkeep_module, "open_table", lambda *_: stale)
    hour_4 = {path: info for path, info in projection.table_files(stale).items() if info["partition"]["hour"] == "4"}
    assert len(hour_4) >= 2
    monkeypatch.setattr(upkeep_module, "table_files", lambda _: hour_4)
    report = upkeep_module.UpkeepReport()
    upkeep_module.compact(store, upkeep, report)
    assert report.compacted == ["2026-11-22/04"] and report.gave_way == []  # rebased by delta-rs, not refused
    assert table_ids(open_delta(store, upkeep)) == expected_ids(B1, B2, [ev("c9", 3)])
