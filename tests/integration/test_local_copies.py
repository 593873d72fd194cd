"""Executor-local copies of cache objects (eventdedup.cache.local_copies): a copy is used only
after S3 confirms its ETag; a damaged, stale or deleted one is never trusted; the directory stays
within its bound; and a batch decides exactly as it does without copies, reading less from S3."""
from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import orjson

from eventdedup.cache.local_copies import PARTS_FORGET_SECONDS, PARTS_SUFFIX, SUFFIX, LocalCopies, LocalCopySettings
from eventdedup.inputs.selector import InputSelector
from eventdedup.ops.pipeline import run_batch
from eventdedup.s3store import S3Store, make_client
from eventdedup_dev.s3_fault_proxy import FaultProxy

from ..support.helpers import NOW, committed_rows, make_config, put_lines


def copies_in(directory: Path, max_bytes: int = 1 << 20) -> LocalCopies:
    return LocalCopies(LocalCopySettings(str(directory), max_bytes))


def test_a_copy_is_used_only_when_s3_confirms_its_etag(s3_server, bucket, tmp_path) -> None:
    with FaultProxy(s3_server.endpoint_url) as proxy:
        store = S3Store(make_client(make_config(proxy.endpoint_url, bucket).s3), bucket)
        store.put_bytes("cache/a.seg", b"first version")
        copies = copies_in(tmp_path)
        proxy.arm(None)
        assert copies.get_or_none(store, "cache/a.seg") == b"first version"  # read, and kept
        assert copies.get_or_none(store, "cache/a.seg") == b"first version"  # confirmed: 304, no bytes
        assert [request.split()[0] for request in proxy.requests] == ["GET", "GET"]
        assert proxy.bytes_served[f"GET /{bucket}/cache/a.seg"] == len(b"first version")  # once
        # Replaced on S3 (eventdedup never does; a copy must not outlive it): the new bytes.
        store.put_bytes("cache/a.seg", b"second version")
        assert copies.get_or_none(store, "cache/a.seg") == b"second version"
        assert copies.get_or_none(store, "cache/a.seg") == b"second version"
        # Deleted on S3: missing, as on S3, whatever the copy says.
        store.delete_keys(["cache/a.seg"])
        assert copies.get_or_none(store, "cache/a.seg") is None
        assert not list(tmp_path.glob(f"*{SUFFIX}"))


def test_a_kept_copy_of_written_bytes_is_used_only_once_s3_holds_those_bytes(s3_server, bucket, tmp_path) -> None:
    """An executor keeps what it staged under the name the promotion copies it to: before the
    copy exists the kept bytes are nothing (S3 has no such object), once it does they are read
    by a 304, and bytes kept under another ETag than S3's are replaced by S3's, never served."""
    with FaultProxy(s3_server.endpoint_url) as proxy:
        store = S3Store(make_client(make_config(proxy.endpoint_url, bucket).s3), bucket)
        copies = copies_in(tmp_path)
        staged = store.put_bytes("staging/x.seg", b"the staged segment")
        copies.keep(store, "cache/x.seg", staged.etag, b"the staged segment")
        assert copies.held(store, "cache/x.seg") is None  # not promoted (and the copy is dropped)
        assert not list(tmp_path.glob(f"*{SUFFIX}"))
        copies.keep(store, "cache/x.seg", staged.etag, b"the staged segment")
        store.copy(staged, "cache/x.seg")
        proxy.arm(None)
        assert copies.held(store, "cache/x.seg") == b"the staged segment"
        assert sum(proxy.bytes_served.values()) == 0  # a 304: the copy keeps its source's ETag
        copies.keep(store, "cache/x.seg", '"not its etag"', b"other bytes")
        assert copies.held(store, "cache/x.seg") == b"the staged segment"  # S3's, and kept
        assert copies.held(store, "cache/y.seg") is None  # no copy held: no request either
        assert [request.key for request in proxy.requests] == ["cache/x.seg", "cache/x.seg"]


def test_a_copy_of_the_etag_the_log_records_is_read_without_a_request(s3_server, bucket, tmp_path) -> None:
    """A committed object is never rewritten: a copy whose ETag is the one its commit recorded is
    its bytes, no request made; a copy of another ETag is confirmed or replaced by S3 as ever."""
    with FaultProxy(s3_server.endpoint_url) as proxy:
        store = S3Store(make_client(make_config(proxy.endpoint_url, bucket).s3), bucket)
        committed = store.put_bytes("cache/c.seg", b"committed bytes")
        copies = copies_in(tmp_path)
        assert copies.get_or_none(store, "cache/c.seg") == b"committed bytes"
        proxy.arm(None)
        assert copies.get_or_none(store, "cache/c.seg", committed.etag) == b"committed bytes"
        assert copies.held(store, "cache/c.seg", committed.etag) == b"committed bytes"
        assert proxy.requests == []
        assert copies.get_or_none(store, "cache/c.seg", '"another etag"') == b"committed bytes"  # a 304
        assert [request.verb for request in proxy.requests] == ["GET"] and sum(proxy.bytes_served.values()) == 0


