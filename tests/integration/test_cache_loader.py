"""The Spark stage's reader of the committed cache (`_CacheLoader`, the `BucketCache` over S3),
against the local S3 server: whatever the chain (one to three objects, one or two runs each)
and whatever the order of prefetches and later probes, every entry of every probed key is
returned, with or without executor-local copies; `chain_sizes` and `runs(newest)` are the
objects' own. A key probed again with more keys is read for the keys it lacks only; an
executor keeping local copies reads an object whole once, then through its copy.
(After helper-9's scratch test of the loader.)"""
from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import unquote

import numpy as np
import pytest

from eventdedup.cache.epochs import BucketEpochs
from eventdedup.cache.local_copies import FILL_AFTER_PART_READS, LocalCopies, LocalCopySettings
from eventdedup.cache.segment import CacheRun, decode_segment, encode_segment
from eventdedup.cache.segment_parts import TAIL_BYTES
from eventdedup.job.dedup_stage import _CacheLoader
from eventdedup.keys import CacheKey
from eventdedup.s3store import S3Store, make_client
from eventdedup_dev.s3_fault_proxy import FaultProxy

from ..support.helpers import make_config

HOUR, FINE = 490_000, 0
NAME = str(CacheKey.of_hour(HOUR, FINE))


def digest(number: int) -> bytes:
    return number.to_bytes(16, "big")


def chain_of(store: S3Store, rng: random.Random, trial: int) -> tuple[list[str], dict[str, set[bytes]]]:
    universe = [digest(rng.randrange(1 << 120)) for _ in range(rng.choice([50, 3000, 20000]))]
    chain, truth = [], {}
    for i in range(rng.randrange(1, 4)):
        runs = []
        for j in range(rng.randrange(1, 3)):
            owner = f"b{i}{j}"
            ids = sorted(set(rng.sample(universe, rng.randrange(1, len(universe) // 2))))
            runs.append(CacheRun.build(owner, np.array(ids, "S16"), np.arange(len(ids), dtype=np.uint64)))
            truth[owner] = set(ids)
        key = f"cache/t{trial}/o{i}.seg"
        store.put_bytes(key, encode_segment(runs))
        chain.append(key)
    truth["_universe"] = set(universe)
    return chain, truth


@pytest.mark.parametrize("copies", [False, True])
def test_every_entry_of_every_probed_key_whatever_the_order_of_probes(s3_server, bucket, tmp_path, copies) -> None:
    store = S3Store(s3_server.client(), bucket)
    rng = random.Random(7)
    for trial in range(30):
        chain, truth = chain_of(store, rng, trial)
        universe = sorted(truth.pop("_universe"))
        settings = LocalCopySettings(str(tmp_path / f"copies-{trial}"), (1 << 30) if copies else 0)
        with ThreadPoolExecutor(4) as pool:
            loader = _CacheLoader(store, {NAME: tuple(chain)}, pool, LocalCopies(settings))
            requests = [np.array(sorted(set(rng.sample(universe, min(len(universe), rng.choice([1, 2, 5, 40, 400]))))),
                                 "S16") for _ in range(rng.randrange(1, 5))]
            loader.prefetch(BucketEpochs(1), 0, {HOUR: requests[0]}, [])
            for probe in requests:
                got: dict[str, set[bytes]] = {}
                for run in loader.runs_holding(HOUR, FINE, probe):
                    assert list(run.digests) == sorted(run.digests)  # a run stays sorted, merged or not
                    got.setdefault(run.owner, set()).update(run.digests.tolist())
                for owner, ids in truth.items():
                    assert ids & set(probe.tolist()) <= got.get(owner, set()), (trial, owner)
            objects = [store.get_bytes(key) for key in chain]
            assert loader.chain_sizes(HOUR, FINE) == [len(data) for data in objects]
            for newest in range(len(chain) + 1):
                expected = [run for data in objects[len(objects) - newest:] for run in decode_segment(data, "x")]
                got_runs = loader.runs(HOUR, FINE, newest)
                assert [(r.owner, r.digests.tolist()) for r in got_runs] == [
                    (r.owner, r.digests.tolist()) for r in expected]


def test_a_key_probed_again_is_read_for_the_keys_it_lacks_and_a_copy_is_read_once(s3_server, bucket, tmp_path) -> None:
    """One object of 200,000 entries (782 blocks). On an executor without local copies: two
    keys probed, then a third; the second read is the third key's blocks (the tail, run table
    and index again, and its digests and fingerprints), not the first two keys' again. On one
    with copies: the first FILL_AFTER_PART_READS loaders (batches) read it in parts as an
    executor without copies does (a first touch costs no more than on an ephemeral executor);
    the next reads it whole, keeping a copy; later loaders read it through the copy (confirmed by
    ETag: no bytes)."""
    with FaultProxy(s3_server.endpoint_url) as proxy:
        config = make_config(proxy.endpoint_url, bucket)
        store = S3Store(make_client(config.s3), bucket)
        ids = np.sort(np.array([digest(n * 7919 + 3) for n in range(200_000)], "S16"))
        data = encode_segment([CacheRun.build("b1", ids, np.arange(200_000, dtype=np.uint64))])
        store.put_bytes("cache/big.seg", data)
        first, third = ids[[1000, 150_000]], ids[[90_000]]

        def gets() -> int:
            return sum(1 for request in proxy.requests if "big.seg" in unquote(request) and request.startswith("GET"))

        with ThreadPoolExecutor(4) as pool:
            loader = _CacheLoader(store, {NAME: ("cache/big.seg",)}, pool, LocalCopies(LocalCopySettings("", 0)))
            loader.prefetch(BucketEpochs(1), 0, {HOUR: first}, [])
            assert sum(map(len, loader.runs_holding(HOUR, FINE, first))) <= 2 * 2 * 256
            before = gets()
            held = loader.runs_holding(HOUR, FINE, np.sort(np.concatenate([first, third])))
            assert set(ids[[1000, 90_000, 150_000]].tolist()) <= set(held[0].digests.tolist())
            assert gets() - before == 5  # tail, run table, index, one block's digests and fingerprints
        copies = LocalCopies(LocalCopySettings(str(tmp_path / "copies"), 1 << 30))
        for batch in range(1, FILL_AFTER_PART_READS + 3):
            proxy.arm(None)
            with ThreadPoolExecutor(4) as pool:
                loader = _CacheLoader(store, {NAME: ("cache/big.seg",)}, pool, copies)
                loader.prefetch(BucketEpochs(1), 0, {HOUR: first}, [])
                entries = sum(map(len, loader.runs_holding(HOUR, FINE, first)))
            read = (gets(), sum(proxy.bytes_served.values()))
            if batch <= FILL_AFTER_PART_READS:  # in parts: the tail, run table, index and two blocks
                assert entries <= 2 * 2 * 256 and read[1] < len(data) // 20, (batch, read)
            elif batch == FILL_AFTER_PART_READS + 1:  # whole, after its tail: the copy is filled
                assert (entries, read) == (200_000, (2, TAIL_BYTES + len(data))), batch
            else:  # through the copy, confirmed by a 304
                assert (entries, read) == (200_000, (1, 0)), batch
