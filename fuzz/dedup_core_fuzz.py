"""Differential fuzzing of eventdedup's compiled dedup core against its Python reference.

An input's first byte chooses what its bytes become; each is run both ways and must agree:
- 0: an id guard's bytes (any bytes, or a real guard with bytes changed and its CRC made good):
  decode_guard reads the same guard or refuses it with the same message;
- 1: a bucket's rows and committed runs, key hours and a policy (decide_key_group): the same
  outcome, action and holder per row;
- 2: a guard grown by ids (IdGuard.with_ids), written (encode_guard) and probed (candidate_hours);
- 3: cache segments of runs (encode_segment): the same bytes;
- 4: fixed-width keys (lex_order): numpy's stable order.
A disagreement raises CoreMismatch: atheris reports it and writes the input as a crash artifact.

Coverage: the Python's (the reference, instrumented below), and, when EVENTDEDUP_FUZZ_CORE names a
gcc trace-pc build of the core (build_core.py), the core's own. `make fuzz` runs it long,
tests/unit/dedup/test_native_dedup.py briefly; fuzz/README.md.
"""
from __future__ import annotations

import struct
import sys
import zlib
from types import ModuleType

import atheris
import numpy as np
from coverage import instrumented_core, register_core_coverage

with atheris.instrument_imports(include=["eventdedup"]):
    from eventdedup import native_dedup
    from eventdedup.cache.guard import GuardProbe, IdGuard, decode_guard, encode_guard
    from eventdedup.cache.segment import CacheRun, encode_segment
    from eventdedup.cache.view import CacheView
    from eventdedup.dedup.decide import DuplicatePolicy, KeyHours, decide_key_group
    from eventdedup.errors import CorruptStateError
    from eventdedup.sorting import lex_order, unique_inverse

HOURS = (490_000, 490_001, 490_024, 489_970)


class CoreMismatch(AssertionError):
    """The core and the reference disagree."""


CORE: ModuleType | None = None  # the core compared: the instrumented build where there is one, else the shipped
_INSTRUMENTED = False
_registered = False


def digests(provider: atheris.FuzzedDataProvider, count: int) -> np.ndarray:
    """`count` digests from a pool of a few, whose first words often tie."""
    pool = max(1, provider.ConsumeIntInRange(1, 8))
    distinct = [bytes([provider.ConsumeIntInRange(0, 2)]) * 8 + provider.ConsumeBytes(8).ljust(8, b"\0")
                for _ in range(pool)]
    return np.array([distinct[provider.ConsumeIntInRange(0, pool - 1)] for _ in range(count)], "S16")


def check_guard_bytes(provider: atheris.FuzzedDataProvider) -> None:
    data = provider.ConsumeBytes(provider.ConsumeIntInRange(0, 600))
    if provider.ConsumeBool():  # a real guard, changed, its CRC made good: the layout's checks decide
        count = provider.ConsumeIntInRange(0, 40)
        guard = IdGuard.empty().with_ids(digests(provider, count), np.array(
            [HOURS[provider.ConsumeIntInRange(0, 3)] for _ in range(count)], np.int64))
        body = bytearray(encode_guard(guard)[:-4])
        for _ in range(provider.ConsumeIntInRange(0, 3)):
            if body:
                body[provider.ConsumeIntInRange(0, len(body) - 1)] ^= provider.ConsumeIntInRange(1, 255)
        data = bytes(body) + struct.pack(">I", zlib.crc32(bytes(body)))
    outcomes = []
    for core in (None, CORE):
        try:
            read = decode_guard(data, "g", core)
            outcomes.append((read.hours.tolist(), read.hashes.tolist(), read.slots.tolist()))
        except CorruptStateError as exc:
            outcomes.append(str(exc))
    if outcomes[0] != outcomes[1]:
        raise CoreMismatch(f"decode_guard: {outcomes[0]!r} != {outcomes[1]!r}")


