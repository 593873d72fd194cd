"""Promotion faults that need more than a crash: a staged object lost between journal and copy.

Crashes at every S3 request of a whole batch, promotion included, are in test_batch_crashes.py."""
from __future__ import annotations

import itertools

import orjson
import pytest

from eventdedup.commit.job_result import load_job_result
from eventdedup.commit.journal import PromotionJournal
from eventdedup.commit.log import load_committed_state, read_commit
from eventdedup.commit.records import CommitRecord
from eventdedup.commit.view import load_manifest_bytes
from eventdedup.errors import CommitConflictError, InconsistentStoreError
from eventdedup.inputs.manifest import freeze_batch_inputs
from eventdedup.inputs.selector import InputSelector
from eventdedup.job.driver import run_dedup_job
from eventdedup.layout import Layout
from eventdedup.ops.fsck import fsck
from eventdedup.ops.pipeline import run_batch
from eventdedup.promotion.promote import promote_batch
from eventdedup.promotion.recovery import examine, recover
from eventdedup.s3store import S3Store
from eventdedup_dev.s3_requests import FaultPoint, first_request, points_of

from ..support.helpers import NOW, bucket_listing, make_config, put_lines
from ..support.s3_faults import Background, CrashingClient, PausingClient, SimulatedCrash, clone_bucket
from ..support.sweeps import Unreached, share

_clones = itertools.count()
B1 = [b'{"event_id":"a%d","created_at":"2026-11-22T0%d:10:00Z"}' % (i, 3 + i % 2) for i in range(12)]
B2 = [b'{"event_id":"a%d","created_at":"2026-11-22T0%d:10:00Z"}' % (i, 3 + i % 2) for i in range(8, 20)] + [b"oops"]


def small_config(s3_server, bucket):  # type: ignore[no-untyped-def]
    return make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 2, "checkpoint_interval": 2},
                       spark={"partitions": 2})


@pytest.fixture(scope="module")
def ready_to_promote(s3_server, spark):  # type: ignore[no-untyped-def]
    """A bucket where b1 is committed and b2's job has finished but b2 is not promoted."""
    bucket = f"promotion-src-{next(_clones)}"
    s3_server.client().create_bucket(Bucket=bucket)
    config = small_config(s3_server, bucket)
    store = S3Store(s3_server.client(), bucket)
    put_lines(store, "landing/b1/1.jsonl", B1)
    put_lines(store, "landing/b2/1.jsonl", B2)
    run_batch(store, config, "b1", InputSelector(input_prefix="landing/b1/"), NOW, lambda: spark)
    freeze_batch_inputs(store, config, "b2", InputSelector(input_prefix="landing/b2/"), NOW)
    run_dedup_job(spark, config, "b2")
    return bucket


def fresh_copy(s3_server, source: str):  # type: ignore[no-untyped-def]
    target = f"promotion-k-{next(_clones)}"
    clone_bucket(s3_server.client(), source, target)
    config = small_config(s3_server, target)
    return config, S3Store(s3_server.client(), target)


def put_of(key: str) -> FaultPoint:
    """The (first) PUT of `key`."""
    return first_request(lambda r: r.verb == "PUT" and r.key == key, f"the PUT of {key}")


FIRST_COPY = first_request(lambda r: r.verb == "COPY", "the first COPY")


def test_lost_staged_object_halts_recovery_with_a_report_naming_it(s3_server, ready_to_promote, spark):
    config, store = fresh_copy(s3_server, ready_to_promote)
    # Crash at the first copy: the journal is written, nothing is promoted yet...
    crashing = CrashingClient(store.client, FIRST_COPY)
    with pytest.raises(SimulatedCrash):
        promote_batch(S3Store(crashing, store.bucket), config, "b2")
    assert [request.verb for request in crashing.calls].count("COPY") == 1
    # ...then somebody deletes a staged data file.
    layout = Layout(config.layout)
    lost = sorted(k for k in bucket_listing(store) if k.startswith(layout.staging_root("b2")) and "/data/" in k)[0]
    store.delete_keys([lost])
    report = recover(store, config)
    assert not report.consistent
    assert len(report.problems) == 1 and f"s3://{store.bucket}/{lost}" in report.problems[0]
    assert "b2" not in load_committed_state(store, layout).batches
    assert not examine(store, config).consistent
    # The pipeline stays halted: another batch may not start while b2's promotion is unfinished.
    put_lines(store, "landing/b3/1.jsonl", [b'{"event_id":"z","created_at":"2026-11-22T05:00:00Z"}'])
    with pytest.raises(InconsistentStoreError, match="unfinished promotion of batch\\(es\\) b2"):
        run_batch(store, config, "b3", InputSelector(input_prefix="landing/b3/"), NOW, lambda: spark)



