"""An interval batch that selects nothing (issue 59): the command says why and what waits, and
whether it commits follows who runs it and where the store's intervals stand.

Landing objects are placed in time through the dating proxy (no clock). The documented rules the
expected output comes from (docs/operations.md, "run-batch"; docs/design.md, "Which objects a batch
takes"): an interval batch takes the landing objects that arrived (LastModified) in the
`lookback_hours` (3) before its end that no batch consumed; one that takes none is explained with
the unconsumed landing objects outside its range, oldest first, grouped by whether they arrived
after its end or before its range, and the `--input-prefix` batch of their deepest common folder;
the store's first interval batch run by hand that selects nothing is not committed and writes
nothing; every other interval commits even when empty.
"""
from __future__ import annotations

import logging
import shlex
from datetime import timedelta
from pathlib import Path

import orjson

from eventdedup.cli import EXIT_FAILED, main
from eventdedup.commit.log import load_committed_state
from eventdedup.inputs.manifest import load_batch_manifest
from eventdedup.layout import Layout
from eventdedup.ops.scheduling import explain_empty_selection

from ..support.helpers import LOCAL_COPIES, NOW, bucket_listing, commit_counts
from ..support.landing import interval_batch, land, through_proxy

T0 = NOW - timedelta(hours=1)  # 2026-11-22T05:00Z
STEP = timedelta(minutes=5)
SELECTS_BY = ("It selects by arrival: the landing objects that arrived (LastModified: when the store received them, "
              "whatever time their keys or events name) from {start} to {end} (the [inputs] lookback_hours = 3 "
              "before its end) and that no batch consumed. None did.")
AFTER = ("arrived after its end: the interval batch whose lookback covers their arrival takes them (as the "
         "scheduler's intervals do).")
BEFORE = ("arrived before its range: the sweep takes them once an interval batch after them has committed "
          "(`eventdedup sweep`; daily in the maintenance DAG).")


def event(event_id: str) -> bytes:
    return orjson.dumps({"event_id": event_id, "created_at": "2026-11-22T04:30:00Z"})


def config_file(tmp_path: Path, endpoint: str, bucket: str) -> str:
    """The configuration a person's command reads: the proxy's endpoint, 2 buckets, 2 partitions."""
    path = tmp_path / "eventdedup.toml"
    path.write_text(f'[s3]\nendpoint_url = "{endpoint}"\nbucket = "{bucket}"\n[dedup]\nbuckets = 2\n'
                    f'[spark]\nmaster = "local[2]"\npartitions = 2\ndriver_memory = "2g"\n'
                    f'local_cache_dir = "{LOCAL_COPIES}"\n')
    return str(path)


def interval_args(path: str, start) -> list[str]:  # type: ignore[no-untyped-def]
    return ["run-batch", "--config", path, "--batch-id", start.strftime("%Y%m%dT%H%M%SZ"),
            "--since", start.isoformat(), "--until", (start + STEP).isoformat()]


def test_a_first_interval_run_by_hand_that_selects_nothing_is_not_committed_and_names_what_waits(
        tmp_path, dating_proxy, dated, s3_server, bucket, spark, capsys) -> None:
    """The newcomer's batch: the file of 05:00's events arrived later than the interval, another
    before its lookback. Nothing is written, so the interval stays free; the command it names takes
    both files."""
    store, config = through_proxy(dating_proxy, s3_server, bucket)
    path = config_file(tmp_path, dating_proxy.endpoint_url, bucket)
    land(store, dated, "landing/2026/11/22/05/part-000.jsonl", [event("e1"), event("e2"), event("e1")],
         T0 + timedelta(minutes=55))
    land(store, dated, "landing/2026/11/22/04/part-000.jsonl", [event("e3")], T0 - timedelta(hours=5))

    assert main(interval_args(path, T0)) == EXIT_FAILED
    uri = f"s3://{bucket}/"
    expected = "\n  ".join([
        "eventdedup: batch 20261122T050000Z selected no input, so it is not committed: a store's first interval "
        "batch run by hand commits only with input (committed empty, it would fix where the store's intervals "
        "start, and the scheduler's first interval would have to follow on from its end).",
        SELECTS_BY.format(start="2026-11-22T02:05:00+00:00", end="2026-11-22T05:05:00+00:00"),
        f"2 landing object(s) under {uri}landing/ wait for a batch outside it; the oldest, "
        f"{uri}landing/2026/11/22/04/part-000.jsonl, arrived 2026-11-22T00:00:00+00:00.",
        f"1 {AFTER}",
        f"1 {BEFORE}",
        f"Take them now, as one batch: eventdedup run-batch --config {path} --batch-id landing-2026-11-22 "
        "--input-prefix landing/2026/11/22/"]) + "\n"
    err = capsys.readouterr().err
    assert expected in err, err
    # Nothing written: no manifest freezes the interval as empty, the log has no commit.
    assert sorted(bucket_listing(store)) == ["landing/2026/11/22/04/part-000.jsonl",
                                             "landing/2026/11/22/05/part-000.jsonl"]

    command = expected.rstrip("\n").rsplit("Take them now, as one batch: eventdedup ", 1)[1]
    assert main(shlex.split(command)) == 0
    out = capsys.readouterr().out
    assert out.startswith("batch landing-2026-11-22 committed as log version 1: "), out
    counts = commit_counts(store, config)["landing-2026-11-22"]
    assert (counts["input_lines"], counts["in_batch_duplicates"], counts["output_rows"]) == (4, 1, 3)

    # Run again, the interval still selects nothing; now nothing waits either.
    assert main(interval_args(path, T0)) == EXIT_FAILED
    assert ("\n  No landing object under " + uri + "landing/ that arrived since 2026-11-15T02:05:00+00:00 waits "
            "for a batch either: land the events first.\n") in capsys.readouterr().err


