"""Concurrent promoters, driven through deterministic interleavings: promoter A is stopped before
its k-th S3 call, promoter B runs to its end, A resumes -- for every k. Exactly one commit wins
each log version, the loser fails with a message that says what to do, nothing is corrupted, and
after `recover` plus a rerun of the loser the store equals a sequential run. A promotion makes ~45
calls: `make soak` runs every interleaving, `make test` a share (every STRIDEth k, each test from
another offset, and every conditional write: the journal, the commit, the load manifest)."""
from __future__ import annotations

from typing import Any

import pytest

from eventdedup.commit.log import load_committed_state, read_commit
from eventdedup.errors import EventDedupError
from eventdedup.inputs.manifest import freeze_batch_inputs
from eventdedup.inputs.selector import InputSelector
from eventdedup.job.driver import run_dedup_job
from eventdedup.layout import Layout
from eventdedup.ops.pipeline import run_batch
from eventdedup.promotion.promote import promote_batch
from eventdedup.promotion.recovery import recover
from eventdedup.s3store import S3Store
from eventdedup_dev.s3_requests import FaultPoint, first_request, points_of

from ..support.helpers import NOW, bucket_listing, committed_rows, make_config, put_lines
from ..support.invariants import assert_commits_are_whole, assert_seen_ids_match_output
from ..support.s3_faults import Background, CrashingClient, PausingClient, SimulatedCrash
from ..support.sweeps import share
from .conftest import SETTINGS, E, committed_state_of, config_for, fresh_copy

B3 = [E % (b"a%d" % i, 3 + i % 2, 1) for i in range(16, 24)]  # overlaps b2 (a16..a19)
STRIDE = 3
SWEEPS = ["sampled", pytest.param("every", marks=pytest.mark.soak)]


@pytest.fixture(scope="module")
def both_computed(s3_server, before_b2, spark):  # type: ignore[no-untyped-def]
    """b1 committed; b2 and b3 both staged and computed against it, neither promoted."""
    bucket = fresh_copy(s3_server, before_b2)
    config, store = config_for(s3_server.endpoint_url, bucket), S3Store(s3_server.client(), bucket)
    put_lines(store, "landing/b3/1.jsonl", B3)
    for batch in ("b2", "b3"):
        freeze_batch_inputs(store, config, batch, InputSelector(input_prefix=f"landing/{batch}/"), NOW)
        run_dedup_job(spark, config, batch)
    return bucket


@pytest.fixture(scope="module")
def sequential(s3_server, both_computed, spark):  # type: ignore[no-untyped-def]
    """The committed state for each order the two batches can end up in."""
    states = {}
    for first, second in (("b2", "b3"), ("b3", "b2")):
        bucket = fresh_copy(s3_server, both_computed)
        config, store = config_for(s3_server.endpoint_url, bucket), S3Store(s3_server.client(), bucket)
        promote_batch(store, config, first)
        run_batch(store, config, second, InputSelector(input_prefix=f"landing/{second}/"), NOW, lambda: spark)
        states[first] = committed_state_of(store, config)
    return states


def promotion_calls(s3_server, source: str, batch: str) -> list[FaultPoint]:  # type: ignore[no-untyped-def]
    """Every S3 call of a clean promotion of `batch`, by what it is and which occurrence."""
    bucket = fresh_copy(s3_server, source)
    counter = CrashingClient(s3_server.client(), None)
    promote_batch(S3Store(counter, bucket), config_for(s3_server.endpoint_url, bucket), batch)
    return points_of(counter.calls)


