"""The compiled dedup core (native/dedup_core.cpp, eventdedup.native_dedup) against its Python
reference, which stays the definition: every kernel on random inputs, a bucket's whole outcome
(output, audit, counts, new segments, new guard) with the core on and off, damaged guards
refused alike, and coverage floors so that the comparison cannot pass by exercising nothing.

The fuzzer (fuzz/dedup_core_fuzz.py, `make fuzz`) drives the same comparisons from arbitrary bytes.
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventdedup import native_dedup
from eventdedup.cache.guard import GuardProbe, IdGuard, decode_guard, encode_guard
from eventdedup.cache.segment import CacheRun, encode_segment
from eventdedup.cache.view import CacheView
from eventdedup.dedup.decide import Action, DuplicatePolicy, KeyHours, Outcome, decide_key_group
from eventdedup.errors import CorruptStateError
from eventdedup.sorting import lex_order, unique_inverse

from ...support.reference_model import ModelPolicy
from .test_dedup_properties import HOUR, MemoryCache, bucket_outcomes, chain_policies, policies, streams

pytestmark = pytest.mark.skipif(not native_dedup.available(),
                                reason=f"the compiled dedup core is not built: {native_dedup.why_not()}")
CORE = native_dedup.in_use(True)


def digests_of(rng: np.random.Generator, count: int, pool: int) -> np.ndarray:
    """`count` digests drawn from `pool` distinct ones that often share their first 8 bytes (the
    core compares words: a tie on the first must be broken by the second)."""
    firsts = rng.integers(0, 4, pool).astype(">u8").view(np.uint8).reshape(pool, 8)
    seconds = rng.integers(0, 2**63, pool, dtype=np.int64).astype(">u8").view(np.uint8).reshape(pool, 8)
    distinct = np.concatenate([firsts, seconds], axis=1).reshape(-1).view("S16")
    return distinct[rng.integers(0, pool, count)]


def random_case(rng: np.random.Generator) -> tuple:
    """Rows, a view of committed runs in several hours, key hours, a policy: decide_key_group's inputs."""
    n = int(rng.integers(0, 40))
    pool = int(rng.integers(1, 12))
    universe = digests_of(rng, 60, pool)
    digests = universe[rng.integers(0, len(universe), n)] if n else np.zeros(0, "S16")
    fingerprints = rng.integers(0, 3, n).astype(np.uint64)
    priorities = rng.permutation(n).astype(np.int64) if rng.random() < 0.5 else np.arange(n, dtype=np.int64)
    hours = [HOUR, HOUR + 1, HOUR + 24]
    runs, run_hours = [], []
    for number in range(int(rng.integers(0, 6))):
        size = int(rng.integers(0, 20))
        run = CacheRun.build(f"b{number}", universe[rng.integers(0, len(universe), size)],
                             rng.integers(0, 3, size).astype(np.uint64))
        if len(run):
            runs.append(run)
            run_hours.append(int(rng.choice(hours)))
    view = CacheView(tuple(runs), tuple(run_hours))
    key_hours = None
    if n and rng.random() < 0.7:
        keys, key_of_row = unique_inverse(digests)
        key_hours = KeyHours(keys, key_of_row, {hour: rng.random(len(keys)) < 0.7 for hour in hours
                                                if rng.random() < 0.8})
    policy = DuplicatePolicy(str(rng.choice(["rename", "keep", "drop"])), bool(rng.random() < 0.4))
    return digests, fingerprints, priorities, view, policy, key_hours


def test_the_compiled_decision_is_the_reference_on_random_keys_runs_and_policies() -> None:
    rng = np.random.default_rng(20261128)
    outcomes: Counter[int] = Counter()
    actions: Counter[int] = Counter()
    for case in range(2000):
        digests, fingerprints, priorities, view, policy, key_hours = random_case(rng)
        reference = decide_key_group(digests, fingerprints, priorities, view, "now", policy, key_hours)
        compiled = decide_key_group(digests, fingerprints, priorities, view, "now", policy, key_hours, CORE)
        for name in ("outcomes", "actions", "holder"):
            assert np.array_equal(getattr(reference, name), getattr(compiled, name)), (case, name)
        assert compiled.holder.dtype == reference.holder.dtype == np.int32
        outcomes.update(reference.outcomes.tolist())
        actions.update(reference.actions.tolist())
    # Every outcome and action was decided many times: the comparison covered each branch.
    # (A stale version is an ordered store's, which the Python decides: never the core.)
    assert all(outcomes[outcome] >= 200 for outcome in Outcome if outcome is not Outcome.STALE_VERSION), outcomes
    assert all(actions[action] >= 200 for action in Action), actions


