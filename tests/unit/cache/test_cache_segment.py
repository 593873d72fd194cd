from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventdedup.cache.segment import (
    FOOTER,
    ORDER_KEY_BYTES,
    ORDERED_FORMAT,
    CacheRun,
    blocks_of,
    decode_segment,
    encode_segment,
)
from eventdedup.cache.segment_parts import runs_holding
from eventdedup.cache.view import CacheView
from eventdedup.errors import CorruptStateError
from eventdedup.keys import DIGEST_DTYPE, key_digest

from ...support.format_1 import format_1_segment


def run(owner: str, ids: list[str], fps: list[int]) -> CacheRun:
    return CacheRun.build(owner, np.array([key_digest(i) for i in ids], DIGEST_DTYPE), np.array(fps, np.uint64))


def test_round_trip_keeps_owners_entries_and_fingerprints() -> None:
    runs = [run("b1", ["a", "b", "c"], [1, 2, 3]), run("b2", ["d"], [2**64 - 1]), run("b3", [], [])]
    decoded = decode_segment(encode_segment(runs), "s3://x/seg")
    assert [r.owner for r in decoded] == ["b1", "b2", "b3"]
    for original, back in zip(runs, decoded, strict=False):
        assert back.digests.tobytes() == original.digests.tobytes()
        assert back.fingerprints.tolist() == original.fingerprints.tolist()
    assert dict(zip([d.tobytes() for d in decoded[0].digests], decoded[0].fingerprints.tolist(), strict=False)) == {
        key_digest("a"): 1, key_digest("b"): 2, key_digest("c"): 3}


def test_entries_cost_24_bytes_each_plus_20_a_block_of_256_and_a_small_per_run_header() -> None:
    one = len(encode_segment([run("20261122T0500Z", [str(i) for i in range(1000)], list(range(1000)))]))
    two = len(encode_segment([run("20261122T0500Z", [str(i) for i in range(2000)], list(range(2000)))]))
    assert two - one == 1000 * 24 + (blocks_of(2000) - blocks_of(1000)) * 20
    assert one - 1000 * 24 - blocks_of(1000) * 20 < 96  # header, run table, footer, trailer


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty", "extend"])
def test_damaged_segments_raise_naming_the_object_never_read_as_empty(damage: str) -> None:
    data = encode_segment([run("b1", ["a", "b"], [1, 2])])
    damaged = {
        "truncate": data[:-5], "flip": data[:10] + bytes([data[10] ^ 1]) + data[11:],
        "garbage": b"<html>error</html>" * 3, "empty": b"", "extend": data + b"\x00",
    }[damage]
    with pytest.raises(CorruptStateError, match="s3://bkt/cache/seg"):
        decode_segment(damaged, "s3://bkt/cache/seg")


def test_a_format_1_segment_is_read_whole_and_never_in_parts() -> None:
    runs = [run("b1", ["a", "b", "c"], [1, 2, 3]), run("b2", ["d"], [4])]
    data = format_1_segment(runs)
    assert [(r.owner, r.fingerprints.tolist()) for r in decode_segment(data, "old")] == [("b1", [1, 2, 3]),
                                                                                         ("b2", [4])]
    assert runs_holding(data[-64:], len(data), lambda start, stop: data[start:stop], "old",
                        np.array([key_digest("a")], DIGEST_DTYPE)) is None


@settings(max_examples=150, deadline=None)
@given(sizes=st.lists(st.sampled_from([0, 1, 255, 256, 257, 700]), min_size=1, max_size=4),
       repeated=st.integers(0, 300), probes=st.lists(st.integers(0, 10**9), min_size=1, max_size=25),
       tail=st.sampled_from([40, 300, 1 << 16]), seed=st.integers(0, 2**32 - 1))
def test_a_lookup_in_the_parts_read_equals_the_lookup_in_the_whole_segment(sizes: list[int], repeated: int,
                                                                           probes: list[int], tail: int,
                                                                           seed: int) -> None:
    """Whatever the runs (a key with hundreds of payloads spanning blocks included) and probes
    (held ids and others), the partial runs give the whole segment's answer for the probes."""
    rng = np.random.default_rng(seed)
    common = np.frombuffer(rng.bytes(16), DIGEST_DTYPE)
    runs = []
    for number, size in enumerate(sizes):
        digests = np.frombuffer(rng.bytes(16 * size), DIGEST_DTYPE).copy()
        digests[:min(repeated, size)] = common[0]
        runs.append(CacheRun.build(f"b{number}", digests, rng.integers(0, 2**63, size).astype(np.uint64)))
    data = encode_segment(runs)
    everything = np.concatenate([r.digests for r in runs] + [common, np.frombuffer(rng.bytes(64), DIGEST_DTYPE)])
    wanted = np.unique(everything[np.array(probes) % len(everything)])
    fingerprints = np.concatenate([r.fingerprints for r in runs] + [np.zeros(5, np.uint64)])
    queried = fingerprints[np.array(probes[:len(wanted)]) % len(fingerprints)]
    parts = runs_holding(data[-tail:], len(data), lambda start, stop: data[start:stop], "s", wanted)
    assert parts is not None
    visible = {f"b{n}": n for n in range(len(sizes))}
    answers = []
    for view in (CacheView.from_runs(decode_segment(data, "s"), visible), CacheView.from_runs(parts, visible)):
        found = view.lookup(wanted, queried)  # run indexes: of the runs each view holds entries of
        answers.append([[view.owners[i] if i >= 0 else None for i in where.tolist()]
                        for where in (found.pair_owner, found.key_first, found.key_last)])
    assert answers[0] == answers[1]


