"""The embedded store kept for weeks (issue 55): its keeper's budget, vacuum, guard, log and stop,
first as rules (milliseconds, no store), then against the real store: deleted space comes back
by the keeper's vacuum, a reduced put/copy/delete churn loses no write and is reclaimed to its disk
bound (a write waits for the vacuum while the disk is over it), slots and a full filesystem (a tmpfs the test mounts) give clear errors and lose no
acknowledged object, a restart ignores the empty volume files a failed write leaves, the filer's
change log is pruned, and `eventdedup-dev local-s3` says where its data and log are. The pipeline
under a refused write: tests/devtools/test_local_s3_full_disk_batch.py; the 20 GiB churn and the
300-batch soak: tests/devtools/test_store_soak.py (`make soak-store`)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
from botocore.exceptions import ClientError

from eventdedup_dev import local_s3
from eventdedup_dev.local_s3 import (
    GIB,
    HOLD_SECONDS,
    MIB,
    RESERVED_SLOTS,
    STOP_GRACE_SECONDS,
    VACUUM_PARALLEL,
    LocalS3Process,
    Refusal,
    StoreBudget,
    StoreGuard,
    StoreLog,
    StoreState,
    is_new_write,
    parse_size,
    port_is_free,
    vacuum_reason,
)

from .store_churn import (
    allocated_bytes,
    churn,
    fill,
    free_bytes,
    small_filesystems,
    store_client,
    unreadable,
)


def fake_statvfs(total: int, free: int) -> object:
    return lambda _: SimpleNamespace(f_blocks=total // 4096, f_bavail=free // 4096, f_frsize=4096)


# ---------------------------------------------------------------- rules


def test_slots_are_sized_from_free_space_so_they_run_out_above_the_floor(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(local_s3.os, "statvfs", fake_statvfs(100 * GIB, 40 * GIB))
    budget = StoreBudget.for_directory(tmp_path, min_free=GIB, volume_mb=64)
    # 1 % of the filesystem plus the volumes a vacuum rewrites at once is above the 1 GiB asked:
    # weed's own reserve is 1 %
    assert budget.floor_bytes == GIB + VACUUM_PARALLEL * 64 * MIB
    data_slots = budget.slots - RESERVED_SLOTS
    assert data_slots == (40 * GIB - budget.floor_bytes - 2 * 64 * MIB) // (64 * MIB)
    assert 40 * GIB - data_slots * 64 * MIB >= budget.floor_bytes + 2 * 64 * MIB  # full slots leave the floor free
    assert StoreBudget.for_directory(tmp_path, min_free=5 * GIB).floor_bytes == 5 * GIB

    # Volumes already on disk are part of the budget; a data file shorter than its superblock is
    # what a failed create leaves, not a volume.
    (tmp_path / "events_1.dat").write_bytes(b"\0" * (64 * MIB))
    (tmp_path / "7.dat").write_bytes(b"")
    again = StoreBudget.for_directory(tmp_path, min_free=GIB, volume_mb=64)
    assert again.held_bytes == 64 * MIB and again.slots == budget.slots + 1

    monkeypatch.setattr(local_s3.os, "statvfs", fake_statvfs(100 * GIB, GIB))  # less free than the floor
    assert StoreBudget.for_directory(tmp_path, min_free=GIB).slots == 1 + RESERVED_SLOTS  # its volume, no more


def state(reclaimable: dict[int, tuple[int, int]] | None = None, **figures: int) -> StoreState:
    values = {"free_bytes": 50 * GIB, "volume_bytes": GIB, "garbage_bytes": 0, "volumes": 16, "free_slots": 500,
              **figures}
    return StoreState(**values, writable_collections=frozenset({"events"}),  # type: ignore[arg-type]
                      reclaimable=reclaimable or {})


BUDGET = StoreBudget(volume_bytes=64 * MIB, floor_bytes=2 * GIB, slots=700, free_bytes=50 * GIB,
                     total_bytes=100 * GIB, held_bytes=0)
SOME = {1: (0, 10 * MIB)}  # volume 1 (never compacted) holds 10 MiB a pass would reclaim
LOTS = {1: (3, 200 * MIB), 2: (0, 100 * MIB)}


@pytest.mark.parametrize("reclaimable, figures, since_last, left, reason", [
    ({}, {}, 10_000, {}, None),  # no garbage: nothing to do, however long ago
    (SOME, {}, 299, {}, None),
    (SOME, {}, 300, {}, "interval"),
    (LOTS, {"volume_bytes": 400 * MIB}, 1, {}, "garbage"),  # over 2 volumes and a quarter of the live data
    ({1: (0, GIB)}, {"volume_bytes": 6 * GIB}, 1, {}, None),  # under a quarter of the live data (5 GiB)
    ({1: (0, 2 * GIB)}, {"volume_bytes": 6 * GIB}, 1, {}, "garbage"),
    ({2: (0, 100 * MIB)}, {"volume_bytes": 400 * MIB}, 1, {}, None),  # under 2 volumes
    (LOTS, {"volume_bytes": 400 * MIB}, 1, {1: 3, 2: 0}, None),  # the last pass could not compact them
    (LOTS, {"volume_bytes": 400 * MIB}, 1, {1: 2, 2: 0}, "garbage"),  # volume 1 changed since: counted again
    (LOTS, {"volume_bytes": 400 * MIB}, 300, {1: 3, 2: 0}, "interval"),  # tried again on the interval
    (SOME, {"free_bytes": 2 * GIB + MIB}, 1, {}, "space"),
    (SOME, {"free_slots": RESERVED_SLOTS + 1}, 1, {}, "slots"),
    (SOME, {"free_slots": RESERVED_SLOTS + 1}, 1, {1: 0}, None),
])
def test_vacuum_runs_on_garbage_space_slots_and_time(reclaimable, figures, since_last, left, reason) -> None:
    assert vacuum_reason(state(reclaimable, **figures), BUDGET, since_last, 300, left) == reason


def test_a_pass_leaves_only_the_volumes_it_did_not_compact() -> None:
    before = state({1: (0, 100 * MIB), 2: (4, 50 * MIB)})
    after = state({1: (1, 30 * MIB), 2: (4, 50 * MIB), 3: (0, 64 * MIB)})  # 1 compacted, 3 new garbage
    assert after.left_by(before) == {2: 4}


@pytest.mark.parametrize("method, path, write", [
    ("PUT", "/events/landing/a.jsonl", True), ("PUT", "/events/a?partNumber=1&uploadId=x", True),
    ("PUT", "/new-bucket", True), ("POST", "/events/a?uploads", True),
    ("POST", "/events?delete", False), ("POST", "/events/a?uploadId=x", False),
    ("GET", "/events/a", False), ("HEAD", "/events/a", False), ("DELETE", "/events/a", False),
])
def test_new_writes_are_puts_and_posts_that_add_data(method, path, write) -> None:
    assert is_new_write(method, path) is write


def test_sizes_are_read_as_people_write_them() -> None:
    assert [parse_size(text) for text in ("2GiB", "2G", "500MB", "1.5g", "1048576")] == [
        2 * GIB, 2 * GIB, 500 * MIB, 3 * GIB // 2, MIB]
    with pytest.raises(ValueError, match="not a size"):
        parse_size("lots")


class FakeUpkeep:
    def __init__(self, current: StoreState, vacuuming: bool = False) -> None:
        self.state, self.vacuuming, self.nudged, self.refused = current, vacuuming, 0, []

    def nudge(self) -> None:
        self.nudged += 1

    def count_refusal(self, kind: str) -> None:
        self.refused.append(kind)

    def reclaimable_now(self) -> int:
        return self.state.reclaimable_bytes


def test_the_guard_refuses_new_writes_below_the_floor_naming_the_directory_and_the_space(tmp_path,
                                                                                        monkeypatch) -> None:
    upkeep = FakeUpkeep(state())
    guard = StoreGuard(tmp_path, BUDGET, upkeep)  # type: ignore[arg-type]
    monkeypatch.setattr(local_s3.os, "statvfs", fake_statvfs(100 * GIB, 2 * GIB + 64 * MIB))
    assert guard.refusal("PUT", "/events/a") is None
    monkeypatch.setattr(local_s3.os, "statvfs", fake_statvfs(100 * GIB, GIB + GIB // 2))
    refused = guard.refusal("PUT", "/events/a")
    assert refused == Refusal(507, "InsufficientStorage", refused.message)  # type: ignore[union-attr]
    assert f"{tmp_path} has 1.5 GiB free, below the store's floor of 2.0 GiB" in refused.message  # type: ignore[union-attr]
    for method, path in (("GET", "/events/a"), ("DELETE", "/events/a"), ("POST", "/events?delete")):
        assert guard.refusal(method, path) is None  # reads and deletes always pass
    assert upkeep.refused == ["floor"] and upkeep.nudged == 1
    # Garbage a vacuum can reclaim: a retryable 503, while the keeper vacuums.
    upkeep.state = state({1: (0, GIB)}, garbage_bytes=GIB)
    assert guard.refusal("PUT", "/events/a").status == 503  # type: ignore[union-attr]


def test_the_guard_refuses_a_write_needing_a_slot_when_none_is_left(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(local_s3.os, "statvfs", fake_statvfs(100 * GIB, 20 * GIB))
    upkeep = FakeUpkeep(state(free_slots=RESERVED_SLOTS))
    guard = StoreGuard(tmp_path, BUDGET, upkeep)  # type: ignore[arg-type]
    assert guard.refusal("PUT", "/events/a") is None  # its bucket has a volume with room
    refused = guard.refusal("PUT", "/other/a")
    assert refused is not None and refused.status == 507
    assert "volume slots of 64.0 MiB are taken" in refused.message and "a restart sizes them again" in refused.message


class PassingUpkeep(FakeUpkeep):
    """A keeper whose vacuum passes take `pass_seconds` of an injected clock and leave the data
    directory at `after` bytes once `passes_needed` have run."""

    def __init__(self, current: StoreState, clock: list[float], disk: list[int], after: int,
                 pass_seconds: float = 2.0, passes_needed: int = 1) -> None:
        super().__init__(current)
        self.clock, self.disk, self.after = clock, disk, after
        self.pass_seconds, self.passes_needed, self.asked, self.held = pass_seconds, passes_needed, 0, []
        self.readings = 0
        self.into_pass = 0.0

    def ask_for_pass(self) -> None:
        self.asked += 1

    def wait_for_pass(self, timeout: float) -> None:
        waited = min(timeout, self.pass_seconds - self.into_pass)
        self.clock[0] += waited
        self.into_pass += waited
        if self.into_pass >= self.pass_seconds:  # a pass ended, and the store was read again
            self.into_pass, self.passes_needed, self.readings = 0.0, self.passes_needed - 1, self.readings + 1
            if self.passes_needed <= 0:
                self.disk[0] = self.after

    def count_hold(self, seconds: float) -> None:
        self.held.append(seconds)


def test_a_write_waits_for_the_vacuum_while_the_data_directory_is_over_its_bound(tmp_path, monkeypatch) -> None:
    clock, disk = [0.0], [0]
    monkeypatch.setattr(local_s3, "allocated_bytes", lambda _: disk[0])
    live = 200 * MIB
    reclaimable = state({1: (0, 300 * MIB)}, volume_bytes=live + 300 * MIB, garbage_bytes=300 * MIB)
    upkeep = PassingUpkeep(reclaimable, clock, disk, after=live + 64 * MIB)
    guard = StoreGuard(tmp_path, BUDGET, upkeep, clock=lambda: clock[0])  # type: ignore[arg-type]
    limit = BUDGET.hold_above(live)
    assert limit == 2 * live + BUDGET.reserve_bytes == BUDGET.disk_bound(live) - live

    disk[0] = limit  # at the limit: not held
    assert guard.hold() == 0 and upkeep.asked == 0
    disk[0] = limit + MIB  # over it: held for the pass, which brings it under
    clock[0] += 1
    assert guard.hold() == 2.0 and upkeep.asked == 2 and upkeep.held == [2.0]  # asked each second

    # Nothing a pass could reclaim: the write waits only for the store to be read again (the keeper
    # reads it at once when asked; here, the fake's 2 s) and goes on: the floor and the slots decide.
    upkeep.state, disk[0], upkeep.after = state(volume_bytes=live), limit + MIB, limit + MIB  # stays over
    clock[0] += 1
    assert guard.hold() == 2.0 and upkeep.held[-1] == 2.0
    # A vacuum that cannot catch up holds a write at most HOLD_SECONDS, under the client's timeout.
    upkeep.state, upkeep.pass_seconds = reclaimable, 4.0
    clock[0] += 1
    assert guard.hold() == pytest.approx(HOLD_SECONDS)
    assert HOLD_SECONDS < 60  # botocore's read timeout


def test_the_store_log_rotates_and_drops_what_it_cannot_write(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(local_s3, "LOG_BYTES", 100)
    store_log = StoreLog(tmp_path / "missing" / "store.log")
    store_log.write(b"first\n")  # its directory is missing: dropped, never raised
    store_log.write(b"second\n")
    (tmp_path / "missing").mkdir()
    for number in range(30):
        store_log.write(b"line %02d\n" % number)
    store_log.close()
    text = (tmp_path / "missing" / "store.log").read_text()
    assert text.endswith("line 29\n") and len(text) <= 100
    first = (tmp_path / "missing" / "store.log.2").read_text()  # rotated twice since
    assert first.startswith("[eventdedup keeper: 2 lines could not be written]\nline 00\n")
    for number in range(40, 70):  # LOG_FILES files in all: the oldest go
        store_log.write(b"line %02d\n" % number)
    assert sorted(path.name for path in (tmp_path / "missing").iterdir()) == [
        "store.log", "store.log.1", "store.log.2", "store.log.3"]
    assert "line 00" not in "".join(path.read_text() for path in (tmp_path / "missing").iterdir())


# ---------------------------------------------------------------- the real store


def volume_bytes(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.glob("*.dat"))


def wait_for(what: str, check, seconds: float = 90.0):  # type: ignore[no-untyped-def]
    """Poll the store's real state (bounded) until `check()` is truthy."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"not within {seconds:.0f} s: {what}")