@given(stream=streams, policy=policies, chains=chain_policies)
def test_a_bucket_decided_by_the_core_is_the_reference_bucket_byte_for_byte(stream, policy, chains) -> None:
    """Every field of each bucket's outcome, the encoded segments and guards included, through
    several batches whose commits the next ones read (so the core meets its own segments)."""
    caches = {compiled: MemoryCache() for compiled in (False, True)}
    committed: dict[str, int] = {}
    arrival = HOUR
    for number, (rows, later, _) in enumerate(stream, start=1):  # retractions: the properties' concern
        batch, arrival = f"b{number}", arrival + later
        decided = {compiled: bucket_outcomes(caches[compiled], committed, arrival, batch, rows, policy, chains,
                                             compiled=compiled) for compiled in (False, True)}
        (reference, written), (compiled, written_compiled) = decided[False], decided[True]
        assert len(reference) == len(compiled)
        for (rows_a, a), (rows_b, b) in zip(reference, compiled, strict=True):
            assert np.array_equal(rows_a, rows_b)
            assert np.array_equal(a.emitted, b.emitted) and np.array_equal(a.duplicates, b.duplicates)
            assert a.output.equals(b.output) and a.audit.equals(b.audit) and a.counts == b.counts
            assert a.segments == b.segments
            assert (a.guard is None) == (b.guard is None)
            if a.guard is not None and b.guard is not None:
                assert encode_guard(a.guard) == encode_guard(b.guard, CORE)
        assert written == written_compiled
        for compiled_flag in (False, True):
            caches[compiled_flag].commit(decided[compiled_flag][1].segments, decided[compiled_flag][1].guards)
        committed[batch] = arrival


def random_guard(rng: np.random.Generator) -> tuple[IdGuard, np.ndarray, np.ndarray]:
    guard = IdGuard.empty()
    for _ in range(int(rng.integers(0, 4))):
        size = int(rng.integers(0, 300))
        digests = digests_of(rng, size, max(1, size))
        hours = rng.choice([HOUR - 30, HOUR - 2, HOUR, HOUR + 1, HOUR + 24], size).astype(np.int64)
        guard = guard.with_ids(digests, hours)
    size = int(rng.integers(0, 200))
    return guard, digests_of(rng, size, max(1, size)), rng.choice([HOUR, HOUR + 3], size).astype(np.int64)


def test_guard_kernels_are_the_reference_on_random_guards() -> None:
    rng = np.random.default_rng(11)
    probed = 0
    for case in range(400):
        guard, digests, hours = random_guard(rng)
        grown, grown_compiled = guard.with_ids(digests, hours), guard.with_ids(digests, hours, CORE)
        for name in ("hours", "hashes", "slots"):
            assert np.array_equal(getattr(grown, name), getattr(grown_compiled, name)), (case, name)
        data = encode_guard(grown)
        assert encode_guard(grown, CORE) == data, case
        decoded, decoded_compiled = decode_guard(data, "g"), decode_guard(data, "g", CORE)
        for name in ("hours", "hashes", "slots"):
            assert np.array_equal(getattr(decoded, name), getattr(decoded_compiled, name)), (case, name)
        probes = np.concatenate([digests[:20], digests_of(rng, 10, 10)]) if len(digests) else digests_of(rng, 5, 5)
        probe = GuardProbe.of(probes)
        reference, compiled = grown.candidate_hours(probe), grown.candidate_hours(probe, CORE)
        assert np.array_equal(reference[0], compiled[0]) and np.array_equal(reference[1], compiled[1]), case
        probed += len(reference[0])
    assert probed > 2000  # the probes found hours: the comparison is not of empty results


@given(data=st.binary(max_size=400), flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)),
                                                    max_size=3))