@pytest.mark.parametrize(("where", "message"), [("block", "block 1 of run b1 fails"),
                                               ("index", "its block index fails"),
                                               ("table", "its run table fails")])
def test_damage_read_in_parts_fails_a_checksum_naming_the_object(where: str, message: str) -> None:
    """Every byte a read in parts relies on is checked: the blocks it reads, the index that
    chose them (a damaged first digest would skip the block holding an id), the run table and
    the footer."""
    ids = [str(i) for i in range(1000)]
    data = bytearray(encode_segment([run("b1", ids, list(range(1000)))]))
    footer_at = len(data) - 4 - FOOTER.size
    index_offset, table_length = FOOTER.unpack_from(data, footer_at)[:2]
    at = {"block": table_length + 16 * 300 + 3, "index": index_offset + 16 + 5, "table": 14}
    data[at[where]] ^= 1
    wanted = np.sort(np.array([key_digest(i) for i in ids], DIGEST_DTYPE))[[10, 300, 900]]
    with pytest.raises(CorruptStateError, match=f"s3://bkt/seg: {message}"):
        runs_holding(bytes(data[-4096:]), len(data), lambda start, stop: bytes(data[start:stop]), "s3://bkt/seg",
                     wanted)


def test_a_damaged_footer_sends_the_read_whole_where_the_trailer_refuses_it() -> None:
    """A footer that fails its CRC is no footer (a format-1 segment may end in "EDCX" by
    chance): the segment is read whole, and the whole object's CRC refuses the damage."""
    data = bytearray(encode_segment([run("b1", [str(i) for i in range(1000)], list(range(1000)))]))
    data[len(data) - 4 - FOOTER.size + 9] ^= 1
    assert runs_holding(bytes(data[-4096:]), len(data), lambda start, stop: bytes(data[start:stop]), "s",
                        np.array([key_digest("1")], DIGEST_DTYPE)) is None
    with pytest.raises(CorruptStateError, match="fails its checksum"):
        decode_segment(bytes(data), "s")


