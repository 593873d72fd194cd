"""The commit log on a real S3 server: conditional creation, lost responses, checkpoints."""
from __future__ import annotations

import pytest

from eventdedup.commit.log import load_committed_state, read_commit, write_checkpoint_if_due, write_commit
from eventdedup.commit.records import CommitRecord, PromotedObject
from eventdedup.commit.state import CommittedState
from eventdedup.counts import BatchCounts
from eventdedup.errors import CommitConflictError, CorruptStateError
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store
from eventdedup_dev.s3_requests import first_request

from ..support.s3_faults import CrashingClient, SimulatedCrash


def record(version: int, batch_id: str, previous: str | None, token: str = "t") -> CommitRecord:
    return CommitRecord(version, batch_id, previous, token, "2026-11-22T06:00:00+00:00",
                        BatchCounts(output_rows=version),
                        (PromotedObject("data", f"deduped/{batch_id}.parquet", 10, '"etag"', 1),),
                        {f"2026-11-22/0{version % 10}/0001": f"cache/{batch_id}.seg"})


def commit_many(store: S3Store, layout: Layout, count: int, interval: int) -> CommittedState:
    state = CommittedState()
    for version in range(1, count + 1):
        rec = record(version, f"b{version}", state.last_batch_id)
        write_commit(store, layout, rec)
        state = state.apply(rec, "test")
        write_checkpoint_if_due(store, layout, state, interval)
    return state


def test_a_commit_version_can_be_created_once_and_the_loser_is_told_who_won(store, config) -> None:
    layout = Layout(config.layout)
    write_commit(store, layout, record(1, "b1", None, token="mine"))
    with pytest.raises(CommitConflictError, match="log version 1 .* was committed by batch b1 while this promotion ran"):
        write_commit(store, layout, record(1, "b2", None, token="theirs"))
    assert read_commit(store, layout, 1) == record(1, "b1", None, token="mine")


def test_a_commit_whose_response_was_lost_is_recognised_by_its_token(store, config) -> None:
    layout = Layout(config.layout)
    lossy = S3Store(CrashingClient(store.client, first_request(lambda r: True, "the first call"), flavour="lose_response"), store.bucket)
    with pytest.raises(SimulatedCrash):
        write_commit(lossy, layout, record(1, "b1", None, token="tok-1"))
    write_commit(store, layout, record(1, "b1", None, token="tok-1"))  # the retry: no conflict
    with pytest.raises(CommitConflictError, match="another promoter committed it as log version 1"):
        write_commit(store, layout, record(1, "b1", None, token="tok-2"))


def test_loading_state_costs_a_constant_number_of_requests_whatever_the_history(store, config) -> None:
    layout = Layout(config.layout)
    expected = commit_many(store, layout, 47, interval=10)
    counting = CrashingClient(store.client, None)
    state = load_committed_state(S3Store(counting, store.bucket), layout)
    assert state == expected
    assert state.batches == {f"b{v}": v for v in range(1, 48)}
    # pointer + checkpoint 40 + one LIST + commits 41..47
    assert [request.verb for request in counting.calls].count("LIST") == 1
    assert len(counting.calls) == 2 + 1 + 7


def test_a_lost_checkpoint_pointer_only_costs_replay(store, config) -> None:
    layout = Layout(config.layout)
    expected = commit_many(store, layout, 12, interval=5)
    store.delete_keys([layout.last_checkpoint])
    assert load_committed_state(store, layout) == expected


@pytest.mark.parametrize("damage", [b"{not json", b'{"format": 1, "version": 2}', b""])
def test_a_commit_record_that_does_not_parse_halts_with_its_name(store, config, damage: bytes) -> None:
    layout = Layout(config.layout)
    commit_many(store, layout, 3, interval=100)
    store.put_bytes(layout.commit(2), damage)
    with pytest.raises(CorruptStateError, match=f"s3://{store.bucket}/_eventdedup/log/0+2.json"):
        load_committed_state(store, layout)


def test_a_gap_in_the_log_is_detected(store, config) -> None:
    layout = Layout(config.layout)
    commit_many(store, layout, 3, interval=100)
    store.delete_keys([layout.commit(2)])
    with pytest.raises(CorruptStateError, match="does not follow version 1"):
        load_committed_state(store, layout)


def test_a_garbage_checkpoint_halts_instead_of_reading_empty_state(store, config) -> None:
    layout = Layout(config.layout)
    commit_many(store, layout, 4, interval=2)
    store.put_bytes(layout.checkpoint(4), b"garbage")
    with pytest.raises(CorruptStateError, match="checkpoint .*0+4.json.gz does not parse"):
        load_committed_state(store, layout)


def test_a_conditional_replace_writes_only_over_the_version_it_names(store) -> None:
    """put_if_match on the real S3 protocol server: the object as read is replaced; one replaced
    meanwhile, or gone, is left as it is (None)."""
    first = store.put_bytes("manifests/x.manifest", b"first")
    second = store.put_if_match("manifests/x.manifest", b"second", first.etag)
    assert second is not None and store.get_bytes("manifests/x.manifest") == b"second"
    assert store.put_if_match("manifests/x.manifest", b"third", first.etag) is None  # changed since
    assert store.get_bytes("manifests/x.manifest") == b"second"
    assert store.put_if_match("manifests/gone.manifest", b"x", second.etag) is None
    assert store.head("manifests/gone.manifest") is None
