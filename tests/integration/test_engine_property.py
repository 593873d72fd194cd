"""Property, end to end: random streams of keys and payloads split into batches, run through
real Spark and the real S3 server with random job retries and reruns of committed batches; the
committed output and audit equal the plain reference model, for every policy (min and max
survivors on `price` order versions across batches: an ordered store), the newest batch sometimes
retracted (its versions leave the view; the ones before are current again).

Few examples (each is several Spark jobs); the per-key logic gets hundreds more, without Spark,
in tests/unit/dedup/test_dedup_properties.py.
"""
from __future__ import annotations

import itertools
import os
from datetime import timedelta

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventdedup.errors import ExpiredHistoryError
from eventdedup.inputs.manifest import freeze_batch_inputs
from eventdedup.inputs.selector import InputSelector
from eventdedup.job.driver import run_dedup_job
from eventdedup.ops.pipeline import run_batch, verify_rerun
from eventdedup.ops.retract import retract_batch
from eventdedup.s3store import S3Store

from ..support.helpers import NOW, committed_rows, expected_renamed_id, make_config, put_lines
from ..support.reference_model import ModelEvent, ModelPolicy, ModelStore, decide_batch

# Copies of an id fall in one hour, in neighbouring hours, a day apart, and 8 days back (older
# than the window by event time, which is never what expires: arrival is).
event_dicts = st.fixed_dictionaries(
    {"event_id": st.sampled_from(["a", "b", "7f1c2a4e-5b6d-4e8f-9a0b-1c2d3e4f5a6b"]),
     "created_at": st.sampled_from(["2026-11-22T03:10:00Z", "2026-11-22T04:10:00Z", "2026-11-21T03:59:59Z",
                                    "2026-11-14T03:10:00Z"]),
     "v": st.integers(1, 2)},
    optional={"price": st.integers(0, 2)},
)
WINDOW_HOURS = 24
policies = st.builds(ModelPolicy, synthetic=st.sampled_from(["rename", "drop", "keep"]),
                     survivor=st.sampled_from(["first", "last", "min", "max"]), changelog=st.booleans())
plans = st.lists(st.tuples(st.lists(event_dicts, min_size=1, max_size=6),  # the batch's events
                           st.booleans(),  # run its job once more before promoting (a retried job)
                           st.integers(0, 3) | st.none(),  # then rerun this committed batch, if any
                           st.sampled_from([0, 1, 30]),  # hours it arrives after the batch before it
                           st.sampled_from([False, False, True])),  # then retract it (the newest batch)
                 min_size=2, max_size=3)
_buckets = itertools.count(1)


def as_model(event: dict) -> ModelEvent:
    return ModelEvent(event["event_id"], orjson.dumps(event, option=orjson.OPT_SORT_KEYS), event.get("price"))


def expected_rows(batch: str, events: list[dict], verdicts) -> tuple[list, list]:  # type: ignore[no-untyped-def]
    output, audit = [], []
    for line, (event, verdict) in enumerate(zip(events, verdicts, strict=False), start=1):
        raw, key = orjson.dumps(event).decode(), event["event_id"]
        if verdict.action != "dropped":
            event_id = expected_renamed_id(key, event) if verdict.action == "renamed" else key
            output.append((batch, event_id, key if verdict.action == "renamed" else None,
                           key if verdict.action == "kept" else None, "update" if verdict.action == "update" else "insert",
                           verdict.holder if verdict.action == "update" else None, raw))
        if verdict.reason != "kept":
            audit.append((batch, line, key, verdict.reason, verdict.action, verdict.holder, raw))
    return output, audit


# Derandomized: each example is several Spark jobs, so `make test` runs the same examples every
# time (a fixed cost, no run-to-run surprise); ENGINE_PROPERTY_EXAMPLES=200 explores further.
@settings(max_examples=int(os.environ.get("ENGINE_PROPERTY_EXAMPLES", "8")), derandomize=True, deadline=None)
@given(plan=plans, policy=policies)
def test_committed_output_equals_the_reference_model_for_every_policy(s3_server, spark, plan, policy) -> None:
    bucket = f"prop-{os.getpid()}-{next(_buckets):05d}"
    s3_server.client().create_bucket(Bucket=bucket)
    survivor = policy.survivor if policy.survivor in ("first", "last") else f"{policy.survivor}:price"
    config = make_config(s3_server.endpoint_url, bucket,
                         dedup={"synthetic": policy.synthetic, "survivor": survivor, "changelog": policy.changelog,
                                "window_hours": WINDOW_HOURS})
    store = S3Store(s3_server.client(), bucket)
    model = ModelStore(window_hours=WINDOW_HOURS)
    want_output, want_audit = [], []
    arrivals: dict[str, int] = {}
    retracted: set[str] = set()
    for number, (events, retry_job, rerun, later, retract) in enumerate(plan, start=1):
        batch = f"b{number}"
        arrivals[batch] = (arrivals[f"b{number - 1}"] + later) if number > 1 else 0
        now = NOW + timedelta(hours=arrivals[batch])
        put_lines(store, f"landing/{batch}/x.jsonl", [orjson.dumps(e) for e in events])
        selector = InputSelector(input_prefix=f"landing/{batch}/")
        if retry_job:
            freeze_batch_inputs(store, config, batch, selector, now)
            run_dedup_job(spark, config, batch)
        run_batch(store, config, batch, selector, now, lambda: spark)
        verdicts = decide_batch(model, batch, [as_model(e) for e in events], policy, arrivals[batch])
        output, audit = expected_rows(batch, events, verdicts)
        want_output += output
        want_audit += audit
        if rerun is not None and f"b{rerun % number + 1}" not in retracted:
            earlier = f"b{rerun % number + 1}"
            # README: a rerun is exact while it arrived within a window of the newest batch; after
            # that, entries it saw may have expired and it is refused.
            if arrivals[earlier] < arrivals[batch] - WINDOW_HOURS:
                with pytest.raises(ExpiredHistoryError):
                    verify_rerun(store, config, earlier, spark)
            else:
                assert verify_rerun(store, config, earlier, spark) == [], earlier
        if retract:  # out of the committed view: its rows go, and its versions stop being current
            retract_batch(store, config, batch, "a bad delivery", now)
            model.retract(batch)
            retracted.add(batch)
            want_output = [row for row in want_output if row[0] != batch]
            want_audit = [row for row in want_audit if row[0] != batch]

    got_output = [(r["batch_id"], r["event_id"], r["original_event_id"], r["duplicate_of"], r["op"],
                   r["supersedes_batch"], r["raw"]) for r in committed_rows(store, config, "data")]
    got_audit = [(r["batch_id"], r["line_number"], r["event_id"], r["reason"], r["action"], r["kept_in_batch"], r["raw"])
                 for r in committed_rows(store, config, "audit")]
    assert sorted(got_output, key=repr) == sorted(want_output, key=repr)
    assert sorted(got_audit, key=repr) == sorted(want_audit, key=repr)