def test_counts_of_part_reads_fill_a_copy_then_are_forgotten_when_stale(s3_server, bucket, tmp_path) -> None:
    store = S3Store(s3_server.client(), bucket)
    now = [0.0]
    copies = LocalCopies(LocalCopySettings(str(tmp_path), 1 << 20), clock=lambda: now[0])
    assert [copies.count_part_read(store, "cache/p.seg") for _ in range(3)] == [1, 2, 3]
    store.put_bytes("cache/p.seg", b"probed often")
    assert copies.get_or_none(store, "cache/p.seg") == b"probed often"  # the fill: its count goes
    assert copies.count_part_read(store, "cache/p.seg") == 1
    copies.count_part_read(store, "cache/q.seg")
    counts = sorted(tmp_path.glob(f"*{PARTS_SUFFIX}"))
    assert len(counts) == 2
    for path in counts:  # no batch added to them for longer than PARTS_FORGET_SECONDS
        os.utime(path, (0, 0))
    now[0] = PARTS_FORGET_SECONDS + 1
    store.put_bytes("cache/r.seg", b"r")
    assert copies.get_or_none(store, "cache/r.seg") == b"r"  # a copy written: the directory is listed
    assert not list(tmp_path.glob(f"*{PARTS_SUFFIX}"))
    assert copies.held(store, "cache/p.seg") == b"probed often"  # copies stay


def test_a_damaged_copy_is_read_again_from_s3_never_trusted(s3_server, bucket, tmp_path) -> None:
    store = S3Store(s3_server.client(), bucket)
    store.put_bytes("cache/b.seg", b"the committed bytes")
    copies = copies_in(tmp_path)
    copies.get_or_none(store, "cache/b.seg")
    (path,) = tmp_path.glob(f"*{SUFFIX}")
    for damage in (lambda raw: raw[:-3], lambda raw: raw[:-1] + bytes([raw[-1] ^ 1]), lambda raw: b"junk"):
        path.write_bytes(damage(path.read_bytes()))
        assert copies.get_or_none(store, "cache/b.seg") == b"the committed bytes"
        assert copies.get_or_none(store, "cache/b.seg") == b"the committed bytes"  # and kept again, whole


def test_the_directory_stays_within_its_bound_and_a_cycle_bigger_than_it_keeps_what_fits(
        s3_server, bucket, tmp_path) -> None:
    """Least recently used copies leave first, but never one used in the last half hour: a batch
    that reads more than fits keeps what fits warm instead of evicting each copy before its use."""
    store = S3Store(s3_server.client(), bucket)
    for name in "abc":
        store.put_bytes(f"cache/{name}.seg", name.encode() * 400)
    now = [0.0]
    copies = LocalCopies(LocalCopySettings(str(tmp_path), 1000), clock=lambda: now[0])  # room for two
    kept = lambda: [name for name in "abc" if copies.path_of(store, f"cache/{name}.seg").exists()]  # noqa: E731
    for at, name in ((0, "a"), (100, "b"), (200, "a"), (3000, "c")):  # at 3000, a and b are old; b the older
        now[0] = at
        assert copies.get_or_none(store, f"cache/{name}.seg") == name.encode() * 400
    assert kept() == ["a", "c"]
    now[0] = 3100  # a (used at 200) is old, c recent: a leaves for b
    assert copies.get_or_none(store, "cache/b.seg") == b"b" * 400 and kept() == ["b", "c"]
    now[0] = 3200  # b and c both used within the half hour: a is read, and not kept
    assert copies.get_or_none(store, "cache/a.seg") == b"a" * 400 and kept() == ["b", "c"]
    assert sum(path.stat().st_size for path in tmp_path.glob(f"*{SUFFIX}")) <= 1000
    assert copies_in(tmp_path / "none", 0).get_or_none(store, "cache/a.seg") == b"a" * 400  # 0 bytes: no copies


