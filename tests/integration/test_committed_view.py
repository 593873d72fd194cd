"""Readers of the committed view start from its index, not from version 1 (issue 38, item 11).

`commit.view.committed_objects` read every commit record from version 1 on: ~105,000 GETs after a
year of 5-minute batches, for every reader (populate of our own output among them). The view is
now checkpointed with the state, in parts of VIEW_BLOCK versions, and a reader reads the parts
and the few commits after the checkpoint. What it returns is held to the plain definition (every
data object of every commit, less the retracted batches'), computed here from the records.

The batches are promoted through the real promotion (journal, copies, conditional commit,
checkpoints) from staged objects this test writes, without Spark: what they hold does not matter
to the view, only which objects each commit names.
"""
from __future__ import annotations

from eventdedup.commit.changes import BatchChange
from eventdedup.commit.job_result import JobResult, StagedObject
from eventdedup.commit.log import load_committed_state, read_commit
from eventdedup.commit.view import committed_objects, maintain_view
from eventdedup.counts import BatchCounts
from eventdedup.layout import Layout
from eventdedup.ops.retract import retract_batch
from eventdedup.promotion.promote import promote_batch
from eventdedup.s3store import S3Store
from eventdedup.tables import AUDIT_SCHEMA, table_to_parquet

from ..support.helpers import NOW, make_config
from ..support.s3_faults import CrashingClient

# Its "data files" are a few bytes each, not Parquet: no Delta table to project them into.
NO_TABLE = {"delta": "off"}


def promote_a_batch(store: S3Store, config, batch_id: str) -> None:  # type: ignore[no-untyped-def]
    layout = Layout(config.layout)
    version = load_committed_state(store, layout).version
    objects = []
    for kind, final in (("data", layout.final_data(batch_id, "2026-11-22", "05", 0)),
                        ("data", layout.final_data(batch_id, "2026-11-22", "06", 0)),
                        ("audit", layout.final_audit(batch_id, 0))):
        body = table_to_parquet(AUDIT_SCHEMA.empty_table()) if kind == "audit" else f"{batch_id}:{kind}".encode()
        staged = store.put_bytes(f"{layout.attempt_root(batch_id, 'a1')}{final}", body)
        objects.append(StagedObject(kind, staged, final, 1))
    job = JobResult(batch_id, version, NOW.isoformat(), BatchCounts(input_lines=1, output_rows=1), tuple(objects),
                    BatchChange(arrival_hour=0))
    store.put_bytes(layout.job_result(batch_id), job.to_bytes())
    promote_batch(store, config, batch_id)


def plain_view(store: S3Store, config) -> list[str]:  # type: ignore[no-untyped-def]
    """Every data object of every commit record, less the retracted batches', in log order."""
    layout = Layout(config.layout)
    records = [read_commit(store, layout, v) for v in range(1, load_committed_state(store, layout).version + 1)]
    retracted = {batch for record in records if record is not None for batch in record.retracts}
    return [obj.key for record in records if record is not None and record.batch_id not in retracted
            for obj in record.objects if obj.kind == "data"]


def read_counting(store: S3Store, config) -> tuple[list[str], int]:  # type: ignore[no-untyped-def]
    counter = CrashingClient(store.client, None)
    keys = [obj.key for obj in committed_objects(S3Store(counter, store.bucket), Layout(config.layout), "data")]
    return keys, sum(1 for request in counter.calls if request.verb == "GET")


def test_a_reader_of_the_committed_view_starts_from_its_checkpoint_whatever_the_history(s3_server, bucket) -> None:
    config = make_config(s3_server.endpoint_url, bucket, dedup={"checkpoint_interval": 5}, table=NO_TABLE)
    store = S3Store(s3_server.client(), bucket)
    for number in range(1, 13):
        promote_a_batch(store, config, f"b{number:02d}")
    retract_batch(store, config, "b03", "a bad producer", NOW)  # version 13
    for number in range(13, 21):
        promote_a_batch(store, config, f"b{number:02d}")  # versions 14 .. 21
    keys, gets = read_counting(store, config)
    assert keys == plain_view(store, config) and not [key for key in keys if "b03-" in key]
    for number in range(21, 41):
        promote_a_batch(store, config, f"b{number:02d}")  # versions 22 .. 41
    more_keys, more_gets = read_counting(store, config)
    assert more_keys == plain_view(store, config) and len(more_keys) == 2 * 39
    # The state (its checkpoint pointer, the checkpoint, the commits after it), the view's pointer,
    # its checkpoint, its one part and the commits after it: no more at 41 versions than at 21
    # (7 and 7 here; reading the log from version 1 took 24 and 44).
    assert gets <= 10 and more_gets <= gets, (gets, more_gets)


def test_a_reader_whose_view_parts_are_replaced_while_it_reads_falls_back_to_the_log(s3_server, bucket) -> None:
    """The index is derived data: a part deleted under a reader (a newer checkpoint replaced it)
    costs the reader the log's records, never a wrong view."""
    config = make_config(s3_server.endpoint_url, bucket, dedup={"checkpoint_interval": 5}, table=NO_TABLE)
    store = S3Store(s3_server.client(), bucket)
    for number in range(1, 11):
        promote_a_batch(store, config, f"b{number:02d}")
    store.delete_prefix(f"{config.layout.state_prefix}view/block=")
    keys, gets = read_counting(store, config)
    assert keys == plain_view(store, config) and gets >= 10


def test_overlapping_writers_and_a_missing_part_never_fail_a_promotion_and_maintenance_catches_up(
        s3_server, bucket) -> None:
    """The index is derived data (helper-3's review): a part gone under a writer (two promotions'
    view checkpoints overlapping, or a deletion by hand) failed every later checkpoint-due
    promotion after its commit, halting the pipeline. Writers now never delete, a promotion's
    writer gives up quietly, readers fall back to the log, and the maintenance DAG's step builds
    the index again from the log and deletes what no recent checkpoint names."""
    config = make_config(s3_server.endpoint_url, bucket, dedup={"checkpoint_interval": 5}, table=NO_TABLE)
    store = S3Store(s3_server.client(), bucket)
    layout = Layout(config.layout)
    for number in range(1, 11):
        promote_a_batch(store, config, f"b{number:02d}")
    store.delete_prefix(f"{config.layout.state_prefix}view/block=")  # every part of checkpoints 5 and 10
    for number in range(11, 21):  # versions 15 and 20 are due: their writers meet the gone parts
        promote_a_batch(store, config, f"b{number:02d}")
    assert load_committed_state(store, layout).version == 20 and not list(store.list(layout.journal_prefix))
    keys, _ = read_counting(store, config)
    assert keys == plain_view(store, config)
    maintained = maintain_view(store, layout)
    assert maintained.version == 20
    keys, gets = read_counting(store, config)
    assert keys == plain_view(store, config) and gets <= 10
    named = set(maintained.parts.values())
    assert {item.key for item in store.list(layout.view_parts_prefix)} == named  # nothing else kept
