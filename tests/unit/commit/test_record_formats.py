"""Records written by earlier versions keep loading: format-1 commit records, job results,
promotion journals and checkpoints (tests/fixtures/formats/v1/, written by eventdedup 63dc235
from a real run: an interval batch, a manual batch with an excluded input, a batch later
retracted, the retraction, a reshard, and a job result with its journal not yet promoted), and
a record older than the ledger. Each expected value below is read off the fixture documents."""
from __future__ import annotations

from pathlib import Path

import pytest

from eventdedup import codec
from eventdedup.commit.changes import BatchChange, Reshard, Retraction
from eventdedup.commit.job_result import JobResult
from eventdedup.commit.journal import PromotionJournal
from eventdedup.commit.ledger import LedgerEntry, LedgerUpdate
from eventdedup.commit.records import CommitRecord
from eventdedup.commit.state import CommittedState
from eventdedup.counts import BatchCounts
from eventdedup.errors import CorruptStateError
from eventdedup.inputs.exclusions import ExcludedInput
from eventdedup.inputs.manifest import BatchManifest
from eventdedup.inputs.selector import InputSelector
from eventdedup.s3store import ObjectInfo

V1 = Path(__file__).parents[2] / "fixtures" / "formats" / "v1"
INTERVAL = "20261126T055300Z"
LANDING = ObjectInfo("landing/a.jsonl", 291, '"070b953ac66849bca95178bd84e0cd07"')


def commit(name: str) -> CommitRecord:
    return CommitRecord.from_bytes((V1 / name).read_bytes(), name)


def test_a_format_1_batch_commit_loads_with_its_change_in_one_value() -> None:
    record = commit("commit-1.json")
    assert (record.version, record.batch_id, record.previous_batch_id, record.as_of) == (
        1, INTERVAL, None, "2026-11-26T06:53:00+00:00")
    assert record.counts == BatchCounts(input_lines=4, malformed=1, in_batch_duplicates=1, in_batch_natural=1,
                                        output_rows=2, cache_keys_written=2)
    assert record.change == BatchChange(window_start_hour=498630, retain_from_hour=498462,
                                        ledger_update=LedgerUpdate((LANDING,), 498626), partitions=2,
                                        interval=True)  # format 1: read from its id, as then
    assert [(obj.kind, obj.rows) for obj in record.objects] == [
        ("audit", 1), ("cache", 0), ("cache", 0), ("cache", 0), ("cache", 0), ("data", 1), ("data", 1),
        ("quarantine", 1), ("load_manifest", 0)]
    assert sorted(record.cache_heads) == ["2026-11-22/04/0000", "2026-11-22/04/0001", "guard/2026-11-26/0000",
                                          "guard/2026-11-26/0001"]
    assert CommitRecord.from_bytes(record.to_bytes(), "again") == record  # and it is written as the current format


def test_a_format_1_retraction_and_reshard_keep_their_own_figures_out_of_the_counts() -> None:
    retraction = commit("commit-4.json")
    assert retraction.change == Retraction(("manual-2",), "bad input", retracted_output_rows=1, cache_keys_rewritten=1)
    assert retraction.counts == BatchCounts() and retraction.retracts == ("manual-2",)
    reshard = commit("commit-5.json")
    assert reshard.change == Reshard(from_hour=498823, buckets=4)
    assert reshard.counts == BatchCounts() and reshard.is_operation


def test_a_record_from_before_the_ledger_and_arrival_windows_is_never_recomputed() -> None:
    record = commit("commit-pre-ledger.json")
    assert record.change == BatchChange(arrival_windows=False, interval=True)
    assert commit("commit-1.json").batch_change == BatchChange(498630, 498462, LedgerUpdate((LANDING,), 498626), 2,
                                                               interval=True)
    assert commit("commit-2.json").batch_change == BatchChange(  # manual-1: no interval
        498630, 498462, LedgerUpdate((ObjectInfo("manual/b.jsonl", 194, '"b68fd769973aeea5d62dff61cbc55ecd"'),
                                      ObjectInfo("manual/c.jsonl", 94, '"56377880ae9686ddf66182ea9e914ca4"'))), 2)