def interleave(s3_server, bucket: str, pause_at: FaultPoint, batch_a: str, batch_b: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """A (batch_a) stops before its call `pause_at`; B (batch_b) runs to its end; A resumes."""
    config = config_for(s3_server.endpoint_url, bucket)
    pausing = PausingClient(s3_server.client(), pause_at)
    a = Background(lambda: promote_batch(S3Store(pausing, bucket), config, batch_a))
    assert pausing.paused.wait(timeout=60), f"A never made {pause_at}"
    outcome: dict[str, Any] = {}
    try:
        outcome["B"] = promote_batch(S3Store(s3_server.client(), bucket), config, batch_b)
    except EventDedupError as exc:
        outcome["B"] = exc
    pausing.release()
    a.join()
    outcome["A"] = a.result if a.error is None else a.error
    return outcome


@pytest.mark.parametrize("sweep", SWEEPS)
def test_batch_n_plus_1_racing_batch_n_one_wins_the_loser_is_told_and_a_rerun_gives_the_sequential_state(
        s3_server, both_computed, sequential, spark, sweep) -> None:
    calls = share(promotion_calls(s3_server, both_computed, "b2"), sweep, STRIDE, 0)
    print(f"promoting b2: {len(calls)} interleavings with b3 ({sweep})")
    winners = set()
    for pause_at in calls:
        bucket = fresh_copy(s3_server, both_computed)
        config, store = config_for(s3_server.endpoint_url, bucket), S3Store(s3_server.client(), bucket)
        outcome = interleave(s3_server, bucket, pause_at, "b2", "b3")
        state = load_committed_state(store, Layout(config.layout))
        assert state.version == 2 and set(state.batches) in ({"b1", "b2"}, {"b1", "b3"}), (pause_at, outcome)
        winner = "b2" if "b2" in state.batches else "b3"
        winners.add(winner)
        loser_outcome = outcome["A" if winner == "b3" else "B"]
        assert isinstance(loser_outcome, EventDedupError), (pause_at, outcome)
        assert any(hint in str(loser_outcome) for hint in (
            f"committed by batch {winner}", "eventdedup recover", "rerun the dedup step")), (pause_at, loser_outcome)
        assert_commits_are_whole(store, config)
        assert_seen_ids_match_output(store, config)

        report = recover(store, config)
        assert report.consistent, (pause_at, report.problems)
        loser = "b3" if winner == "b2" else "b2"
        run_batch(store, config, loser, InputSelector(input_prefix=f"landing/{loser}/"), NOW, lambda: spark)
        assert committed_state_of(store, config) == sequential[winner], pause_at
        leftovers = [k for k in bucket_listing(store) if k.startswith(("_eventdedup/staging/", "_eventdedup/state/journal/"))]
        assert leftovers == [], (pause_at, leftovers)
    assert winners == {"b2", "b3"}  # both orders happen across the interleavings


@pytest.mark.parametrize("sweep", SWEEPS)
def test_two_promoters_of_one_batch_make_exactly_one_commit(s3_server, both_computed, sweep) -> None:
    calls = share(promotion_calls(s3_server, both_computed, "b2"), sweep, STRIDE, 1)
    print(f"promoting b2: {len(calls)} interleavings of two promoters ({sweep})")
    for pause_at in calls:
        bucket = fresh_copy(s3_server, both_computed)
        config, store = config_for(s3_server.endpoint_url, bucket), S3Store(s3_server.client(), bucket)
        outcome = interleave(s3_server, bucket, pause_at, "b2", "b2")
        state = load_committed_state(store, Layout(config.layout))
        assert (state.version, dict(state.batches)) == (2, {"b1": 1, "b2": 2}), (pause_at, outcome)
        for who, result in outcome.items():  # a promoter either took part in the commit or was told
            if isinstance(result, EventDedupError):
                assert "another promoter committed it as log version 2" in str(result), (pause_at, who, result)
            else:
                assert result.version == 2, (pause_at, who, result)
        assert_commits_are_whole(store, config)
        assert_seen_ids_match_output(store, config)
        assert recover(store, config).consistent, pause_at
        leftovers = [k for k in bucket_listing(store)
                     if k.startswith(("_eventdedup/staging/b2/", "_eventdedup/state/journal/"))]
        assert leftovers == [], (pause_at, leftovers)  # (b3 is computed and waits in staging, untouched)


@pytest.mark.parametrize("sweep", SWEEPS)
def test_an_exclusion_racing_a_promotion_is_never_skipped_at_any_interleaving(s3_server, both_computed,
                                                                             sequential, sweep) -> None:
    """The promoter of b2 stops before each of its S3 calls in turn while `exclude-input` runs to its
    end. Either the exclusion is refused (the promotion got there first) or it stands and the
    promotion is withdrawn: a batch is never committed while an exclusion of its input stands."""
    from eventdedup.errors import BatchNotReadyError, StaleBatchError
    from eventdedup.ops.exclude import exclude_input

    calls = share(promotion_calls(s3_server, both_computed, "b2"), sweep, STRIDE, 2)
    excluded_key = "landing/b2/2.jsonl"  # the gzip object of before_b2
    outcomes = set()
    for pause_at in calls:
        bucket = fresh_copy(s3_server, both_computed)
        config, store = config_for(s3_server.endpoint_url, bucket), S3Store(s3_server.client(), bucket)
        layout = Layout(config.layout)
        pausing = PausingClient(s3_server.client(), pause_at)
        promotion = Background(lambda: promote_batch(S3Store(pausing, bucket), config, "b2"))  # noqa: B023
        assert pausing.paused.wait(timeout=60)
        try:
            exclude_input(store, layout, "b2", excluded_key, "racing the promoter", NOW)
            excluded = True
        except EventDedupError:
            excluded = False
        pausing.release()
        promotion.join()
        committed = "b2" in load_committed_state(store, layout).batches
        stands = any(True for _ in store.list(layout.batch_exclusions("b2")))
        where = f"pause before call {pause_at}: {promotion!r}, exclusion {'made' if excluded else 'refused'}"
        assert stands == excluded, where
        assert not (committed and stands), where  # the invariant
        if stands:
            # Withdrawn after its journal, or refused before it (the exclusion removed the job result).
            assert isinstance(promotion.error, (StaleBatchError, BatchNotReadyError)), where
            assert store.head(layout.journal("b2")) is None, where
        else:
            assert committed and committed_state_of(store, config) == _only_b2(sequential), where
        outcomes.add("exclusion stands" if stands else "exclusion refused")
    assert outcomes == {"exclusion stands", "exclusion refused"}  # both orders occur


def _only_b2(sequential: dict[str, Any]) -> dict[str, Any]:
    """The state with b1 and b2 committed, b3 not: the b2-first sequence before b3 ran."""
    state = sequential["b2"]
    batches = {k: v for k, v in state["batches"].items() if k != "b3"}
    return {"batches": batches, "ledger": [entry for entry in state["ledger"] if entry[2] != "b3"],
            "table_reflects": max(batches.values()),  # the Delta table caught up with b2's commit
            **{kind: [row for row in rows if "'batch_id': 'b3'" not in row] for kind, rows in state.items()
               if kind not in ("batches", "ledger", "table_reflects")}}


@pytest.mark.parametrize("finisher", ["recover", "a second promoter"])
def test_an_exclusion_made_before_a_journal_is_not_skipped_when_the_journal_is_finished_by_another(
        s3_server, both_computed, spark, finisher) -> None:
    """Issue 38, item 4: promoter P1 passes the gate; `exclude-input` completes (no journal yet, so
    it stands); P1 writes its journal and dies before it looks at the exclusions again. Whoever
    finishes that journal (`recover` rolling it forward, or a second promoter resuming it) used to
    commit the batch with the excluded object's events and inputs_excluded = 0. The exclusions the
    job ran under travel in the journal and are checked before the commit on every path: the
    promotion is abandoned, nothing is committed, and the batch reruns with the object excluded."""
    from eventdedup.errors import StaleBatchError
    from eventdedup.ops.exclude import exclude_input

    bucket = fresh_copy(s3_server, both_computed)
    config, store = config_for(s3_server.endpoint_url, bucket), S3Store(s3_server.client(), bucket)
    layout = Layout(config.layout)
    journal_put = journal_put_of(layout)
    # P1 stops just before its journal PUT, the exclusion runs to its end, then the PUT takes
    # effect and P1 dies (its response lost): the journal stands, P1 never looks again.
    dying = PausingClient(CrashingClient(s3_server.client(), journal_put, flavour="lose_response"), journal_put)
    died = Background(lambda: promote_batch(S3Store(dying, bucket), config, "b2"))
    assert dying.paused.wait(timeout=60)
    excluded = exclude_input(store, layout, "b2", "landing/b2/2.jsonl", "unreadable", NOW)
    dying.release()
    died.join()
    assert isinstance(died.error, SimulatedCrash) and store.head(layout.journal("b2")) is not None

    if finisher == "recover":
        report = recover(store, config)
        assert report.consistent and any("abandoned" in action for action in report.actions), report.actions
    else:
        with pytest.raises(StaleBatchError, match="now excludes"):
            promote_batch(store, config, "b2")
    state = load_committed_state(store, layout)
    assert "b2" not in state.batches and store.head(layout.journal("b2")) is None
    assert store.head(layout.redshift_manifest("b2")) is None  # no reader was told of it
    # Its journal's attempt is gone; copies already made stay (their log version is still open, so
    # another promoter could be committing them), and the rerun's promotion writes them again.
    assert not [k for k in bucket_listing(store) if k.startswith(layout.staging_root("b2"))]
    run_batch(store, config, "b2", InputSelector(input_prefix="landing/b2/"), NOW, lambda: spark)
    record = read_commit(store, layout, load_committed_state(store, layout).batches["b2"])
    assert record is not None and record.counts["inputs_excluded"] == 1
    quarantined = [row for row in committed_rows(store, config, "quarantine") if row["batch_id"] == "b2"]
    assert [(row["source_object"], row["line_number"], row["error"]) for row in quarantined
            if row["source_object"] == excluded.key] == [(excluded.key, 0, "excluded by operator: unreadable")]
    assert_commits_are_whole(store, config)
    assert_seen_ids_match_output(store, config)


def journal_put_of(layout: Layout) -> FaultPoint:
    """The S3 call of b2's promotion that writes its journal."""
    key = layout.journal("b2")
    return first_request(lambda r: r.verb == "PUT" and r.key == key, "b2's journal PUT")


def test_a_job_rerun_while_a_promoter_is_about_to_journal_leaves_that_promotion_whole(
        s3_server, both_computed, sequential, spark) -> None:
    """Issue 38, item 8: a dedup job and a promoter of the same batch at once. The promoter has
    loaded the job result and is about to write its journal when the job is run again (a cleared
    task, a retry): the job deleted the batch's staging and staged again under the same names, so
    the journal named objects that no longer existed or held other bytes (a setting changed since):
    the copies failed and the promotion could neither be finished nor rolled forward.
    Each job attempt stages under its own root and deletes no other's: the promotion commits the
    result it loaded, whole, and the rerun's result is left for the clean-up."""
    bucket = fresh_copy(s3_server, both_computed)
    config, store = config_for(s3_server.endpoint_url, bucket), S3Store(s3_server.client(), bucket)
    layout = Layout(config.layout)
    pausing = PausingClient(s3_server.client(), journal_put_of(layout))
    promoted = Background(lambda: promote_batch(S3Store(pausing, bucket), config, "b2"))
    assert pausing.paused.wait(timeout=60)  # it has loaded the job result
    # The job runs again meanwhile, with a setting changed since (its objects differ: the same
    # names, other bytes). Before, it replaced the objects the promoter was about to copy.
    changed = make_config(s3_server.endpoint_url, bucket, **{**SETTINGS, "dedup": {**SETTINGS["dedup"],
                                                                                   "survivor": "last"}})
    run_dedup_job(spark, changed, "b2")
    pausing.release()
    promoted.join()
    assert promoted.error is None, promoted.error
    assert promoted.result.newly_committed and promoted.result.version == 2
    assert committed_state_of(store, config) == _only_b2(sequential)
    assert recover(store, config).consistent
    assert [k for k in bucket_listing(store) if k.startswith(layout.staging_root("b2"))] == []


def test_a_promotion_that_commits_between_the_looks_of_an_exclusion_is_not_missed(
        s3_server, both_computed, sequential) -> None:
    """Issue 38, item 4, the other direction (helper-3's review). The promoter has read the
    exclusions (none) and stops before its commit PUT; `exclude-input` writes its record and makes
    its first look; the promoter commits, writes its manifest and deletes its journal; then
    exclude-input makes its second look. It looked for "committed?" and then "journal?", and
    found neither: the exclusion was reported made on a batch committed with the excluded
    object's events. It looks for the journal first (a commit precedes its journal's deletion),
    so whichever look the promoter's commit falls between, it is seen."""
    from eventdedup.ops.exclude import exclude_input

    excluded_key = "landing/b2/2.jsonl"
    bucket = fresh_copy(s3_server, both_computed)
    counter = CrashingClient(s3_server.client(), None)
    with pytest.raises(EventDedupError):  # counting only: refused, the journal of a paused promoter stands
        _exclusion_while_journal_stands(s3_server, bucket, counter, excluded_key)
    looks = [number for number, request in enumerate(counter.calls, start=1) if request.verb != "PUT"][-1]
    commit_put = first_request(lambda r: r.verb == "PUT" and r.key.startswith("_eventdedup/log/"), "the commit's PUT")
    for second_look in points_of(counter.calls)[1:looks]:  # the promoter finishes just before each later call
        bucket = fresh_copy(s3_server, both_computed)
        config, store = config_for(s3_server.endpoint_url, bucket), S3Store(s3_server.client(), bucket)
        layout = Layout(config.layout)
        promoter = PausingClient(s3_server.client(), commit_put)
        promoted = Background(lambda: promote_batch(S3Store(promoter, bucket), config, "b2"))  # noqa: B023
        assert promoter.paused.wait(timeout=60)  # it has looked at the exclusions: none
        excluder = PausingClient(s3_server.client(), second_look)
        made = Background(lambda: exclude_input(S3Store(excluder, bucket), layout, "b2",  # noqa: B023
                                                excluded_key, "racing", NOW))
        assert excluder.paused.wait(timeout=60)
        promoter.release()
        promoted.join()
        excluder.release()
        made.join()
        committed = "b2" in load_committed_state(store, layout).batches
        stands = any(True for _ in store.list(layout.batch_exclusions("b2")))
        where = f"promoter finished before exclude's call {second_look}: {promoted}, {made}"
        assert committed and not stands and made.result is None, where
        assert committed_state_of(store, config) == _only_b2(sequential), where


def _exclusion_while_journal_stands(s3_server, bucket: str, counter: Any, key: str) -> None:  # type: ignore[no-untyped-def]
    """Count exclude-input's calls on a bucket whose b2 has a journal (its full path of looks)."""
    from eventdedup.ops.exclude import exclude_input

    config = config_for(s3_server.endpoint_url, bucket)
    layout = Layout(config.layout)
    dying = CrashingClient(s3_server.client(), first_request(lambda r: r.verb == "COPY", "the first COPY"))
    with pytest.raises(SimulatedCrash):
        promote_batch(S3Store(dying, bucket), config, "b2")  # leaves its journal
    exclude_input(S3Store(counter, bucket), layout, "b2", key, "counting", NOW)


def test_abandoning_a_lost_promotion_leaves_a_running_jobs_attempt_alone(s3_server, both_computed) -> None:
    """Issue 38, item 8, the other direction (helper-3's review): recover abandons a promotion
    whose log version another batch took, while a job of the same batch stages its next attempt
    (it started before that promotion wrote its journal). The abandon deleted the batch's whole
    staging, the job's attempt with it: its result then named objects that were gone, and recover
    halted. Only the abandoned journal's own attempt goes."""
    bucket = fresh_copy(s3_server, both_computed)
    config, store = config_for(s3_server.endpoint_url, bucket), S3Store(s3_server.client(), bucket)
    layout = Layout(config.layout)
    pausing = PausingClient(s3_server.client(), journal_put_of(layout))
    lost = Background(lambda: promote_batch(S3Store(pausing, bucket), config, "b2"))
    assert pausing.paused.wait(timeout=60)  # b2 passed its gate, its journal not yet written
    promote_batch(store, config, "b3")  # b3 takes log version 2; b2 then journals for it, copies, loses
    pausing.release()
    lost.join()
    assert isinstance(lost.error, EventDedupError), lost
    running = f"{layout.attempt_root('b2', 'running0job')}data/date=2026-11-22/hour=03/part-00000.parquet"
    store.put_bytes(running, b"what a job attempt running meanwhile has staged so far")
    report = recover(store, config)
    assert report.consistent and any("abandoned" in action for action in report.actions), report.actions
    assert store.head(running) is not None  # the running attempt's object is still there
    journal_root = {key.split("/attempt-", 1)[1].split("/", 1)[0] for key in bucket_listing(store)
                    if key.startswith(layout.staging_root("b2"))}
    assert journal_root == {"running0job"}  # the abandoned attempt's staging is gone
