"""The ingestion ledger kept in parts (eventdedup.commit.ledger): each checkpoint writes the
entries of the commits since the one before as one part; loading the state reads no part; a
lookup reads only the parts that can hold its object; a retracted commit's entries in a part
count for nothing; a missing part is rebuilt from the log; parts leave with the horizon."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson

from eventdedup.commit.changes import BatchChange, Retraction
from eventdedup.commit.ledger import LedgerEntry, LedgerUpdate
from eventdedup.commit.ledger_reader import LedgerReader
from eventdedup.commit.log import load_committed_state, read_commit, write_checkpoint_if_due, write_commit
from eventdedup.commit.records import CommitRecord
from eventdedup.commit.state import CommittedState
from eventdedup.counts import BatchCounts
from eventdedup.inputs.manifest import load_batch_manifest
from eventdedup.inputs.selector import InputSelector
from eventdedup.keys import hour_index_at
from eventdedup.layout import Layout
from eventdedup.ops.pipeline import run_batch
from eventdedup.s3store import ObjectInfo, S3Store, make_client
from eventdedup_dev.s3_fault_proxy import FaultProxy

from ..support.helpers import NOW, make_config, put_lines

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats"
T0 = datetime(2026, 11, 22, 0, tzinfo=timezone.utc)
H0 = hour_index_at(T0)


def consumed_by(version: int) -> tuple[ObjectInfo, ObjectInfo]:
    """What commit `version` consumed (at hour H0 + version): two objects dated 10 minutes before."""
    dated = T0 + timedelta(hours=version, minutes=-10)
    return tuple(ObjectInfo(f"landing/{version}-{n}.jsonl", 10, f'"e{version}{n}"', last_modified=dated)
                 for n in range(2))  # type: ignore[return-value]


def fold(store: S3Store, layout: Layout, versions: range, state: CommittedState | None = None,
         horizon: int | None = None) -> CommittedState:
    """Commits consuming consumed_by(version) each, checkpointed every 3 as the promoter does."""
    state = state or CommittedState()
    for version in versions:
        as_of = T0 + timedelta(hours=version)
        inputs = consumed_by(version)
        dated = tuple(hour_index_at(info.last_modified) for info in inputs if info.last_modified is not None)
        record = CommitRecord(version, f"b{version}", state.last_batch_id, "t", as_of.isoformat(), BatchCounts(), (),
                              {}, BatchChange(ledger_update=LedgerUpdate(inputs, horizon, dated_hours=dated),
                                              arrival_hour=H0 + version))
        write_commit(store, layout, record)
        state = write_checkpoint_if_due(store, layout, state.apply(record, layout.commit(version)), 3)
    return state


def test_parts_are_written_at_checkpoints_and_a_lookup_reads_only_those_that_can_hold_its_object(
        s3_server, bucket) -> None:
    with FaultProxy(s3_server.endpoint_url) as proxy:
        config = make_config(proxy.endpoint_url, bucket)
        store, layout = S3Store(make_client(config.s3), bucket), Layout(config.layout)
        fold(store, layout, range(1, 12))
        proxy.arm(None)
        state = load_committed_state(store, layout)
        assert not [request for request in proxy.requests if "/ledger/" in request]  # loading reads no part
        assert [(part.first_version, part.last_version, part.min_hour - H0, part.max_hour - H0, part.entries,
                 part.min_dated - H0, part.max_dated - H0, part.undated)  # type: ignore[operator]
                for part in state.ledger.parts] == [(1, 3, 1, 3, 6, 0, 2, 0), (4, 6, 4, 6, 6, 3, 5, 0),
                                                    (7, 9, 7, 9, 6, 6, 8, 0)]
        assert sorted(state.ledger.recent) == sorted(info.key for v in (10, 11) for info in consumed_by(v))

        reader = LedgerReader(store, state.ledger, layout)
        newest, older = consumed_by(9)[0], consumed_by(2)[1]
        assert reader.consumed_before(newest, 12) == LedgerEntry(newest.etag, 9, H0 + 9, H0 + 8)
        # Dated 08:50: only the part whose objects are dated over hour 8 is read.
        assert [request.split(" ")[1].split("/", 2)[2] for request in proxy.requests if "/ledger/" in request] == [
            layout.ledger_part(7, 9)]
        assert reader.consumed_before(older, 12) == LedgerEntry(older.etag, 2, H0 + 2, H0 + 1)
        assert reader.consumed_before(older, 2) is None  # not before commit 2 itself
        never = ObjectInfo("landing/never.jsonl", 1, '"n"', last_modified=T0)
        assert reader.consumed_before(never, 12) is None
        assert reader.entries() == {info.key: LedgerEntry(info.etag, v, H0 + v, H0 + v - 1) for v in range(1, 12)
                                    for info in consumed_by(v)}


def test_a_retracted_commits_entries_in_a_part_count_for_nothing(s3_server, bucket) -> None:
    config = make_config(s3_server.endpoint_url, bucket)
    store, layout = S3Store(s3_server.client(), bucket), Layout(config.layout)
    state = fold(store, layout, range(1, 5))
    ledger = state.ledger.without_versions({2})
    assert ledger.dropped_versions == (2,)
    reader = LedgerReader(store, ledger, layout)
    assert [reader.consumed_before(info, 9) is None for v in (1, 2, 4) for info in consumed_by(v)] == [
        False, False, True, True, False, False]


def test_a_missing_part_is_rebuilt_from_the_commits_it_was_written_from(s3_server, bucket, caplog) -> None:
    config = make_config(s3_server.endpoint_url, bucket)
    store, layout = S3Store(s3_server.client(), bucket), Layout(config.layout)
    fold(store, layout, range(1, 8))
    store.delete_keys([layout.ledger_part(1, 3)])
    state = load_committed_state(store, layout)
    assert LedgerReader(store, state.ledger, layout).entries() == {
        info.key: LedgerEntry(info.etag, v, H0 + v, H0 + v - 1) for v in range(1, 8) for info in consumed_by(v)}
    assert "is missing: rebuilding it from commits 1 to 3" in caplog.text


def test_a_part_leaves_the_state_once_its_hours_are_before_the_horizon_and_its_commits_left(s3_server, bucket) -> None:
    config = make_config(s3_server.endpoint_url, bucket)
    store, layout = S3Store(s3_server.client(), bucket), Layout(config.layout)
    state = fold(store, layout, range(1, 7))
    # The horizon moves past hours 1-3; the commits of the first part must also have left the state.
    assert [part.last_version for part in state.ledger.pruned(2).parts] == [3, 6]  # commit 3 is still in the state
    moved = state.ledger.with_update(LedgerUpdate((), H0 + 4), 7, H0 + 7)
    assert [part.last_version for part in moved.pruned(2).parts] == [3, 6]
    assert [part.last_version for part in moved.pruned(3).parts] == [6]
    assert LedgerReader(store, moved.pruned(3), layout).entries() == {
        info.key: LedgerEntry(info.etag, v, H0 + v, H0 + v - 1) for v in range(4, 7) for info in consumed_by(v)}


def test_an_entry_whose_commit_did_not_record_dates_is_found_by_every_lookup(s3_server, bucket) -> None:
    """A commit from before 2026-11-26 recorded no LastModified hours: its part is read by every
    lookup, whatever the object's date (here, days after the commit: no clock is trusted)."""
    config = make_config(s3_server.endpoint_url, bucket)
    store, layout = S3Store(s3_server.client(), bucket), Layout(config.layout)
    state = CommittedState()
    undated = ObjectInfo("landing/old.jsonl", 1, '"old"')
    record = CommitRecord(1, "b1", None, "t", T0.isoformat(), BatchCounts(), (), {},
                          BatchChange(ledger_update=LedgerUpdate((undated,))))
    write_commit(store, layout, record)
    state = write_checkpoint_if_due(store, layout, state.apply(record, "c1"), 1)
    state = fold(store, layout, range(2, 4), state)
    assert [(part.undated, part.min_dated) for part in state.ledger.parts] == [(1, None), (0, H0 + 1)]
    listed = ObjectInfo(undated.key, 1, undated.etag, last_modified=T0 + timedelta(days=3))
    reader = LedgerReader(store, state.ledger, layout)
    assert reader.consumed_before(listed, 4) == LedgerEntry('"old"', 1, H0, None)