def test_deleted_space_comes_back_by_the_keepers_vacuum_within_seconds(tmp_path) -> None:
    with LocalS3Process(data_dir=tmp_path / "data", volume_mb=8) as server:
        client = server.client()
        client.create_bucket(Bucket="churn")
        for number in range(12):
            client.put_object(Bucket="churn", Key=f"o{number}", Body=os.urandom(4 * MIB))
        client.put_object(Bucket="churn", Key="kept", Body=b"kept")
        held = volume_bytes(server.stored_in)
        assert held >= 48 * MIB
        deleted_at = time.monotonic()
        client.delete_objects(Bucket="churn", Delete={"Objects": [{"Key": f"o{n}"} for n in range(12)]})
        # 48 MiB of garbage is over two 8 MiB volumes: vacuumed at once, not 17 minutes later
        wait_for("the garbage vacuumed", lambda: volume_bytes(server.stored_in) < 8 * MIB)
        reclaimed_in = time.monotonic() - deleted_at
        record = wait_for("the pass recorded", lambda: server.upkeep().get("vacuums") and server.upkeep())
        assert record["vacuums"] and record["vacuums"][0]["reason"] == "garbage"
        assert record["vacuums"][0]["garbage_before"] >= 48 * MIB > 8 * MIB > record["vacuums"][0]["garbage_after"]
        assert client.get_object(Bucket="churn", Key="kept")["Body"].read() == b"kept"
    print(f"48 MiB deleted: {size(held)} of volumes -> back under 8 MiB in {reclaimed_in:.1f} s")