def test_the_ranges_of_many_small_runs_are_read_in_one_request_and_far_ones_apart() -> None:
    """An old hour's segment holds a run per straggler batch: 300 runs of 26 entries (832 bytes
    each, one block). A probe must read every run's block; ranges less than 8 KiB apart are one
    request, so the read is the run table, the index (beyond the 100-byte tail read first) and
    one range, not 600 requests. A big run's blocks far apart are read apart: 8 probes spread
    over a run of 256,000 entries (1,000 blocks of 4 KiB digests and 2 KiB fingerprints) are 16
    requests after the run table and the index."""
    rng = np.random.default_rng(5)
    small = [CacheRun.build(f"b{i:03d}", np.frombuffer(rng.bytes(26 * 16), DIGEST_DTYPE), np.arange(26, dtype=np.uint64))
             for i in range(300)]
    big = CacheRun.build("big", np.frombuffer(rng.bytes(256_000 * 16), DIGEST_DTYPE), np.zeros(256_000, np.uint64))
    for runs, probes, requests in ((small, 1, 3), ([big], 8, 2 + 2 * 8)):
        data = encode_segment(runs)
        ranges: list[tuple[int, int]] = []

        def read(start: int, stop: int, data: bytes = data, ranges: list = ranges) -> bytes:
            ranges.append((start, stop))
            return data[start:stop]

        probed = np.sort(np.concatenate([run.digests[::max(1, len(run) // probes)][:probes] for run in runs[:1]]))
        found = runs_holding(data[-100:], len(data), read, "x", probed)
        assert found is not None and len(ranges) == requests
        held = CacheView(tuple(found)).lookup(probed, np.zeros(len(probed), np.uint64))
        assert held.key_hit.all()


def ordered_run(owner: str, ids: list[str], keys: list[bytes | None]) -> CacheRun:
    return CacheRun.build(owner, np.array([key_digest(i) for i in ids], DIGEST_DTYPE),
                          np.arange(len(ids), dtype=np.uint64), order_keys=pa.array(keys, pa.binary()))


def entries_of(runs: list[CacheRun]) -> list[tuple[str, bytes, int, bytes | None]]:
    found = []
    for r in runs:
        keys = r.order_keys.to_pylist() if r.order_keys is not None else [None] * len(r)
        found += [(r.owner, d.tobytes(), int(f), k) for d, f, k in zip(r.digests, r.fingerprints, keys, strict=True)]
    return sorted(found, key=lambda entry: (entry[0], entry[1], entry[2]))


def test_an_ordered_store_segment_keeps_each_entry_order_key_cut_at_255_bytes() -> None:
    long = b"\x02" + b"y" * 400
    runs = [ordered_run("b1", ["a", "b", "c", "d"], [b"\x01" + b"\x80" * 8, None, long, b""]),
            CacheRun.build("b2", np.array([key_digest("e")], DIGEST_DTYPE), np.array([7], np.uint64))]
    data = encode_segment(runs)
    assert data[4] == ORDERED_FORMAT and encode_segment(runs[1:])[4] == 2  # an unordered store's stay format 2
    decoded = decode_segment(data, "s")
    by_digest = dict(zip([d.tobytes() for d in decoded[0].digests], decoded[0].order_keys.to_pylist(), strict=True))
    assert by_digest == {key_digest("a"): b"\x01" + b"\x80" * 8, key_digest("b"): None,
                         key_digest("c"): long[:ORDER_KEY_BYTES], key_digest("d"): None}  # empty: none
    assert decoded[1].order_keys.to_pylist() == [None]  # a run without keys in an ordered segment


def test_an_ordered_entry_costs_its_key_and_a_length_byte_more_and_4_bytes_a_block() -> None:
    def size(count: int) -> int:
        ids = [str(i) for i in range(count)]
        return len(encode_segment([ordered_run("20261122T0500Z", ids, [b"\x01" + b"k" * 8] * count)]))
    assert size(2000) - size(1000) == 1000 * (24 + 1 + 9) + (blocks_of(2000) - blocks_of(1000)) * 24


@settings(max_examples=100, deadline=None)
@given(sizes=st.lists(st.sampled_from([0, 1, 255, 256, 257, 700]), min_size=1, max_size=3),
       probes=st.lists(st.integers(0, 10**9), min_size=1, max_size=25), tail=st.sampled_from([40, 300, 1 << 16]),
       seed=st.integers(0, 2**32 - 1))
def test_the_parts_of_an_ordered_segment_are_its_entries_holding_the_probes_with_their_keys(
        sizes: list[int], probes: list[int], tail: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    runs = []
    for number, size in enumerate(sizes):
        ids = [f"{number}-{i}" for i in range(size)]
        keys = [None if rng.random() < 0.3 else rng.bytes(int(rng.integers(1, 300))) for _ in ids]
        runs.append(ordered_run(f"b{number}", ids, keys))
    data = encode_segment(runs)
    everything = np.concatenate([r.digests for r in runs] + [np.frombuffer(rng.bytes(32), DIGEST_DTYPE)])
    wanted = np.unique(everything[np.array(probes) % len(everything)])
    parts = runs_holding(data[-tail:], len(data), lambda start, stop: data[start:stop], "s", wanted)
    assert parts is not None
    held = {d.tobytes() for d in wanted}
    whole = [entry for entry in entries_of(decode_segment(data, "s")) if entry[1] in held]
    assert [entry for entry in entries_of(parts) if entry[1] in held] == whole


@pytest.mark.parametrize("where", ["key", "length"])
def test_a_damaged_order_key_fails_the_block_checksum_read_whole_or_in_parts(where: str) -> None:
    ids = [str(i) for i in range(600)]
    data = bytearray(encode_segment([ordered_run("b1", ids, [b"\x01" + i.encode().rjust(8, b"0") for i in ids])]))
    table_length = FOOTER.unpack_from(data, len(data) - 4 - FOOTER.size)[1]
    lengths_at = table_length + 24 * 600
    data[lengths_at + 300 if where == "length" else lengths_at + 600 + 9 * 300 + 4] ^= 1
    wanted = np.sort(np.array([key_digest(i) for i in ids], DIGEST_DTYPE))
    # A damaged key fails its block's CRC; a damaged length may move every key after it: refused too.
    with pytest.raises(CorruptStateError, match="s3://bkt/seg: block 1 of run b1 fails" if where == "key" else
                       "s3://bkt/seg"):
        runs_holding(bytes(data[-4096:]), len(data), lambda start, stop: bytes(data[start:stop]), "s3://bkt/seg",
                     wanted)
    with pytest.raises(CorruptStateError, match="s3://bkt/seg"):
        decode_segment(bytes(data), "s3://bkt/seg")


def test_a_claim_is_the_same_only_with_the_same_order_keys() -> None:
    """verify-rerun compares a rerun's claims with the committed ones (eventdedup.cache.claims): in
    an ordered store an entry's order key is part of the claim."""
    from eventdedup.cache.claims import _same_run

    committed = decode_segment(encode_segment([ordered_run("b1", ["a", "b"], [b"\x00" + b"\x80" * 8, None])]), "s")[0]
    assert _same_run(committed, ordered_run("b1", ["a", "b"], [b"\x00" + b"\x80" * 8, None]))
    assert not _same_run(committed, ordered_run("b1", ["a", "b"], [b"\x00" + b"\x81" * 8, None]))
    assert not _same_run(committed, ordered_run("b1", ["a", "b"], [b"\x00" + b"\x80" * 8, b"\x01x"]))
    assert not _same_run(committed, run("b1", ["a", "b"], [0, 1]))  # a claim without keys