def test_recomputing_a_batch_whose_promotion_is_unfinished_is_refused_and_its_staging_kept(
        s3_server, ready_to_promote, spark) -> None:
    config, store = fresh_copy(s3_server, ready_to_promote)
    layout = Layout(config.layout)
    crashing = CrashingClient(store.client, FIRST_COPY)
    with pytest.raises(SimulatedCrash):
        promote_batch(S3Store(crashing, store.bucket), config, "b2")  # the journal is written, then the crash
    staged = {k: etag for k, etag in bucket_listing(store).items() if k.startswith(layout.staging_root("b2"))}
    assert staged and store.head(layout.journal("b2")) is not None
    # A retried or cleared job task (here with another survivor policy) must not replace what the journal names.
    changed = make_config(s3_server.endpoint_url, store.bucket, dedup={"buckets": 2, "checkpoint_interval": 2,
                                                                       "survivor": "last"}, spark={"partitions": 2})
    with pytest.raises(InconsistentStoreError, match="b2 has an unfinished promotion .* `eventdedup recover`"):
        run_dedup_job(spark, changed, "b2")
    assert {k: e for k, e in bucket_listing(store).items() if k.startswith(layout.staging_root("b2"))} == staged
    assert recover(store, config).consistent
    assert "b2" in load_committed_state(store, layout).batches


# A promotion makes ~45 requests: `make test` crashes at every 3rd of each flavour (the flavours at
# points apart) and at every conditional write (the journal, the commit, the manifest), `make soak` at every one.
STRIDE = 3
OFFSET = {"raise_before": 0, "lose_response": 1}


@pytest.mark.parametrize("sweep", ["sampled", pytest.param("every", marks=pytest.mark.soak)])
@pytest.mark.parametrize("flavour", ["raise_before", "lose_response"])
def test_a_load_manifest_exists_only_once_its_batch_is_committed_at_every_step_of_a_promotion(
        s3_server, ready_to_promote, flavour, sweep) -> None:
    """Issue 38, item 2: the Redshift load manifest was a staged object, copied to manifests/ before
    the commit PUT: a promotion that crashed after its copies, or lost its log version to another
    batch, left a manifest naming the data files of a batch that is not committed, and a loader
    triggered by manifest PUTs would load it. Killed at each S3 request of a promotion: no manifest
    while the batch is uncommitted; after `recover`, exactly its committed data files."""
    config, store = fresh_copy(s3_server, ready_to_promote)
    counter = CrashingClient(store.client, None)
    promote_batch(S3Store(counter, store.bucket), config, "b2")
    unreached = Unreached(f"promotion crashes, {flavour}")
    for point in share(points_of(counter.calls), sweep, STRIDE, OFFSET[flavour]):
        config, store = fresh_copy(s3_server, ready_to_promote)
        layout = Layout(config.layout)
        crashing = CrashingClient(store.client, point, flavour=flavour)
        with pytest.raises(SimulatedCrash):
            promote_batch(S3Store(crashing, store.bucket), config, "b2")
        unreached.note(point, crashing.faulted)
        crash_at = str(point)
        committed = "b2" in load_committed_state(store, layout).batches
        manifest = store.get_bytes_or_none(layout.redshift_manifest("b2"))
        assert committed or manifest is None, crash_at
        assert recover(store, config).consistent, crash_at
        if not committed:
            promote_batch(store, config, "b2")
        record = read_commit(store, layout, load_committed_state(store, layout).batches["b2"])
        assert record is not None
        # By key: the bucket was cloned from a snapshot, and a URL names the bucket it was written in.
        listed = [(entry["url"].split("/", 3)[3], entry["meta"]["content_length"])
                  for entry in orjson.loads(store.get_bytes(layout.redshift_manifest("b2")))["entries"]]
        assert listed == [(obj.key, obj.size) for obj in record.objects if obj.kind == "data"], crash_at
    unreached.report(at_most=0)