def test_a_little_garbage_is_vacuumed_on_the_interval(tmp_path) -> None:
    """Under the garbage trigger, the interval (here 2 s: injected, not waited for) still vacuums it."""
    with LocalS3Process(data_dir=tmp_path / "data", volume_mb=8, vacuum_every=2) as server:
        client = server.client()
        client.create_bucket(Bucket="little")
        client.put_object(Bucket="little", Key="a", Body=os.urandom(3 * MIB))
        client.delete_object(Bucket="little", Key="a")
        record = wait_for("an interval vacuum", lambda: [v for v in server.upkeep().get("vacuums", [])
                                                         if v["reason"] == "interval" and v["garbage_before"]])
        assert record[0]["garbage_before"] >= 3 * MIB > record[0]["garbage_after"]


def size(count: float) -> str:
    return local_s3.size_text(count)


def test_a_put_copy_delete_churn_loses_no_write_and_is_reclaimed_to_its_disk_bound(tmp_path) -> None:
    """384 MiB put, copied and deleted by 4 writers on 16 MiB volumes: no write fails, the keeper
    reclaims the garbage to within 3 x the live data plus the slots' reserve within seconds of the
    churn's end, and every acknowledged object survives a stop (within seconds) and a restart.
    During the churn, at tens of MB/s on a small host, the disk exceeds that bound at peaks (the
    deleted data of the last seconds awaits the next pass): the worst sample is printed, and the
    20 GiB soak (`make soak-store`) asserts and reports it."""
    with LocalS3Process(data_dir=tmp_path / "data", volume_mb=16) as server:
        server.client().create_bucket(Bucket="churn")
        run = churn(server, "churn", total=384 * MIB, keep=20)
        assert server.budget is not None
        reserve = server.budget.reserve_bytes
        at, disk, live = run.worst(reserve)
        assert run.failures == []
        assert run.bytes_put >= 384 * MIB
        wait_for("the garbage reclaimed to the bound",
                 lambda: allocated_bytes(server.stored_in) <= 3 * run.live_bytes + reserve, seconds=60)
        record = server.upkeep()
        print(f"churned {size(run.bytes_put)} put + copied in {run.seconds} s ({run.objects} objects); "
              f"worst sample at {at} s: {size(disk)} on disk for {size(live)} live (bound {size(3 * live + reserve)}); "
              f"{record['vacuum_passes']} vacuum passes, {record['held_writes']} writes held")
        assert record["vacuum_passes"] >= 2
        stopping = time.monotonic()
        server.stop()
        stopped_in = time.monotonic() - stopping
        assert stopped_in < STOP_GRACE_SECONDS + 3
        server.start()
        assert unreadable(server, "churn", run.kept) == []