def test_a_format_2_checkpoint_is_read_and_its_entries_become_the_next_checkpoints_part(s3_server, bucket) -> None:
    """A checkpoint written by aef365a (tests/fixtures/formats/v2/written_by.py): b1 took a (a1)
    and b, b2 took c, b3 took a re-uploaded (a2), b2 was retracted."""
    config = make_config(s3_server.endpoint_url, bucket)
    store, layout = S3Store(s3_server.client(), bucket), Layout(config.layout)
    store.put_bytes(layout.checkpoint(4), (FIXTURES / "v2" / "checkpoint.json.gz").read_bytes())
    store.put_bytes(layout.last_checkpoint, b'{"version": 4}')
    state = load_committed_state(store, layout)
    a1, a2 = ObjectInfo("landing/a.jsonl", 1, '"a1"'), ObjectInfo("landing/a.jsonl", 2, '"a2"')
    b, c = ObjectInfo("landing/b.jsonl", 1, '"b"'), ObjectInfo("landing/c.jsonl", 1, '"c"')
    expected = {a2: LedgerEntry('"a2"', 3, H0 + 3, None), b: LedgerEntry('"b"', 1, H0 + 1, None), a1: None, c: None}
    reader = LedgerReader(store, state.ledger, layout)
    assert {info: reader.consumed_before(info, 5) for info in expected} == expected
    state = fold(store, layout, range(5, 7), state)  # the checkpoint at 6 writes them as a part
    assert [(part.first_version, part.last_version, part.undated) for part in state.ledger.parts] == [(1, 6, 2)]
    reader = LedgerReader(store, load_committed_state(store, layout).ledger, layout)
    assert {info: reader.consumed_before(info, 7) for info in expected} == expected


