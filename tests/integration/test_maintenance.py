"""Cache expiry deletes exactly what nothing inside the window can read, and keeps every rerun exact."""
from __future__ import annotations

from datetime import timedelta

from eventdedup.cache.expiry import expire_cache
from eventdedup.commit.log import load_committed_state
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.pipeline import run_batch, verify_rerun

from ..support.helpers import NOW, bucket_listing, make_config, put_lines

E = b'{"event_id":"%s","created_at":"%s"}'


def test_superseded_and_expired_segments_go_heads_inside_the_window_stay(s3_server, bucket, store, spark) -> None:
    config = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 1, "window_hours": 3})
    # b1 at 01:00 writes hours 00 and 01; b2 at 03:00 adds to hour 01 (superseding b1's segment) and 03;
    # b3 at 06:00 writes hour 05.
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
        "date=2026-11-22/hour=05/bucket=0000/b3.seg"]

    # At 06:00 with a 3-hour window, b2 (as_of 03:00) is inside it and reads from 00:00 on a
    # rerun; b1 (as_of 01:00) is not. So only the superseded hour-01 copy may go.
    report = expire_cache(store, config, NOW)
    assert [k.split("cache/")[1] for k in report.superseded] == ["date=2026-11-22/hour=01/bucket=0000/b1.seg"]
    assert report.expired == [] and report.cutoff_hour_start.hour == 0
    assert verify_rerun(store, config, "b2", spark) == [] and verify_rerun(store, config, "b3", spark) == []

    # Three hours later b2 has left the window too: hours before b3's window (03:00) expire.
    report = expire_cache(store, config, NOW + timedelta(hours=3))
    assert sorted(k.split("cache/")[1] for k in report.expired) == [
        "date=2026-11-22/hour=00/bucket=0000/b1.seg", "date=2026-11-22/hour=01/bucket=0000/b2.seg",
        "date=2026-11-22/hour=02/bucket=0000/b2.seg"]
    assert [k.split("cache/")[1] for k in bucket_listing(store) if k.startswith("_eventdedup/cache/")] == [
        "date=2026-11-22/hour=05/bucket=0000/b3.seg"]
    assert verify_rerun(store, config, "b3", spark) == []
    assert set(load_committed_state(store, Layout(config.layout)).batches) == {"b1", "b2", "b3"}


def test_segments_of_a_batch_not_yet_committed_are_never_touched(s3_server, bucket, store, spark) -> None:
    config = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 1, "window_hours": 1})
    in_flight = "_eventdedup/cache/date=2026-11-20/hour=00/bucket=0000/b9.seg"
    store.put_bytes(in_flight, b"being promoted")
    report = expire_cache(store, config, NOW)
    assert (report.expired, report.superseded, report.kept) == ([], [], 1)
    assert in_flight in bucket_listing(store)