def put_succeeds(client, bucket: str, key: str, body: bytes) -> bool:  # type: ignore[no-untyped-def]
    try:
        client.put_object(Bucket=bucket, Key=key, Body=body)
    except ClientError as exc:
        assert exc.response["Error"]["Code"] in ("SlowDown", "InsufficientStorage"), exc
        return False
    return True


def test_when_slots_run_out_writes_get_a_clear_error_and_deletes_make_room_again(tmp_path) -> None:
    with small_filesystems(tmp_path) as mount:
        disk = mount("slots", 160)
        with LocalS3Process(data_dir=disk / "data", log_dir=tmp_path / "logs", volume_mb=8,
                            min_free=16 * MIB) as server:
            budget = server.budget
            assert budget is not None and budget.slots - RESERVED_SLOTS < 15  # sized from 160 MiB, not 1000
            client = store_client(server)
            client.create_bucket(Bucket="slots")
            body, written = os.urandom(2 * MIB), []
            with pytest.raises(ClientError) as refused:
                for number in range(200):
                    client.put_object(Bucket="slots", Key=f"o{number}", Body=body)
                    written.append(f"o{number}")
            error = refused.value.response["Error"]
            assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 507, error
            assert error["Code"] == "InsufficientStorage" and "volume slots" in error["Message"], error
            assert str(disk / "data") in error["Message"]
            assert free_bytes(disk) > budget.floor_bytes  # the slots ran out first, the disk still has its floor
            client.delete_objects(Bucket="slots", Delete={"Objects": [{"Key": key} for key in written[:20]]})
            # The deletes are reclaimed by the keeper's vacuum; a write meanwhile is told to retry (503).
            wait_for("a write after the deletes", lambda: put_succeeds(client, "slots", "again", body))
            assert all(client.head_object(Bucket="slots", Key=key)["ContentLength"] == len(body)
                       for key in written[20:])


