"""Batch manifests: frozen inputs, reuse on rerun, refusal of a different input list."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from eventdedup.errors import BatchManifestError, InvalidNameError
from eventdedup.inputs.manifest import freeze_batch_inputs, load_batch_manifest
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup_dev.s3_requests import first_request

from ..support.helpers import NOW, put_lines
from ..support.s3_faults import CrashingClient


def test_prefix_batch_freezes_its_sorted_inputs_and_a_rerun_never_relists(store, config) -> None:
    put_lines(store, "landing/p/b.jsonl", [b"{}"])
    put_lines(store, "landing/p/a.jsonl", [b"{}"])
    store.put_bytes("landing/p/folder/", b"")
    first = freeze_batch_inputs(store, config, "b1", InputSelector(input_prefix="landing/p"), NOW)
    assert [i.key for i in first.inputs] == ["landing/p/a.jsonl", "landing/p/b.jsonl"]
    assert first.as_of == NOW
    put_lines(store, "landing/p/c.jsonl", [b"{}"])  # arrives late: not part of b1
    counting = CrashingClient(store.client, None)
    from eventdedup.s3store import S3Store
    again = freeze_batch_inputs(S3Store(counting, store.bucket), config, "b1", InputSelector(input_prefix="landing/p/"),
                        NOW + timedelta(hours=5))
    assert again == first
    assert [request.verb for request in counting.calls] == ["GET"]
    assert load_batch_manifest(store, Layout(config.layout), "b1") == first


def test_a_different_input_list_for_an_existing_batch_id_is_refused(store, config) -> None:
    put_lines(store, "landing/p/a.jsonl", [b"{}"])
    freeze_batch_inputs(store, config, "b1", InputSelector(input_prefix="landing/p/"), NOW)
    with pytest.raises(BatchManifestError, match="refusing a different input list"):
        freeze_batch_inputs(store, config, "b1", InputSelector(input_prefix="landing/q/"), NOW)


def test_an_interval_takes_landing_objects_visible_before_its_end_within_the_lookback(store, config) -> None:
    """The documented rule, on the server's own LastModified (no layout set: the whole landing
    prefix is listed, and LastModified bounds the lookback)."""
    put_lines(store, "landing/x.jsonl", [b"{}"])
    modified = store.client.head_object(Bucket=store.bucket, Key="landing/x.jsonl")["LastModified"]
    step, lookback = timedelta(minutes=5), timedelta(hours=config.inputs.lookback_hours)

    def interval(until: datetime) -> InputSelector:
        return InputSelector(since=until - step, until=until)

    before = interval(modified - timedelta(seconds=1))  # x not visible yet
    after = interval(modified + timedelta(seconds=1))
    # An interval long after x: x is dated inside an interval before it, still within the lookback.
    later = interval(modified + lookback - timedelta(seconds=1))
    too_late = interval(modified + lookback + timedelta(seconds=1))  # x is older than the lookback: the sweep's
    for batch_id, selector, expected in (("early", before, []), ("now", after, ["landing/x.jsonl"]),
                                         ("later", later, ["landing/x.jsonl"]), ("too-late", too_late, [])):
        staged = freeze_batch_inputs(store, config, batch_id, selector, selector.until + timedelta(minutes=1))
        assert [i.key for i in staged.inputs] == expected, batch_id
        assert staged.as_of == selector.until.astimezone(timezone.utc)
    consumed = freeze_batch_inputs(store, config, "consumed", interval(modified + timedelta(minutes=1)),
                                   modified + timedelta(minutes=2), is_consumed=lambda info: info.key == "landing/x.jsonl")
    assert consumed.inputs == ()


def test_an_interval_ending_in_the_future_is_refused(store, config) -> None:
    with pytest.raises(BatchManifestError, match="after the current time"):
        freeze_batch_inputs(store, config, "future", InputSelector(since=NOW, until=NOW + timedelta(days=400)), NOW)


@pytest.mark.parametrize("selector_args, message", [
    ({}, "either --input-prefix or both"),
    ({"input_prefix": "a/", "since": NOW}, "either --input-prefix or both"),
    ({"since": NOW}, "go together"),
    ({"since": NOW, "until": NOW}, "must be before"),
    ({"since": datetime(2026, 1, 1), "until": NOW}, "needs a UTC offset"),
])
def test_bad_selectors_are_refused(selector_args: dict, message: str) -> None:
    with pytest.raises(BatchManifestError, match=message):
        InputSelector(**selector_args)


@pytest.mark.parametrize("prefix", ["deduped/", "_eventdedup/", "_eventdedup/cache/x/", "a/../b", "my prefix/"])
def test_input_prefixes_that_overlap_our_own_or_are_unsafe_are_refused_before_any_s3_call(config, prefix) -> None:
    from eventdedup.s3store import S3Store

    no_calls = S3Store(CrashingClient(object(), first_request(lambda r: True, "any call")), "unused")
    with pytest.raises(InvalidNameError):
        freeze_batch_inputs(no_calls, config, "b1", InputSelector(input_prefix=prefix), NOW)


@pytest.mark.parametrize("batch_id", ["../etc", "a/b", "with space", "ctl\x07", ""])
def test_unsafe_batch_ids_are_refused_before_any_s3_call(config, batch_id) -> None:
    from eventdedup.s3store import S3Store

    no_calls = S3Store(CrashingClient(object(), first_request(lambda r: True, "any call")), "unused")
    with pytest.raises(InvalidNameError):
        freeze_batch_inputs(no_calls, config, batch_id, InputSelector(input_prefix="landing/"), NOW)