def test_a_batch_decides_the_same_through_local_copies_and_reads_less(s3_server, bucket, spark, tmp_path) -> None:
    """Three batches through a proxy, with and without copies: the same rows; with copies, every
    cache object a batch reads was written by a batch before it on this executor, which kept a
    copy under its committed name with the ETag the log records: no request for it at all."""
    def event(n: int, hour: int) -> bytes:
        return orjson.dumps({"event_id": f"e{n}", "created_at": f"2026-11-22T0{hour}:10:00Z", "v": 1})

    batches = [[event(n, 3 + n % 2) for n in range(40)],
               [event(n, 3 + n % 2) for n in range(10)] + [event(n, 5) for n in range(40, 70)],
               [event(n, 3 + n % 2) for n in range(10, 20)] + [event(n, 5) for n in range(70, 100)]]
    results = {}
    for label, cache_bytes in (("without", 0), ("with", 1 << 24)):
        run_bucket = f"{bucket}-{label}"
        s3_server.client().create_bucket(Bucket=run_bucket)
        with FaultProxy(s3_server.endpoint_url) as proxy:
            config = make_config(proxy.endpoint_url, run_bucket, dedup={"buckets": 2},
                                 spark={"local_cache_dir": str(tmp_path / label), "local_cache_bytes": cache_bytes})
            store = S3Store(make_client(config.s3), run_bucket)
            cache_bytes_read, cache_requests = [], []
            for number, lines in enumerate(batches, start=1):
                put_lines(store, f"landing/b{number}/1.jsonl", lines)
                proxy.arm(None)
                before = dict(proxy.bytes_served)
                run_batch(store, config, f"b{number}", InputSelector(input_prefix=f"landing/b{number}/"),
                          NOW + timedelta(minutes=5 * number), lambda: spark)
                cache_bytes_read.append(sum(size - before.get(request, 0) for request, size in proxy.bytes_served.items()
                                            if "/_eventdedup/cache/" in request))
                cache_requests.append(sum(1 for request in proxy.requests
                                          if request.verb == "GET" and request.key.startswith("_eventdedup/cache/")))
        results[label] = (sorted((row["batch_id"], row["event_id"]) for row in committed_rows(store, config, "data")),
                          sorted((row["batch_id"], row["event_id"], row["reason"])
                                 for row in committed_rows(store, config, "audit")), cache_bytes_read, cache_requests)
    expected_data = sorted([("b1", f"e{n}") for n in range(40)] + [("b2", f"e{n}") for n in range(40, 70)]
                           + [("b3", f"e{n}") for n in range(70, 100)])
    expected_audit = sorted([("b2", f"e{n}", "cross_batch_natural") for n in range(10)]
                            + [("b3", f"e{n}", "cross_batch_natural") for n in range(10, 20)])
    for label in ("without", "with"):
        assert results[label][:2] == (expected_data, expected_audit), label
    without, with_copies = results["without"][2], results["with"][2]
    assert with_copies[0] == without[0] == 0  # nothing is committed before b1
    assert without[1] > 0 and without[2] > 0  # b2 reads b1's segments and guards, b3 b1's and b2's
    assert with_copies[1:] == [0, 0]  # ...each written here, kept as a copy...
    # ...whose ETag the log records: used without a request at all (without copies: a GET each).
    assert results["with"][3][1:] == [0, 0] and min(results["without"][3][1:]) > 0


def test_a_process_lists_the_directory_once_a_minute_not_once_a_copy(s3_server, bucket, tmp_path, monkeypatch) -> None:
    """Listing a full directory (thousands of copies at production density) for every copy written
    cost most of a batch; a process trusts its listing plus its own writes for RESCAN_SECONDS, and
    still keeps its own copies within the bound, and keeps none once a listing found no room."""
    from eventdedup.cache import local_copies

    store = S3Store(s3_server.client(), bucket)
    for n in range(30):
        store.put_bytes(f"cache/{n}.seg", bytes([n]) * 100)
    listings = []
    real_scandir = local_copies.os.scandir
    monkeypatch.setattr(local_copies.os, "scandir", lambda path: listings.append(path) or real_scandir(path))
    now = [0.0]
    entry = 100 + local_copies._HEADER.size + len("cache/0.seg")
    copies = LocalCopies(LocalCopySettings(str(tmp_path), 10 * (entry + 40)), clock=lambda: now[0])  # ~10 fit
    for n in range(30):
        assert copies.get_or_none(store, f"cache/{n}.seg") == bytes([n]) * 100
    # The first copy, and the first that did not fit; then none until the minute is up.
    assert len(listings) == 2
    now[0] = local_copies.RESCAN_SECONDS + 1
    assert copies.get_or_none(store, "cache/29.seg") == bytes([29]) * 100  # not kept: read from S3, listed again
    assert len(listings) == 3
    kept = sorted(tmp_path.glob(f"*{SUFFIX}"))  # (glob lists too: counted above first)
    assert len(kept) == 10 and sum(path.stat().st_size for path in kept) <= 10 * (entry + 40)
