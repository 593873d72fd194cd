"""The documented way out of a wedged batch: `eventdedup exclude-input` quarantines one whole input
object of a staged, uncommitted batch; the batch, and every interval behind it, then proceeds.

Expectations come from the documented rule (README, "A batch that cannot be read"): the excluded
object is one quarantine row (line 0, "excluded by operator: <reason>", no bytes), counted as
`inputs_excluded`; every other input is processed as usual.
"""
from __future__ import annotations

import pytest

from eventdedup.cli import main as cli_main
from eventdedup.errors import BatchManifestError, CommitConflictError, InputChangedError, StaleBatchError
from eventdedup.inputs.manifest import freeze_batch_inputs
from eventdedup.inputs.selector import InputSelector
from eventdedup.job.driver import run_dedup_job
from eventdedup.layout import Layout
from eventdedup.ops.exclude import exclude_input
from eventdedup.ops.pipeline import run_batch
from eventdedup.promotion.promote import promote_batch

from ..support.helpers import NOW, commit_counts, committed_rows, put_lines

E = b'{"event_id":"%s","created_at":"2026-11-22T03:10:00Z"}'
SELECTOR = InputSelector(input_prefix="landing/w/")


@pytest.fixture
def wedged(store, config, spark):  # type: ignore[no-untyped-def]
    """Batch w is staged; its second object is replaced afterwards, so every job attempt fails."""
    put_lines(store, "landing/w/1.jsonl", [E % b"a", E % b"b"])
    put_lines(store, "landing/w/2.jsonl", [E % b"c"])
    freeze_batch_inputs(store, config, "w", SELECTOR, NOW)
    put_lines(store, "landing/w/2.jsonl", [E % b"c", E % b"d"])  # the producer "repairs" it
    for _ in range(2):
        with pytest.raises(InputChangedError):
            run_batch(store, config, "w", SELECTOR, NOW, lambda: spark)
    return store


def test_excluding_the_unreadable_object_lets_the_batch_commit_with_it_quarantined_whole(
        wedged, config, spark, tmp_path, capsys) -> None:
    store = wedged
    toml = tmp_path / "c.toml"
    toml.write_text(f'[s3]\nbucket = "{store.bucket}"\nendpoint_url = "{config.s3.endpoint_url}"\n'
                    "[dedup]\nbuckets = 4\n[spark]\nmaster = \"local[2]\"\npartitions = 4\n")
    reason = "replaced by the producer after staging; new version goes in batch w-fix"
    assert cli_main(["exclude-input", "--config", str(toml), "--batch-id", "w", "--key", "landing/w/2.jsonl",
                     "--reason", reason]) == 0
    assert "landing/w/2.jsonl" in capsys.readouterr().out
    run_batch(store, config, "w", SELECTOR, NOW, lambda: spark)

    assert sorted(r["event_id"] for r in committed_rows(store, config, "data")) == ["a", "b"]
    assert [(r["source_object"], r["line_number"], r["error"], r["raw"]) for r in
            committed_rows(store, config, "quarantine")] == [
        ("landing/w/2.jsonl", 0, f"excluded by operator: {reason}", b"")]
    counts = commit_counts(store, config)["w"]
    assert (counts["input_lines"], counts["malformed"], counts["output_rows"], counts["inputs_excluded"]) == (3, 1, 2, 1)
    # The repaired object is ordinary input for a batch of its own (a manual batch takes prefixes).
    store.put_bytes("landing/w-fix/2.jsonl", store.get_bytes("landing/w/2.jsonl"))
    run_batch(store, config, "w-fix", InputSelector(input_prefix="landing/w-fix/"), NOW, lambda: spark)
    assert sorted(r["event_id"] for r in committed_rows(store, config, "data")) == ["a", "b", "c", "d"]


def test_a_job_result_computed_before_an_exclusion_is_never_promoted(store, config, spark) -> None:
    put_lines(store, "landing/w/1.jsonl", [E % b"a"])
    put_lines(store, "landing/w/2.jsonl", [E % b"c"])
    freeze_batch_inputs(store, config, "w", SELECTOR, NOW)
    stale = run_dedup_job(spark, config, "w")  # the job ran (and read object 2) ...
    exclude_input(store, Layout(config.layout), "w", "landing/w/2.jsonl", "bad producer", NOW)  # ... then this
    store.put_bytes(Layout(config.layout).job_result("w"), stale.to_bytes())  # even if its result is put back
    with pytest.raises(StaleBatchError, match=r"computed with excluded inputs \[\], but the batch now excludes "
                                              r"\['landing/w/2.jsonl'\]"):
        promote_batch(store, config, "w")
    run_batch(store, config, "w", SELECTOR, NOW, lambda: spark)
    assert sorted(r["event_id"] for r in committed_rows(store, config, "data")) == ["a"]


def test_exclusions_are_refused_for_unknown_inputs_and_committed_batches(store, config, spark) -> None:
    layout = Layout(config.layout)
    put_lines(store, "landing/w/1.jsonl", [E % b"a"])
    with pytest.raises(BatchManifestError, match="no manifest"):
        exclude_input(store, layout, "w", "landing/w/1.jsonl", "why", NOW)
    freeze_batch_inputs(store, config, "w", SELECTOR, NOW)
    with pytest.raises(BatchManifestError, match="has no input s3://.*/landing/w/9.jsonl"):
        exclude_input(store, layout, "w", "landing/w/9.jsonl", "why", NOW)
    with pytest.raises(BatchManifestError, match="needs a reason"):
        exclude_input(store, layout, "w", "landing/w/1.jsonl", "  ", NOW)
    run_batch(store, config, "w", SELECTOR, NOW, lambda: spark)
    with pytest.raises(CommitConflictError, match="w is committed"):
        exclude_input(store, layout, "w", "landing/w/1.jsonl", "why", NOW)
