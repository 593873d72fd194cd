from __future__ import annotations

import numpy as np
import pytest

from eventdedup.cache.segment import CacheRun, decode_segment, encode_segment
from eventdedup.errors import CorruptStateError
from eventdedup.keys import DIGEST_DTYPE, key_digest


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


def test_entries_cost_24_bytes_each_plus_a_small_per_run_header() -> None:
    one = len(encode_segment([run("20261122T0500Z", [str(i) for i in range(1000)], list(range(1000)))]))
    two = len(encode_segment([run("20261122T0500Z", [str(i) for i in range(2000)], list(range(2000)))]))
    assert two - one == 1000 * 24
    assert one - 1000 * 24 < 64


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty", "extend"])
def test_damaged_segments_raise_naming_the_object_never_read_as_empty(damage: str) -> None:
    data = encode_segment([run("b1", ["a", "b"], [1, 2])])
    damaged = {
        "truncate": data[:-5], "flip": data[:10] + bytes([data[10] ^ 1]) + data[11:],
        "garbage": b"<html>error</html>" * 3, "empty": b"", "extend": data + b"\x00",
    }[damage]
    with pytest.raises(CorruptStateError, match="s3://bkt/cache/seg"):
        decode_segment(damaged, "s3://bkt/cache/seg")
