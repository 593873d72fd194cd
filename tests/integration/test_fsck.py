"""`eventdedup fsck` finds what nobody else looks for: committed objects deleted or replaced behind
the log's back, each named by key, from LIST replies only (no request per object)."""
from __future__ import annotations

import orjson
import pytest

from eventdedup.cli import main as cli_main
from eventdedup.commit.log import load_committed_state, read_commit
from eventdedup.inputs.selector import InputSelector
from eventdedup.layout import Layout
from eventdedup.ops.fsck import fsck
from eventdedup.ops.pipeline import run_batch
from eventdedup.s3store import S3Store, make_client
from eventdedup_dev.s3_fault_proxy import FaultProxy

from ..support.helpers import NOW, make_config, put_lines

E = b'{"event_id":"%s","created_at":"2026-11-22T0%d:10:00Z","v":%d}'


@pytest.fixture
def two_batches(store, config, spark):  # type: ignore[no-untyped-def]
    """b1 and b2 committed; b2 re-sends some of b1's ids, so it supersedes some of b1's segments."""
    put_lines(store, "landing/b1/1.jsonl", [E % (b"a%d" % i, 3 + i % 2, 1) for i in range(8)] + [b"bad"])
    put_lines(store, "landing/b2/1.jsonl", [E % (b"a%d" % i, 3 + i % 2, 2) for i in range(4, 12)])
    for batch in ("b1", "b2"):
        run_batch(store, config, batch, InputSelector(input_prefix=f"landing/{batch}/"), NOW, lambda: spark)
    return store


def promised(store, config) -> dict[str, tuple[int, str, str]]:  # type: ignore[no-untyped-def]
    """What the log promises, read the plain way: every object of every commit by key, and each
    batch's load manifest (written after its commit, from it)."""
    layout = Layout(config.layout)
    out = {}
    for version in range(1, load_committed_state(store, layout).version + 1):
        record = read_commit(store, layout, version)
        assert record is not None
        out.update({obj.key: (obj.size, obj.etag, obj.kind) for obj in record.objects})
        manifest = store.head(layout.redshift_manifest(record.batch_id))
        assert manifest is not None
        out[manifest.key] = (manifest.size, manifest.etag, "load_manifest")
    return out


def test_a_store_the_log_describes_is_consistent_and_checked_by_listing_only(two_batches, config, s3_server) -> None:
    with FaultProxy(s3_server.endpoint_url) as proxy:
        proxied = make_config(proxy.endpoint_url, config.s3.bucket)
        proxy.arm(None)
        report = fsck(S3Store(make_client(proxied.s3), config.s3.bucket), proxied)
        requests = list(proxy.requests)
    assert report.consistent and report.commits_checked == 2
    kinds = {kind for _, _, kind in promised(two_batches, config).values()}
    assert kinds == {"data", "audit", "quarantine", "cache", "load_manifest"}
    # Reading the Delta table's log (delta-rs: its own listings and commit files) is the table's check;
    # every committed object, the table's files included, is checked by listing.
    delta = [r for r in requests if "deduped%2F_delta_log%2F" in r or "/deduped/_delta_log/" in r]
    assert delta and report.table is not None and report.table.lag == 0
    requests = [r for r in requests if r not in delta]
    gets = [r for r in requests if r.startswith("GET") and "list-type=2" not in r]
    assert not [r for r in requests if r.startswith("HEAD")]
    assert all("/_eventdedup/log/" in r or "/_eventdedup/state/checkpoints/" in r for r in gets), gets
    object_lists = [r for r in requests if "list-type=2" in r and "prefix=_eventdedup%2Flog%2F" not in r]
    assert len(object_lists) == report.list_requests  # besides the one LIST that finds the log's head
    assert report.objects_checked > report.list_requests  # listing is shared by the objects of a folder


def test_deleted_and_replaced_committed_objects_are_each_named_and_exit_3(two_batches, config, tmp_path,
                                                                          capsys) -> None:
    store = two_batches
    layout = Layout(config.layout)
    objects = promised(store, config)
    state = load_committed_state(store, layout)
    by_kind = {kind: sorted(k for k, (_, _, kd) in objects.items() if kd == kind) for kind in
               ("data", "audit", "quarantine", "load_manifest")}
    heads = set(state.cache_heads.values())
    head = sorted(k for k, (_, _, kind) in objects.items() if kind == "cache" and k in heads)[0]
    superseded = sorted(k for k, (_, _, kind) in objects.items() if kind == "cache" and k not in heads)
    assert superseded, "b2 should supersede some of b1's segments"
    deleted = [by_kind["data"][0], by_kind["load_manifest"][0], by_kind["quarantine"][0], head,
               layout.batch_manifest("b1")]
    store.delete_keys([*deleted, superseded[0]])  # a superseded segment is maintenance's to delete: not a finding
    replaced = by_kind["audit"][0]
    store.put_bytes(replaced, b"not what was committed")

    report = fsck(store, config)
    # The head is a finding: its hour is in the folded state, so a batch (a rerun, a lagging one)
    # would read it. fsck judges by log time, so no clock can make it look expired.
    assert sorted(item.key for item in report.missing) == sorted(deleted)
    assert [(item.key, found.size) for item, found in report.changed] == [(replaced, len(b"not what was committed"))]

    toml = tmp_path / "c.toml"
    toml.write_text(f'[s3]\nbucket = "{store.bucket}"\nendpoint_url = "{config.s3.endpoint_url}"\n'
                    "[dedup]\nbuckets = 4\n")
    assert cli_main(["fsck", "--config", str(toml), "--json"]) == 3
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["consistent"] is False
    assert sorted((m["kind"], m["key"]) for m in doc["missing"]) == sorted(
        [("data", deleted[0]), ("load_manifest", deleted[1]), ("quarantine", deleted[2]), ("cache", head),
         ("batch_manifest", deleted[4])])
    assert [(c["kind"], c["key"], c["recorded_etag"]) for c in doc["changed"]] == [
        ("audit", replaced, objects[replaced][1])]
    # --last 1 checks b2's commit only: it fails exactly when one of the damaged objects is b2's.
    b2_damaged = any("b2" in key.rsplit("/", 2)[-2] + key.rsplit("/", 1)[-1] for key in [*deleted, replaced])
    assert cli_main(["fsck", "--config", str(toml), "--last", "1"]) == (3 if b2_damaged else 0)
    assert "1 commit(s)" in capsys.readouterr().out


def test_a_retracted_batchs_load_manifest_that_lists_its_data_files_again_is_a_finding(two_batches, config) -> None:
    """A retracted batch's load manifest is the empty one: fsck checked only that it existed, so
    a manifest written full again after the retraction (the publish race a retraction must win)
    went unseen while a loader would load the retracted files."""
    from eventdedup.commit.view import EMPTY_LOAD_MANIFEST, load_manifest_bytes
    from eventdedup.ops.retract import retract_batch

    store, layout = two_batches, Layout(config.layout)
    retract_batch(store, config, "b2", "bad input", NOW)
    key = layout.redshift_manifest("b2")
    assert store.get_bytes(key) == EMPTY_LOAD_MANIFEST and fsck(store, config).consistent
    b2 = read_commit(store, layout, 2)
    assert b2 is not None and b2.batch_id == "b2"
    store.put_bytes(key, load_manifest_bytes(store, b2))
    report = fsck(store, config)
    assert [(item.key, found.size) for item, found in report.changed] == [(key, len(load_manifest_bytes(store, b2)))]