def test_a_journal_an_earlier_release_wrote_never_publishes_its_load_manifest_before_the_commit(
        s3_server, ready_to_promote) -> None:
    """Issue 38, item 2, in the upgrade window (helper-3's review): a format-1 journal names its
    batch's load manifest among its staged objects, which the promotion copied before the commit
    PUT. It is now written after the commit, from the commit record, in the same bytes (so the
    ETag the record keeps for it still holds)."""
    config, store = fresh_copy(s3_server, ready_to_promote)
    layout = Layout(config.layout)
    job = load_job_result(store, layout, "b2")
    manifest_key = f"{layout.attempt_root('b2', 'v1')}load.manifest"
    record_like = CommitRecord(2, "b2", "b1", "t", job.as_of, job.counts,
                               tuple(obj.promoted for obj in job.objects), {})
    staged = store.put_bytes(manifest_key, load_manifest_bytes(store, record_like))
    doc = orjson.loads(PromotionJournal("tok", "b1", job).to_bytes())["job"]  # as format 1 spelt it:
    change = doc.pop("change")
    v1 = {**{key: value for key, value in doc.items() if key not in ("objects", "base_version")},
          **{key: value for key, value in change.items() if key != "kind"},
          "token": "tok", "previous_batch_id": "b1", "target_version": 2,
          "entries": [*doc["objects"], {"kind": "load_manifest", "final_key": layout.redshift_manifest("b2"), "rows": 0,
                                        "staged": {"key": staged.key, "size": staged.size, "etag": staged.etag}}]}
    store.put_bytes(layout.journal("b2"), orjson.dumps(v1))
    crashing = CrashingClient(store.client, first_request(lambda r: r.verb == "PUT", "the first PUT"))
    with pytest.raises(SimulatedCrash):
        promote_batch(S3Store(crashing, store.bucket), config, "b2")
    assert crashing.faulted is not None and crashing.faulted.key.startswith("_eventdedup/log/")  # the commit PUT
    assert store.head(layout.redshift_manifest("b2")) is None  # every copy made, the commit not
    assert recover(store, config).consistent
    record = read_commit(store, layout, 2)
    assert record is not None and [obj.kind for obj in record.objects].count("load_manifest") == 1
    head = store.head(layout.redshift_manifest("b2"))
    assert head is not None and head.etag == staged.etag  # what the format-1 record says it is
    # b2's commit only: b1's manifest names the bucket this one was cloned from.
    assert fsck(store, config, last=1).consistent


def test_a_retraction_committed_while_a_promoter_writes_its_load_manifest_leaves_the_manifest_empty(
        s3_server, ready_to_promote) -> None:
    """A promoter commits b2 and stops before its load-manifest PUT. Meanwhile `recover` finishes
    b2 (manifest written, journal gone) and `retract` commits b2's retraction and empties the
    manifest. The promoter then wrote the full manifest; its check after the write looked at the
    state it had folded before the retraction, so the retracted batch's data files stayed listed
    for a loader. A full manifest never overwrites a retraction's empty one."""
    from eventdedup.ops.retract import retract_batch

    config, store = fresh_copy(s3_server, ready_to_promote)
    layout = Layout(config.layout)
    pausing = PausingClient(store.client, put_of(layout.redshift_manifest("b2")))
    promoted = Background(lambda: promote_batch(S3Store(pausing, store.bucket), config, "b2"))
    assert pausing.paused.wait(timeout=60)  # b2 is committed; its manifest not yet written
    assert "b2" in load_committed_state(store, layout).batches
    assert recover(store, config).consistent  # finishes b2: manifest written, journal removed
    retract_batch(store, config, "b2", "bad input", NOW)
    pausing.release()
    promoted.join()
    assert promoted.error is None, promoted.error
    assert orjson.loads(store.get_bytes(layout.redshift_manifest("b2"))) == {"entries": []}


