"""The compiled dedup core (native/dedup_core.cpp), when it is built: the kernels of deciding a
bucket, each exactly its Python reference, which stays the definition.

- `decide`: eventdedup.dedup.decide.decide_key_group, whole;
- `guard_probe`, `guard_unpack`, `guard_with_ids`, `guard_encode`: the id guard's lookups and
  layout (eventdedup.cache.guard);
- `segment_encode`: a cache segment's bytes (eventdedup.cache.segment);
- `sort_order`: the stable order of fixed-width byte strings (eventdedup.sorting.lex_order).

The callers use it where `[dedup] compiled_stage` is on (BucketRules.compiled) and the core is
built; otherwise the Python runs, and the first bucket of a process logs one warning saying why.
`make venv` builds it (eventdedup_dev.native); tests/unit/dedup/test_native_dedup.py and fuzz/
hold every kernel to its reference.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType

import numpy as np
import numpy.typing as npt

from eventdedup import compiled

_CORE, _WHY_NOT = compiled.load("eventdedup._dedup_core", "dedup_core.cpp")


def available() -> bool:
    return _CORE is not None


def why_not() -> str:
    """Why the core is not loaded ('' when it is)."""
    return _WHY_NOT


def in_use(compiled_stage: bool) -> ModuleType | None:
    """The core, where the batch's rules want it and it is built (None: the Python runs; a
    process that wanted it and lacks it says so once)."""
    return compiled.in_use(_CORE, compiled_stage, "dedup core", _WHY_NOT, "buckets are decided in Python, slower",
                           "a C++ compiler and zlib1g-dev")


def sort_order(core: ModuleType, values: npt.NDArray[np.bytes_]) -> npt.NDArray[np.intp]:
    """`np.argsort(values, kind="stable")` of an `S<8k>` array."""
    packed = np.ascontiguousarray(values)
    return np.frombuffer(core.sort_order(packed, values.dtype.itemsize), np.int64).astype(np.intp)


Run = tuple[npt.NDArray[np.bytes_], npt.NDArray[np.uint64], int]  # digests, fingerprints, hour


def decide(core: ModuleType, digests: npt.NDArray[np.bytes_], fingerprints: npt.NDArray[np.uint64],
           priorities: npt.NDArray[np.int64], runs: Sequence[Run],
           key_hours: Mapping[int, npt.NDArray[np.bool_]] | None, synthetic_action: int,
           changelog: bool) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8], npt.NDArray[np.int32]]:
    """decide_key_group's outcomes, actions and holders per row. `runs`: (digests, fingerprints,
    hour) of the view's runs, in its order; `key_hours`: per hour, a mask over the rows' distinct
    keys (sorted); None: every run may hold every key."""
    masks = None if key_hours is None else [(hour, np.ascontiguousarray(mask, np.uint8))
                                            for hour, mask in key_hours.items()]
    outcomes, actions, holders = core.decide(
        np.ascontiguousarray(digests), np.ascontiguousarray(fingerprints, np.uint64),
        np.ascontiguousarray(priorities, np.int64),
        [(np.ascontiguousarray(run_digests), np.ascontiguousarray(run_fingerprints, np.uint64), int(hour))
         for run_digests, run_fingerprints, hour in runs], masks, int(synthetic_action), int(changelog))
    return (np.frombuffer(outcomes, np.uint8), np.frombuffer(actions, np.uint8), np.frombuffer(holders, np.int32))


def guard_probe(core: ModuleType, hashes: npt.NDArray[np.uint64], wanted: npt.NDArray[np.uint64],
                order: npt.NDArray[np.intp]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """(query, position) for every position of the guard's sorted `hashes` holding a `wanted` hash
    (sorted), the query being that hash's `order` entry."""
    queries, positions = core.guard_probe(np.ascontiguousarray(hashes, np.uint64),
                                          np.ascontiguousarray(wanted, np.uint64),
                                          np.ascontiguousarray(order, np.int64))
    return np.frombuffer(queries, np.int64).astype(np.intp), np.frombuffer(positions, np.int64).astype(np.intp)


def guard_unpack(core: ModuleType, parts: Sequence[bytes], count: int, high_bits: int, low_bits: int, slot_bits: int,
                 main: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint32], int, int]:
    """A format-2 guard's hashes and slots from its unary, low, flag and slot parts; and how many
    ones the unary part holds and how many entries are flagged (for the caller's checks)."""
    hashes, slots, ones, flagged = core.guard_unpack(parts[0], parts[1], parts[2], parts[3], count, high_bits,
                                                     low_bits, slot_bits, main)
    return np.frombuffer(hashes, np.uint64), np.frombuffer(slots, np.uint32), int(ones), int(flagged)


def guard_with_ids(core: ModuleType, hours: npt.NDArray[np.int64], hashes: npt.NDArray[np.uint64],
                   slots: npt.NDArray[np.uint32], hash_bits: int, digests: npt.NDArray[np.bytes_],
                   new_hours: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64],
                                                              npt.NDArray[np.uint32]]:
    out_hours, out_hashes, out_slots = core.guard_with_ids(
        np.ascontiguousarray(hours, np.int64), np.ascontiguousarray(hashes, np.uint64),
        np.ascontiguousarray(slots, np.uint32), hash_bits, np.ascontiguousarray(digests),
        np.ascontiguousarray(new_hours, np.int64))
    return (np.frombuffer(out_hours, np.int64), np.frombuffer(out_hashes, np.uint64),
            np.frombuffer(out_slots, np.uint32))


def guard_encode(core: ModuleType, hours: npt.NDArray[np.int64], hashes: npt.NDArray[np.uint64],
                 slots: npt.NDArray[np.uint32]) -> bytes:
    """A format-2 guard's body, without its CRC."""
    body: bytes = core.guard_encode(np.ascontiguousarray(hours, np.int64), np.ascontiguousarray(hashes, np.uint64),
                                    np.ascontiguousarray(slots, np.uint32))
    return body


def segment_encode(core: ModuleType,
                   runs: Sequence[tuple[str, npt.NDArray[np.bytes_], npt.NDArray[np.uint64]]]) -> bytes:
    """A format-2 cache segment of these runs (owner, sorted digests, fingerprints)."""
    data: bytes = core.segment_encode([(owner.encode("ascii"), np.ascontiguousarray(digests),
                                        np.ascontiguousarray(fingerprints, np.uint64))
                                       for owner, digests, fingerprints in runs])
    return data