def test_a_damaged_or_arbitrary_guard_is_refused_or_read_alike(data: bytes, flips: list[tuple[int, int]]) -> None:
    """Any bytes, and a real guard with bytes changed (its CRC recomputed, so the layout checks
    are what must catch it): the core and the reference refuse it with the same message, or read
    the same guard."""
    import struct
    import zlib

    rng = np.random.default_rng(len(data))
    guard, digests, hours = random_guard(rng)
    body = bytearray(encode_guard(guard.with_ids(digests, hours))[:-4])
    for at, value in flips:
        if body:
            body[at % len(body)] ^= value
    for candidate in (data, bytes(body) + struct.pack(">I", zlib.crc32(bytes(body)))):
        outcomes = []
        for core in (None, CORE):
            try:
                read = decode_guard(candidate, "g", core)
                outcomes.append(("read", read.hours.tolist(), read.hashes.tolist(), read.slots.tolist()))
            except CorruptStateError as exc:
                outcomes.append(("refused", str(exc)))
        assert outcomes[0] == outcomes[1]


def test_segments_encoded_by_the_core_are_the_references_bytes() -> None:
    rng = np.random.default_rng(5)
    for case in range(300):
        runs = []
        for number in range(int(rng.integers(0, 4))):
            size = int(rng.choice([0, 1, 255, 256, 257, int(rng.integers(0, 1000))]))
            runs.append(CacheRun.build(f"owner-{number}" * int(rng.integers(1, 4)), digests_of(rng, size, max(size, 1)),
                                       rng.integers(0, 2**63, size).astype(np.uint64)))
        assert encode_segment(runs, CORE) == encode_segment(runs), case


@given(width=st.sampled_from([8, 16, 24]), rows=st.lists(st.integers(0, 7), max_size=300),
       pool=st.integers(1, 20))
def test_the_cores_order_of_byte_strings_is_numpys_stable_order(width: int, rows: list[int], pool: int) -> None:
    rng = np.random.default_rng(pool)
    raw = rng.integers(0, 3, (pool, width), dtype=np.uint8)
    raw[:, :8] = rng.integers(0, 2, (pool, 1), dtype=np.uint8)  # first words shared: later words decide
    distinct = np.frombuffer(raw.tobytes(), f"S{width}")
    values = distinct[np.array(rows, np.int64) % pool] if rows else np.zeros(0, f"S{width}")
    assert np.array_equal(lex_order(values, CORE), np.argsort(values, kind="stable"))


def test_the_core_is_used_only_where_the_rules_want_it() -> None:
    assert native_dedup.in_use(False) is None
    assert native_dedup.in_use(True) is CORE is not None


def test_a_bucket_table_reaches_the_core_through_decide_bucket() -> None:
    """decide_bucket hands the core's outcome on: the same arrays as the reference, from a table."""
    cache = MemoryCache()
    rows = [("a", 0, 1, None), ("a", 0, 1, None), ("b", 1, 2, None)]
    decided = {compiled: bucket_outcomes(cache, {}, HOUR, "b1", rows, ModelPolicy(), compiled=compiled)[0]
               for compiled in (False, True)}
    assert [outcome.counts for _, outcome in decided[True]] == [outcome.counts for _, outcome in decided[False]]
    assert sum(outcome.output.num_rows for _, outcome in decided[True]) == 2
    assert isinstance(decided[True][0][1].output, pa.Table)


def test_atheris_short_run(tmp_path, record_property) -> None:  # type: ignore[no-untyped-def]
    """The dedup core's harness (fuzz/dedup_core_fuzz.py) over its seeds for a bounded number of
    inputs: no input makes the core and the reference disagree. `make fuzz` runs it long."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("atheris")
    fuzz = Path(__file__).resolve().parents[3] / "fuzz"
    (tmp_path / "corpus").mkdir()
    runs = 20_000
    command = [sys.executable, str(fuzz / "dedup_core_fuzz.py"), f"-runs={runs}", "-seed=52",
               f"-artifact_prefix={tmp_path}/", "-timeout=60", str(tmp_path / "corpus"), str(fuzz / "corpus" / "dedup_core")]
    run = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=900, check=False,
                         cwd=fuzz.parent)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-6000:]
    done = re.findall(r"^Done (\d+) runs", output, re.MULTILINE)
    assert done and int(done[-1]) == runs, output[-2000:]
    record_property("atheris_executions", int(done[-1]))
