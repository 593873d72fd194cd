"""The operator commands as the docs tell people to use them: they do what their output says,
refuse what they cannot do with a message that names the thing, and name times as times.

Each test is one of the holes issue 38 reported (items 12, 13, 14), through `eventdedup`'s own
command line (`cli.main`: its argument parsing, messages and exit codes) on the real S3 server.
"""
from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from eventdedup.cli import EXIT_FAILED, main
from eventdedup.commit.log import load_committed_state
from eventdedup.errors import ConfigError
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.pipeline import run_batch

from ..support.helpers import NOW, committed_rows, put_lines


def config_file(tmp_path: Path, endpoint: str, bucket: str, buckets: int | None = 4) -> str:
    path = tmp_path / "eventdedup.toml"
    dedup = f"[dedup]\nbuckets = {buckets}\n" if buckets else ""
    path.write_text(f'[s3]\nendpoint_url = "{endpoint}"\nbucket = "{bucket}"\n{dedup}')
    return str(path)


def one_batch(store, config, spark, batch_id: str = "b1") -> None:  # type: ignore[no-untyped-def]
    put_lines(store, f"landing/{batch_id}/1.jsonl", [b'{"event_id":"e1","created_at":"2026-11-22T05:10:00Z"}'])
    run_batch(store, config, batch_id, InputSelector(input_prefix=f"landing/{batch_id}/"), NOW, lambda: spark)


def test_retracting_a_reshard_is_refused_and_the_reshard_stays_in_force(tmp_path, s3_server, bucket, store, config,
                                                                         spark, capsys) -> None:
    """Issue 38, item 12: `retract` of a reshard exited 0 and status marked it retracted, while its
    buckets stayed in force. A reshard cannot be undone (bucket counts only grow): refused."""
    one_batch(store, config, spark)
    path = config_file(tmp_path, s3_server.endpoint_url, bucket)
    assert main(["reshard", "--config", path, "--buckets", "8"]) == 0
    (reshard_id,) = [b for b in load_committed_state(store, Layout(config.layout)).batches if b.startswith("reshard-")]
    capsys.readouterr()
    assert main(["retract", "--config", path, "--batch-id", reshard_id, "--reason", "undo"]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert f"{reshard_id} is a reshard, not a batch" in err and "cannot be undone" in err
    state = load_committed_state(store, Layout(config.layout))
    assert state.bucket_cutovers[-1][1] == 8 and not state.retracted
    assert main(["status", "--config", path]) == 0
    assert "(retracted)" not in capsys.readouterr().out


def test_retracting_a_retraction_is_refused_and_the_batch_stays_retracted(tmp_path, s3_server, bucket, store, config,
                                                                           spark, capsys) -> None:
    """Issue 38, item 12: `retract --batch-id retract-X` exited 0 and showed it retracted while X
    stayed retracted. Undoing a retraction is not offered: refused, naming what to do instead."""
    one_batch(store, config, spark, "x")
    path = config_file(tmp_path, s3_server.endpoint_url, bucket)
    assert main(["retract", "--config", path, "--batch-id", "x", "--reason", "bad input"]) == 0
    capsys.readouterr()
    assert main(["retract", "--config", path, "--batch-id", "retract-x", "--reason", "undo"]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "retract-x is a retraction, not a batch" in err and "x stays retracted" in err
    assert dict(load_committed_state(store, Layout(config.layout)).retracted) == {"x": 2}
    assert committed_rows(store, config, "data") == []
    assert main(["status", "--config", path, "--json"]) == 0
    entries = {entry["batch_id"]: entry for entry in orjson.loads(capsys.readouterr().out)["batches"]}
    assert entries["retract-x"]["counts"] == {"retracted_batches": 1, "retracted_output_rows": 1,
                                              "cache_keys_rewritten": 1}  # what it took out, not 18 zeros
    assert (entries["retract-x"]["retracts"], entries["x"]["retracted_at_version"]) == (["x"], 2)


def test_populating_from_a_prefix_with_nothing_under_it_is_refused_naming_it(tmp_path, s3_server, bucket, store,
                                                                              capsys) -> None:
    """Issue 38, item 13: `populate --source-prefix empty/` (a typo) committed an empty populate
    batch with exit 0. Refused, naming the prefix, and nothing is committed."""
    path = config_file(tmp_path, s3_server.endpoint_url, bucket)
    assert main(["populate", "--config", path, "--source-prefix", "empty/"]) == EXIT_FAILED
    assert f"nothing to populate: no object under s3://{bucket}/empty/" in capsys.readouterr().err
    assert list(store.list("_eventdedup/")) == []


def test_refusals_name_hours_as_times(tmp_path, s3_server, bucket, store, config, spark, capsys) -> None:
    """Issue 38, item 14: a configuration with the old bucket count after a reshard was refused
    with "the dedup cache has 8 buckets since hour 498799", while reshard printed the same hour as
    a time. Every message names times as times."""
    one_batch(store, config, spark)
    path = config_file(tmp_path, s3_server.endpoint_url, bucket)
    assert main(["reshard", "--config", path, "--buckets", "8", "--effective-from", "2026-11-24T00:00:00Z"]) == 0
    assert "8 buckets from 2026-11-24T00:00Z" in capsys.readouterr().out
    put_lines(store, "landing/b2/1.jsonl", [b'{"event_id":"e2","created_at":"2026-11-22T05:10:00Z"}'])
    with pytest.raises(ConfigError) as refused:  # the configuration still says 4 buckets
        run_batch(store, config, "b2", InputSelector(input_prefix="landing/b2/"), NOW, lambda: spark)
    assert "has 8 buckets since 2026-11-24T00:00Z (reshard)" in str(refused.value)
    assert not re.search(r"hour \d{4}", str(refused.value))
    again = ["reshard", "--config", config_file(tmp_path, s3_server.endpoint_url, bucket, None), "--buckets", "16",
             "--effective-from", "2026-11-24T00:00:00Z"]
    assert main(again) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "a cut-over at 2026-11-24T00:00Z is not after the last one (2026-11-24T00:00Z)" in err
    assert not re.search(r"hour \d{4}", err)