def check_decision(provider: atheris.FuzzedDataProvider) -> None:
    rows = provider.ConsumeIntInRange(0, 30)
    keys = digests(provider, rows + 20)
    row_digests = keys[:rows]
    fingerprints = np.array([provider.ConsumeIntInRange(0, 2) for _ in range(rows)], np.uint64)
    priorities = np.array(np.random.default_rng(provider.ConsumeIntInRange(0, 255)).permutation(rows), np.int64)
    runs, hours = [], []
    for number in range(provider.ConsumeIntInRange(0, 4)):
        size = provider.ConsumeIntInRange(1, 12)
        chosen = keys[[provider.ConsumeIntInRange(0, len(keys) - 1) for _ in range(size)]]
        runs.append(CacheRun.build(f"b{number}", chosen,
                                   np.array([provider.ConsumeIntInRange(0, 2) for _ in range(size)], np.uint64)))
        hours.append(HOURS[provider.ConsumeIntInRange(0, 3)])
    key_hours = None
    if rows and provider.ConsumeBool():
        distinct, key_of_row = unique_inverse(row_digests)
        key_hours = KeyHours(distinct, key_of_row, {hour: np.array([provider.ConsumeBool() for _ in distinct])
                                                    for hour in HOURS if provider.ConsumeBool()})
    policy = DuplicatePolicy(("rename", "keep", "drop")[provider.ConsumeIntInRange(0, 2)], provider.ConsumeBool())
    view = CacheView(tuple(runs), tuple(hours))
    reference = decide_key_group(row_digests, fingerprints, priorities, view, "b", policy, key_hours)
    compiled = decide_key_group(row_digests, fingerprints, priorities, view, "b", policy, key_hours, CORE)
    for name in ("outcomes", "actions", "holder"):
        if not np.array_equal(getattr(reference, name), getattr(compiled, name)):
            raise CoreMismatch(f"decide_key_group {name}: {getattr(reference, name)} != {getattr(compiled, name)}")


def check_guard_growth(provider: atheris.FuzzedDataProvider) -> None:
    guard = IdGuard.empty()
    for _ in range(provider.ConsumeIntInRange(0, 3)):
        count = provider.ConsumeIntInRange(0, 30)
        guard = guard.with_ids(digests(provider, count),
                               np.array([HOURS[provider.ConsumeIntInRange(0, 3)] for _ in range(count)], np.int64))
    count = provider.ConsumeIntInRange(0, 30)
    new, new_hours = digests(provider, count), np.array([HOURS[provider.ConsumeIntInRange(0, 3)]
                                                         for _ in range(count)], np.int64)
    grown, grown_compiled = guard.with_ids(new, new_hours), guard.with_ids(new, new_hours, CORE)
    if [grown.hours.tolist(), grown.hashes.tolist(), grown.slots.tolist()] != [
            grown_compiled.hours.tolist(), grown_compiled.hashes.tolist(), grown_compiled.slots.tolist()]:
        raise CoreMismatch("IdGuard.with_ids differs")
    if encode_guard(grown) != encode_guard(grown, CORE):
        raise CoreMismatch("encode_guard differs")
    probe = GuardProbe.of(np.concatenate([new, digests(provider, 5)]))
    reference, compiled = grown.candidate_hours(probe), grown.candidate_hours(probe, CORE)
    if not (np.array_equal(reference[0], compiled[0]) and np.array_equal(reference[1], compiled[1])):
        raise CoreMismatch("candidate_hours differs")


def check_segments(provider: atheris.FuzzedDataProvider) -> None:
    runs = []
    for number in range(provider.ConsumeIntInRange(0, 3)):
        size = provider.ConsumeIntInRange(0, 300)
        fingerprints = np.array([provider.ConsumeIntInRange(0, 2**63 - 1) for _ in range(size)], np.uint64)
        runs.append(CacheRun.build(f"o{number}" * provider.ConsumeIntInRange(1, 3), digests(provider, size),
                                   fingerprints))
    if encode_segment(runs) != encode_segment(runs, CORE):
        raise CoreMismatch("encode_segment differs")


def check_order(provider: atheris.FuzzedDataProvider) -> None:
    width = (8, 16, 24)[provider.ConsumeIntInRange(0, 2)]
    count = provider.ConsumeIntInRange(0, 50)
    rows = [bytes([provider.ConsumeIntInRange(0, 1)]) * 8 + provider.ConsumeBytes(width - 8).ljust(width - 8, b"\0")
            for _ in range(count)]
    values = np.array(rows, f"S{width}") if count else np.zeros(0, f"S{width}")
    if not np.array_equal(lex_order(values, CORE), np.argsort(values, kind="stable")):
        raise CoreMismatch("lex_order differs")


CHECKS = (check_guard_bytes, check_decision, check_guard_growth, check_segments, check_order)


def test_one_input(data: bytes) -> None:
    global _registered
    if _INSTRUMENTED and not _registered:
        assert CORE is not None
        register_core_coverage(CORE)
        _registered = True
    provider = atheris.FuzzedDataProvider(data)
    CHECKS[provider.ConsumeIntInRange(0, len(CHECKS) - 1)](provider)


def main() -> None:
    global CORE, _INSTRUMENTED
    if not native_dedup.available():
        sys.exit(f"the compiled dedup core is not built ({native_dedup.why_not()}): run `make venv`")
    instrumented = instrumented_core("_dedup_core")
    _INSTRUMENTED = instrumented is not None
    CORE = instrumented or native_dedup.in_use(True)
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