def test_a_rebuilt_part_leaves_out_what_a_retraction_in_its_range_took_out(s3_server, bucket) -> None:
    config = make_config(s3_server.endpoint_url, bucket)
    store, layout = S3Store(s3_server.client(), bucket), Layout(config.layout)
    state = fold(store, layout, range(1, 3))
    retraction = CommitRecord(3, "retract-b2", "b2", "t", (T0 + timedelta(hours=3)).isoformat(), BatchCounts(), (),
                              {}, Retraction(("b2",), "test", retracted_versions=(2,)))
    write_commit(store, layout, retraction)
    state = write_checkpoint_if_due(store, layout, state.apply(retraction, "c3"), 3)
    assert [(part.first_version, part.last_version) for part in state.ledger.parts] == [(1, 3)]
    store.delete_keys([layout.ledger_part(1, 3)])
    reader = LedgerReader(store, load_committed_state(store, layout).ledger, layout)
    assert [reader.consumed_before(info, 4) is None for v in (1, 2) for info in consumed_by(v)] == [
        False, False, True, True]  # b2's objects are new input again, as before the part was lost


def test_the_same_bytes_uploaded_again_later_are_new_input_whatever_was_read_before(s3_server, bucket) -> None:
    """S3 dates an object version once: an upload of the same bytes hours later (a producer's
    retry, a copy in place) is another version, and the answer does not depend on which parts
    a reader happened to read first."""
    config = make_config(s3_server.endpoint_url, bucket)
    store, layout = S3Store(s3_server.client(), bucket), Layout(config.layout)
    state = fold(store, layout, range(1, 8))
    original = consumed_by(1)[0]
    again = ObjectInfo(original.key, original.size, original.etag, last_modified=T0 + timedelta(hours=5, minutes=30))
    fresh = LedgerReader(store, state.ledger, layout)
    warmed = LedgerReader(store, state.ledger, layout)
    assert warmed.consumed_before(original, 8) == LedgerEntry(original.etag, 1, H0 + 1, H0)
    assert fresh.consumed_before(again, 8) is None and warmed.consumed_before(again, 8) is None


def test_two_checkpoints_of_one_version_from_different_loads_keep_both_parts(s3_server, bucket) -> None:
    """Promoters that loaded the state on either side of checkpoint 3 both write checkpoint 6:
    their parts have other ranges, so other names, and whichever checkpoint lands last is whole."""
    config = make_config(s3_server.endpoint_url, bucket)
    store, layout = S3Store(s3_server.client(), bucket), Layout(config.layout)
    fold(store, layout, range(1, 7))  # checkpoints 3 and 6: parts 1-3 and 4-6
    unfolded = CommittedState()
    for version in range(1, 7):  # a promoter that loaded before checkpoint 3 was written
        record = read_commit(store, layout, version)
        assert record is not None
        unfolded = unfolded.apply(record, f"c{version}")
    written = write_checkpoint_if_due(store, layout, unfolded, 6)
    assert [(part.first_version, part.last_version) for part in written.ledger.parts] == [(1, 6)]
    for parts in ([layout.ledger_part(1, 3), layout.ledger_part(4, 6)], [layout.ledger_part(1, 6)]):
        assert all(store.head(key) is not None for key in parts)
    expected = {info.key: LedgerEntry(info.etag, v, H0 + v, H0 + v - 1) for v in range(1, 7) for info in consumed_by(v)}
    assert LedgerReader(store, load_committed_state(store, layout).ledger, layout).entries() == expected


def test_a_staged_batch_records_its_inputs_hours_and_its_commits_parts_are_dated(s3_server, bucket, spark) -> None:
    """Through the real staging and job: the manifest records each input's LastModified hour,
    the commit carries it, and the checkpoint's part is dated by it (read by the lookups of its
    hours only)."""
    config = make_config(s3_server.endpoint_url, bucket)  # a checkpoint every 3 commits
    store, layout = S3Store(s3_server.client(), bucket), Layout(config.layout)
    for number in range(1, 4):
        put_lines(store, f"landing/b{number}/1.jsonl", [orjson.dumps({"event_id": f"e{number}",
                                                                       "created_at": "2026-11-22T05:10:00Z"})])
        run_batch(store, config, f"b{number}", InputSelector(input_prefix=f"landing/b{number}/"), NOW, lambda: spark)
    listed = {info.key: info for info in store.list("landing/")}
    hours = {key: hour_index_at(info.last_modified) for key, info in listed.items() if info.last_modified}
    manifest = load_batch_manifest(store, layout, "b2")
    assert manifest.input_hours == (hours["landing/b2/1.jsonl"],)
    record = read_commit(store, layout, 2)
    assert record is not None and record.batch_change is not None and record.batch_change.ledger_update is not None
    assert record.batch_change.ledger_update.dated_hours == (hours["landing/b2/1.jsonl"],)
    (part,) = load_committed_state(store, layout).ledger.parts
    assert (part.undated, part.min_dated, part.max_dated) == (0, min(hours.values()), max(hours.values()))