def test_an_interval_run_by_hand_after_committed_ones_commits_empty_and_says_what_waits(
        tmp_path, dating_proxy, dated, s3_server, bucket, spark, capsys) -> None:
    """A gap's bridge or the next interval by hand: refusing it would stall the schedule behind it."""
    store, config = through_proxy(dating_proxy, s3_server, bucket)
    path = config_file(tmp_path, dating_proxy.endpoint_url, bucket)
    land(store, dated, "landing/a.jsonl", [event("e1")], T0 + timedelta(minutes=1))
    first = interval_batch(store, config, T0, T0 + STEP, spark)
    land(store, dated, "landing/late.jsonl", [event("e2")], T0 + timedelta(minutes=55))

    assert main(interval_args(path, T0 + STEP)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("batch 20261122T050500Z committed as log version 2: "), lines
    counts = orjson.loads(lines[0].split(": ", 1)[1])
    assert {name: value for name, value in counts.items() if value} == {}
    uri = f"s3://{bucket}/"
    assert lines[1:] == [
        "batch 20261122T050500Z selected no input; it is committed all the same, so that the interval after it "
        "can follow on from its end.",
        "  " + SELECTS_BY.format(start="2026-11-22T02:10:00+00:00", end="2026-11-22T05:10:00+00:00"),
        f"  1 landing object(s) under {uri}landing/ wait for a batch outside it; the oldest, "
        f"{uri}landing/late.jsonl, arrived 2026-11-22T05:55:00+00:00.",
        f"  1 {AFTER}",
        f"  Take them now, as one batch: eventdedup run-batch --config {path} --batch-id landing "
        "--input-prefix landing/"]
    state = load_committed_state(store, Layout(config.layout))
    assert (first, state.latest_interval_batch_id) == ("20261122T050000Z", "20261122T050500Z")


def test_a_scheduled_empty_interval_commits_and_its_log_says_it_selected_nothing(
        dating_proxy, dated, s3_server, bucket, spark, caplog) -> None:
    """The store's first interval, as the scheduler runs it: it commits empty, so that the schedule
    moves on; its staging logs why, and what run-batch would print of it names what waits."""
    store, config = through_proxy(dating_proxy, s3_server, bucket)
    land(store, dated, "landing/2026/11/22/05/part-000.jsonl", [event("e1")], T0 + timedelta(minutes=55))
    caplog.set_level(logging.INFO, logger="eventdedup.ops.scheduling")

    batch = interval_batch(store, config, T0, T0 + STEP, spark)
    assert ("batch 20261122T050000Z: its interval 2026-11-22T05:00:00+00:00 .. 2026-11-22T05:05:00+00:00 selected "
            "no landing object (none that no batch consumed arrived in the lookback before its end); it commits "
            "empty, so that the interval after it can follow on from its end") in caplog.messages
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    assert (state.version, state.latest_interval_batch_id, batch) == (1, "20261122T050000Z", "20261122T050000Z")
    assert {name: value for name, value in commit_counts(store, config)[batch].items() if value} == {}
    assert load_batch_manifest(store, layout, batch).inputs == ()
    explained = explain_empty_selection(store, config, batch, NOW)
    assert explained is not None
    uri = f"s3://{bucket}/"
    assert explained.committed("eventdedup.toml") == "\n  ".join([
        "batch 20261122T050000Z selected no input; it is committed all the same, so that the interval after it "
        "can follow on from its end.",
        SELECTS_BY.format(start="2026-11-22T02:05:00+00:00", end="2026-11-22T05:05:00+00:00"),
        f"1 landing object(s) under {uri}landing/ wait for a batch outside it; the oldest, "
        f"{uri}landing/2026/11/22/05/part-000.jsonl, arrived 2026-11-22T05:55:00+00:00.",
        f"1 {AFTER}",
        "Take them now, as one batch: eventdedup run-batch --config eventdedup.toml --batch-id "
        "landing-2026-11-22-05 --input-prefix landing/2026/11/22/05/"])