@pytest.mark.parametrize("late_promoter", ["fails", "dies"])
def test_recover_never_deletes_the_objects_of_a_batch_that_was_committed_and_then_retracted(
        s3_server, ready_to_promote, late_promoter) -> None:
    """A promoter of b2 passes its gate and stops before its journal PUT; another promoter
    commits b2 whole, and b2 is retracted. The first then writes its journal (none is there any
    more) and fails on its copies (their staging is gone). A retracted batch reads as not
    committed, and its journal targets a version the log has passed: recover took it for a
    promotion that lost its log version and deleted every object the journal names, which are
    b2's committed objects. The retraction keeps b2's id guards in the state, so every later
    batch then failed on a missing guard. A retracted batch's leftover journal is cleaned up, by
    the late promoter as it fails or by recover if it died; its objects stay."""
    from eventdedup.ops.retract import retract_batch

    config, store = fresh_copy(s3_server, ready_to_promote)
    layout = Layout(config.layout)
    client = store.client if late_promoter == "fails" else CrashingClient(store.client, FIRST_COPY)
    pausing = PausingClient(client, put_of(layout.journal("b2")))
    late = Background(lambda: promote_batch(S3Store(pausing, store.bucket), config, "b2"))
    assert pausing.paused.wait(timeout=60)  # past its gate, its journal not yet written
    committed = promote_batch(store, config, "b2")
    record = read_commit(store, layout, committed.version)
    assert record is not None
    retract_batch(store, config, "b2", "bad input", NOW)
    pausing.release()
    late.join()
    if late_promoter == "fails":  # its copies had nothing to copy
        assert isinstance(late.error, CommitConflictError) and "retracted" in str(late.error), late
    else:
        assert isinstance(late.error, SimulatedCrash) and store.head(layout.journal("b2")) is not None
    report = recover(store, config)
    assert report.consistent, report.problems
    assert [obj.key for obj in record.objects if store.head(obj.key) is None] == []
    assert store.head(layout.journal("b2")) is None
    assert fsck(store, config).missing == []  # (sizes: manifests cloned from another bucket name it in URLs)
    assert orjson.loads(store.get_bytes(layout.redshift_manifest("b2"))) == {"entries": []}


def test_a_load_manifest_an_earlier_release_left_before_a_commit_that_never_came_is_replaced(
        s3_server, ready_to_promote) -> None:
    """An earlier release copied a batch's load manifest before its commit; that promotion was
    abandoned with the copy left behind (its copies carry the batch's names), and the batch
    then committed with other data files. Created only if absent, the manifest kept naming the
    abandoned attempt's files (helper-5's review). One with other bytes is replaced, by ETag."""
    config, store = fresh_copy(s3_server, ready_to_promote)
    layout = Layout(config.layout)
    key = layout.redshift_manifest("b2")
    stale = orjson.dumps({"entries": [{"url": store.uri("deduped/date=2026-11-22/hour=03/b2-part-00009.parquet"),
                                       "mandatory": True, "meta": {"content_length": 25}}]})
    store.put_bytes(key, stale)
    outcome = promote_batch(store, config, "b2")
    record = read_commit(store, layout, outcome.version)
    assert record is not None
    listed = [(entry["url"].split("/", 3)[3], entry["meta"]["content_length"])
              for entry in orjson.loads(store.get_bytes(key))["entries"]]
    assert listed == [(obj.key, obj.size) for obj in record.objects if obj.kind == "data"]


def test_promoting_a_batch_retracted_long_before_is_refused_as_retracted_and_leaves_its_staging(
        s3_server, ready_to_promote) -> None:
    """The clean-up for a batch retracted while its promotion ran (above) is for that race
    only: a promotion of a batch that was retracted before it started is refused as the gate
    refuses it, and touches nothing (helper-5's review: it was reported as a race and its
    staging deleted)."""
    from eventdedup.errors import RetractionRefusedError
    from eventdedup.ops.retract import retract_batch

    config, store = fresh_copy(s3_server, ready_to_promote)
    layout = Layout(config.layout)
    job_result = store.get_bytes(layout.job_result("b2"))
    promote_batch(store, config, "b2")
    retract_batch(store, config, "b2", "bad input", NOW)
    store.put_bytes(layout.job_result("b2"), job_result)  # a job result of it turns up again
    with pytest.raises(RetractionRefusedError, match="b2 was retracted"):
        promote_batch(store, config, "b2")
    assert store.get_bytes(layout.job_result("b2")) == job_result