def test_a_full_filesystem_refuses_writes_clearly_loses_nothing_and_restarts_once_freed(tmp_path) -> None:
    with small_filesystems(tmp_path) as mount:
        disk = mount("full", 128)
        logs = tmp_path / "logs"  # on another filesystem than the data
        server = LocalS3Process(data_dir=disk / "data", log_dir=logs, volume_mb=8, min_free=40 * MIB)
        with server:
            client = store_client(server)
            client.create_bucket(Bucket="full")
            acknowledged = {f"o{n}": os.urandom(MIB) for n in range(10)}
            for key, body in acknowledged.items():
                client.put_object(Bucket="full", Key=key, Body=body)
            upload = client.create_multipart_upload(Bucket="full", Key="multi")["UploadId"]
            part = os.urandom(5 * MIB)
            etag = client.upload_part(Bucket="full", Key="multi", UploadId=upload, PartNumber=1, Body=part)["ETag"]

            fill(disk, leave=20 * MIB)  # another program takes the disk below the floor (40 MiB)
            for attempt in (lambda: client.put_object(Bucket="full", Key="new", Body=b"x"),
                            lambda: client.copy_object(Bucket="full", Key="copy", CopySource={"Bucket": "full",
                                                                                               "Key": "o1"}),
                            lambda: client.create_multipart_upload(Bucket="full", Key="multi2")):
                asked = time.monotonic()
                with pytest.raises(ClientError) as refused:
                    attempt()
                assert time.monotonic() - asked < 5  # refused at once, not retried
                message = refused.value.response["Error"]["Message"]
                assert refused.value.response["Error"]["Code"] == "InsufficientStorage"
                assert f"{disk / 'data'} has " in message and "below the store's floor of 40.0 MiB" in message
            # What was begun before completes, reads and deletes work.
            client.complete_multipart_upload(Bucket="full", Key="multi", UploadId=upload, MultipartUpload={
                "Parts": [{"ETag": etag, "PartNumber": 1}]})
            assert client.get_object(Bucket="full", Key="o2")["Body"].read() == acknowledged["o2"]
            client.delete_object(Bucket="full", Key="o0")
            del acknowledged["o0"]

            filler = fill(disk, leave=0)  # now nothing at all is left
            with pytest.raises(ClientError) as still:
                client.put_object(Bucket="full", Key="new", Body=b"x")
            assert still.value.response["Error"]["Code"] == "InsufficientStorage"
            stopping = time.monotonic()
        stopped_in = time.monotonic() - stopping  # weed's own stop would wait on its change log's flush
        assert stopped_in < STOP_GRACE_SECONDS + 5
        assert not list((disk / "data").glob("*.log*")) and (logs / "store.log").exists()
        assert "weed stopped in" in (logs / "store.log").read_text()  # logged after the disk filled

        filler.unlink()  # space freed
        with server:  # ready, whatever empty volume files the full disk left
            client = store_client(server)
            for key, body in acknowledged.items():
                assert client.get_object(Bucket="full", Key=key)["Body"].read() == body, key
            assert client.get_object(Bucket="full", Key="multi")["Body"].read() == part
            client.put_object(Bucket="full", Key="after", Body=b"room again")
        print(f"stopped in {stopped_in:.1f} s on the full disk; empty volume files left: "
              f"{[p.name for p in (disk / 'data').glob('*.dat') if p.stat().st_size == 0]}")