def test_folding_the_format_1_log_gives_the_format_1_checkpoint() -> None:
    state = CommittedState()
    for version in range(1, 6):
        state = state.apply(commit(f"commit-{version}.json"), str(version))
    checkpoint = CommittedState.from_bytes((V1 / "checkpoint.json.gz").read_bytes(), "checkpoint")
    assert checkpoint == state
    assert dict(checkpoint.batches) == {INTERVAL: 1, "manual-1": 2, "retract-manual-2": 4, "reshard-20261127T07Z-4": 5}
    assert dict(checkpoint.retracted) == {"manual-2": 4}
    assert checkpoint.bucket_cutovers == ((498823, 4),)
    assert checkpoint.ledger.recent["landing/a.jsonl"][0] == LedgerEntry('"070b953ac66849bca95178bd84e0cd07"', 1, 498798)
    assert checkpoint.ledger.started and checkpoint.ledger.retain_from_hour == 498626
    assert CommittedState.from_bytes(checkpoint.to_bytes(), "again") == checkpoint


def test_a_format_1_job_result_and_its_journal_promote_as_they_did() -> None:
    job = JobResult.from_bytes((V1 / "job_result.json").read_bytes())
    assert (job.batch_id, job.base_version, job.counts.output_rows, len(job.objects)) == ("manual-3", 5, 1, 4)
    assert job.change == BatchChange(498630, 498462, LedgerUpdate(
        (ObjectInfo("manual3/e.jsonl", 94, '"866b49e735edbd8a8cda50d285e57e1f"'),)), 2)
    journal = PromotionJournal.from_bytes((V1 / "journal.json").read_bytes(), "journal")
    assert journal.job == job
    assert (journal.token, journal.target_version, journal.previous_batch_id) == (
        "0123456789abcdef0123456789abcdef", 6, "reshard-20261127T07Z-4")
    record = journal.commit_record()
    assert (record.version, record.batch_id, record.change) == (6, "manual-3", job.change)
    assert PromotionJournal.from_bytes(journal.to_bytes(), "again") == journal


def test_batch_manifests_and_exclusions_read_the_same() -> None:
    manifest = BatchManifest.from_bytes((V1 / "batch_manifest.json").read_bytes(), "manifest")
    assert manifest.selector == InputSelector(input_prefix="manual/")
    assert [info.key for info in manifest.inputs] == ["manual/b.jsonl", "manual/c.jsonl"]
    assert manifest.to_bytes() == (V1 / "batch_manifest.json").read_bytes()  # the same bytes as then
    exclusion = codec.loads(ExcludedInput, (V1 / "exclusion.json").read_bytes())
    assert exclusion == ExcludedInput("manual/c.jsonl", '"56377880ae9686ddf66182ea9e914ca4"',
                                      "replaced by the producer", "2026-11-26T06:53:00+00:00")
    assert exclusion.to_bytes() == (V1 / "exclusion.json").read_bytes()


@pytest.mark.parametrize("damage", [b'{"format": 2, "version": "2"}', b'{"format": 3}', b'{"format": 1}',
                                    b'{"format": 2, "version": 1, "batch_id": "b", "previous_batch_id": null, '
                                    b'"token": "t", "as_of": "x", "counts": {}, "objects": [], "cache_heads": {}, '
                                    b'"change": {"kind": "rename"}}'])
def test_a_damaged_record_is_named_not_half_read(damage: bytes) -> None:
    with pytest.raises(CorruptStateError, match="commit record c9 does not parse"):
        CommitRecord.from_bytes(damage, "c9")


