"""Cache expiry deletes exactly what the log says nothing can read, and keeps every rerun inside the window exact."""
from __future__ import annotations

from datetime import timedelta

import pytest

from eventdedup.cache.expiry import expire_cache
from eventdedup.cli import main as cli_main
from eventdedup.commit.log import load_committed_state
from eventdedup.errors import ExpiredHistoryError
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.fsck import fsck
from eventdedup.ops.pipeline import run_batch, verify_rerun

from ..support.helpers import NOW, bucket_listing, make_config, put_lines

E = b'{"event_id":"%s","created_at":"%s"}'


def test_superseded_and_expired_segments_go_heads_inside_the_window_stay(s3_server, bucket, store, spark, tmp_path,
                                                                        capsys) -> None:
    config = make_config(s3_server.endpoint_url, bucket,
                         dedup={"buckets": 1, "window_hours": 3, "checkpoint_interval": 1})
    # b1 arrives at 01:00 and writes hours 00 and 01; b2 at 03:00 adds to hour 01 (superseding
    # b1's segment) and writes 02; b3 at 06:00 writes hour 05. Each writes the id guard of its
    # arrival hour (01, 03, 06: none supersedes another).
    batches = [("b1", NOW - timedelta(hours=5), [E % (b"x", b"2026-11-22T00:10:00Z"), E % (b"y", b"2026-11-22T01:10:00Z")]),
               ("b2", NOW - timedelta(hours=3), [E % (b"z", b"2026-11-22T01:20:00Z"), E % (b"w", b"2026-11-22T02:50:00Z")]),
               ("b3", NOW, [E % (b"v", b"2026-11-22T05:10:00Z")])]
    for batch, as_of, lines in batches:
        put_lines(store, f"landing/{batch}/1.jsonl", lines)
        run_batch(store, config, batch, InputSelector(input_prefix=f"landing/{batch}/"), as_of, lambda: spark)
    segments = sorted(k for k in bucket_listing(store) if k.startswith("_eventdedup/cache/"))
    assert [s.split("cache/")[1] for s in segments] == [
        "date=2026-11-22/hour=00/bucket=0000/b1.seg", "date=2026-11-22/hour=01/bucket=0000/b1.seg",
        "date=2026-11-22/hour=01/bucket=0000/b2.seg", "date=2026-11-22/hour=02/bucket=0000/b2.seg",
        "date=2026-11-22/hour=05/bucket=0000/b3.seg", "guard/date=2026-11-22/hour=01/bucket=0000/b1.guard",
        "guard/date=2026-11-22/hour=03/bucket=0000/b2.guard", "guard/date=2026-11-22/hour=06/bucket=0000/b3.guard"]

    # The log's horizon is the newest window start (b3: 03:00) minus one window: 00:00. Every
    # batch arrived after it, so every head stays; b2's window (from 00:00) is inside it, so its
    # rerun is exact; b1's (from 22:00) is not. Only superseded copies may go.
    report = expire_cache(store, config)
    assert sorted(k.split("cache/")[1] for k in report.superseded) == ["date=2026-11-22/hour=01/bucket=0000/b1.seg"]
    assert report.expired == [] and report.cutoff_hour_start == NOW - timedelta(hours=6)
    assert verify_rerun(store, config, "b2", spark) == [] and verify_rerun(store, config, "b3", spark) == []
    with pytest.raises(ExpiredHistoryError, match=r"batch b1 \(log version 1\) saw cache entries that arrived from"):
        verify_rerun(store, config, "b1", spark)

    # b4 three hours later moves the horizon to 03:00: what b1 (arrived 01:00) wrote alone
    # expires (hour 00, and its arrival hour's guard), and b1 leaves the state; hours 01 and 02
    # were last written by b2, which arrived at 03:00, so they stay, whatever their event hours.
    put_lines(store, "landing/b4/1.jsonl", [E % (b"u", b"2026-11-22T08:10:00Z")])
    run_batch(store, config, "b4", InputSelector(input_prefix="landing/b4/"), NOW + timedelta(hours=3),
              lambda: spark)
    report = expire_cache(store, config, apply=False)
    assert report.cutoff_hour_start == NOW - timedelta(hours=3)
    assert sorted(k.split("cache/")[1] for k in report.expired) == [
        "date=2026-11-22/hour=00/bucket=0000/b1.seg", "guard/date=2026-11-22/hour=01/bucket=0000/b1.guard"]
    assert report.superseded == []
    state = load_committed_state(store, Layout(config.layout))
    # Expiry and the state agree: every head the state holds is kept, no expired one is in it.
    assert sorted(state.cache_heads) == ["2026-11-22/01/0000", "2026-11-22/02/0000", "2026-11-22/05/0000",
                                         "2026-11-22/08/0000", "guard/2026-11-22/03/0000", "guard/2026-11-22/06/0000",
                                         "guard/2026-11-22/09/0000"]
    expire_cache(store, config)
    assert [k.split("cache/")[1] for k in bucket_listing(store) if k.startswith("_eventdedup/cache/")] == [
        "date=2026-11-22/hour=01/bucket=0000/b2.seg", "date=2026-11-22/hour=02/bucket=0000/b2.seg",
        "date=2026-11-22/hour=05/bucket=0000/b3.seg", "date=2026-11-22/hour=08/bucket=0000/b4.seg",
        "guard/date=2026-11-22/hour=03/bucket=0000/b2.guard", "guard/date=2026-11-22/hour=06/bucket=0000/b3.guard",
        "guard/date=2026-11-22/hour=09/bucket=0000/b4.guard"]
    assert verify_rerun(store, config, "b3", spark) == []
    assert set(state.batches) == {"b2", "b3", "b4"}
    # Batches that left the state are still committed: rerunning them is the usual no-op.
    for batch, version in (("b1", 1), ("b2", 2)):
        outcome = run_batch(store, config, batch, InputSelector(input_prefix=f"landing/{batch}/"), NOW,
                            lambda: spark)
        assert (outcome.version, outcome.newly_committed) == (version, False)
    assert load_committed_state(store, Layout(config.layout)).version == 4
    # So is the dedup step alone (what a cleared Airflow run retries): no recomputation, no error.
    toml = tmp_path / "c.toml"
    toml.write_text(f'[s3]\nbucket = "{bucket}"\nendpoint_url = "{s3_server.endpoint_url}"\n'
                    "[dedup]\nbuckets = 1\nwindow_hours = 3\ncheckpoint_interval = 1\n")
    assert cli_main(["dedup", "--config", str(toml), "--batch-id", "b1"]) == 0
    assert "b1 is already committed; nothing to compute" in capsys.readouterr().out
    # b1's marker is all that says it is committed now: fsck checks it is there.
    marker = Layout(config.layout).batch_committed_marker("b1")
    assert fsck(store, config).consistent
    store.delete_keys([marker])
    assert [(item.kind, item.key) for item in fsck(store, config).missing] == [("committed_marker", marker)]


def test_segments_of_a_batch_not_yet_committed_are_never_touched(s3_server, bucket, store, spark) -> None:
    config = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 1, "window_hours": 1})
    in_flight = "_eventdedup/cache/date=2026-11-20/hour=00/bucket=0000/b9.seg"
    store.put_bytes(in_flight, b"being promoted")
    report = expire_cache(store, config)
    assert (report.expired, report.superseded, report.kept) == ([], [], 1)
    assert in_flight in bucket_listing(store)