def test_a_restart_ignores_empty_volume_files_and_prunes_the_filers_old_change_log(tmp_path) -> None:
    """A volume data file a failed write left empty (or cut before its superblock) does not keep a
    restart from becoming ready; the keeper prunes the filer's change log of days before the last
    META_LOG_DAYS at start (then hourly)."""
    server = LocalS3Process(data_dir=tmp_path / "data")
    with server:
        server.client().create_bucket(Bucket="kept")
        server.client().put_object(Bucket="kept", Key="a", Body=b"a")
        filer = f"http://127.0.0.1:{json.loads((tmp_path / 'data' / 'ports.json').read_text())['base'] + 5}"
        yesterday = (datetime.now(timezone.utc) - timedelta(days=1)).date().isoformat()
        for day in ("2000-01-01", yesterday):  # long gone, and recent
            request = local_s3.urllib.request.Request(f"{filer}/topics/.system/log/{day}/00-00.x", data=b"x",
                                                      method="PUT")
            local_s3.urllib.request.urlopen(request).close()
    # What a volume created on a full disk leaves: its data file, empty (or cut before the superblock)
    (tmp_path / "data" / "17.dat").write_bytes(b"")
    (tmp_path / "data" / "18.dat").write_bytes(b"\x03")
    started = time.monotonic()
    with server:
        assert server.client().get_object(Bucket="kept", Key="a")["Body"].read() == b"a"
        assert time.monotonic() - started < 30

        def days() -> list[str]:
            listing = local_s3.http_json(f"{filer}/topics/.system/log/") or {}
            return sorted(entry["FullPath"].rsplit("/", 1)[-1] for entry in listing.get("Entries") or [])

        wait_for("2000-01-01 pruned", lambda: "2000-01-01" not in days())
        wait_for("the pruning recorded", lambda: server.upkeep().get("meta_log_days_pruned") == 1)
        assert yesterday in days()


def test_the_local_s3_command_says_where_its_data_and_log_are_and_stops_within_seconds(tmp_path) -> None:
    port = next(port for port in range(21991, 21999) if port_is_free(port))
    command = subprocess.Popen([sys.executable, "-m", "eventdedup_dev", "local-s3", "--port", str(port),
                                "--data-dir", str(tmp_path / "data"), "--min-free", "3GiB", "--vacuum-every", "60"],
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        ready, described = command.stdout.readline(), command.stdout.readline()  # type: ignore[union-attr]
        assert ready.startswith(f"local S3 server on http://127.0.0.1:{port}")
        assert described.startswith(f"data in {tmp_path / 'data'}: ") and "writes refused below" in described
        assert f"log in {tmp_path / 'data.logs' / 'store.log'}" in described
        stopping = time.monotonic()
        command.send_signal(signal.SIGTERM)
        assert command.wait(timeout=STOP_GRACE_SECONDS + 10) == 0
        assert time.monotonic() - stopping < STOP_GRACE_SECONDS + 5
    finally:
        if command.poll() is None:
            os.killpg(command.pid, signal.SIGKILL)
    assert allocated_bytes(tmp_path / "data") > 0 and not (tmp_path / "data" / "logs").exists()