def test_a_format_2_job_result_has_a_name_format_1_readers_do_not_look_at_and_format_1_is_still_read(
        tmp_path: Path) -> None:
    """A release that reads format 1 does not check `format`: handed a format-2 job result, it read
    the change as absent and committed the batch without its ledger entries, window or partitions
    (a rolling upgrade, a rollback). So format 2 is written under another name, which such a
    release does not find (it refuses: no job result), while a format-1 one left by such a release
    is still read from its old name."""
    from eventdedup.commit.job_result import load_job_result
    from eventdedup.config import LayoutSettings
    from eventdedup.layout import Layout

    class Files:
        """The two keys a job result may have, in a dict (no S3 needed to read them)."""

        def __init__(self, objects: dict[str, bytes]) -> None:
            self.objects = objects

        def get_bytes_or_none(self, key: str) -> bytes | None:
            return self.objects.get(key)

        def uri(self, key: str) -> str:
            return f"s3://b/{key}"

    layout = Layout(LayoutSettings())
    assert layout.job_result("manual-3") != layout.legacy_job_result("manual-3")
    assert layout.legacy_job_result("manual-3") == "_eventdedup/staging/manual-3/_job_result.json"
    legacy = (V1 / "job_result.json").read_bytes()
    job = load_job_result(Files({layout.legacy_job_result("manual-3"): legacy}), layout, "manual-3")  # type: ignore[arg-type]
    assert job == JobResult.from_bytes(legacy)
    newer = load_job_result(Files({layout.legacy_job_result("manual-3"): legacy,  # type: ignore[arg-type]
                                   layout.job_result("manual-3"): job.to_bytes()}), layout, "manual-3")
    assert newer == job


@pytest.mark.parametrize("reader, name", [(JobResult.from_bytes, "job_result.json"),
                                          (lambda data: PromotionJournal.from_bytes(data, "j"), "journal.json")])
def test_a_format_this_release_does_not_know_is_refused_not_read_as_format_1(reader, name) -> None:
    import orjson

    doc = orjson.loads((V1 / name).read_bytes())
    with pytest.raises(CorruptStateError, match="unknown format 4"):
        reader(orjson.dumps({**doc, "format": 4}))


@pytest.mark.parametrize("damage", [
    ("journal.json", lambda d: d.pop("target_version")),
    ("commit-5.json", lambda d: d["reshard"].pop("from_hour")),
    ("commit-1.json", lambda d: d.update(counts=[1, 2])),
    ("commit-1.json", lambda d: d.update(counts={"input_lines": "4"})),
])
def test_a_damaged_format_1_document_is_a_named_corrupt_state_not_a_traceback(damage) -> None:
    import orjson

    name, hurt = damage
    doc = orjson.loads((V1 / name).read_bytes())
    hurt(doc)
    read = (lambda data: PromotionJournal.from_bytes(data, "j")) if name == "journal.json" else (
        lambda data: CommitRecord.from_bytes(data, "c"))
    with pytest.raises(CorruptStateError, match="does not parse"):
        read(orjson.dumps(doc))


def test_a_damaged_old_checkpoint_is_a_named_corrupt_state() -> None:
    import gzip

    import orjson

    old = {"version": 2, "batches": {"b": 1}, "cache_heads": {}, "last_batch_id": "b", "retain_from_hour": 5,
           "window_starts": {"b": "not an hour"}}
    with pytest.raises(CorruptStateError, match="checkpoint cp does not parse"):
        CommittedState.from_bytes(gzip.compress(orjson.dumps(old)), "cp")
    empty_ledger = {**old, "window_starts": {"b": 9}, "ledger": {}}
    assert not CommittedState.from_bytes(gzip.compress(orjson.dumps(empty_ledger)), "cp").ledger.started


def test_a_count_earlier_releases_kept_still_reads() -> None:
    import orjson

    doc = orjson.loads((V1 / "commit-pre-ledger.json").read_bytes())
    doc["counts"]["older_than_window"] = 3  # counted by releases e3a54f4 .. 7b2fb56
    assert CommitRecord.from_bytes(orjson.dumps(doc), "c").counts.older_than_window == 3
