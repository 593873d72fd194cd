"""Large objects are read as line-aligned byte ranges by several tasks, and nothing about the
batch changes: every line is read exactly once, line numbers are the object's, keep-first keeps
the earliest copy across ranges, bad lines in any range are quarantined with their own number.

A large gzip object, which cannot be read in byte ranges, is cut into shares of its inflated
lines instead, with the same guarantees.

Expected rows are computed here from the input lines and the README's rules; the ranges are
forced small (the planner's sizes are patched in the driver, which plans the reads)."""
from __future__ import annotations

import gzip
import json
import os
import zlib

import pytest

from eventdedup.inputs.selector import InputSelector
from eventdedup.job import driver, read_units
from eventdedup.job.read_units import Cut, ReadUnit, plan_read_tasks, read_unit_bytes
from eventdedup.ops.pipeline import run_batch, verify_rerun
from eventdedup.s3store import S3Store

from ..support.helpers import NOW, commit_counts, committed_rows, make_config

TIME = "2026-11-22T05:00:00Z"


def line_starts(body: bytes) -> list[int]:
    starts = [0] + [i + 1 for i, byte in enumerate(body) if byte == 0x0A]
    return [start for start in starts if start < len(body)]


def expected_range_bytes(body: bytes, start: int, stop: int) -> bytes:
    """The lines whose first byte lies in [start, stop), each through its newline."""
    starts = line_starts(body)
    mine = [s for s in starts if start <= s < stop]
    if not mine:
        return b""
    after = [s for s in starts if s > mine[-1]]
    return body[mine[0]:after[0] if after else len(body)]


@pytest.mark.parametrize("ranges", [2, 3, 5, 8, 13])
def test_ranges_hold_every_line_exactly_once_in_the_range_it_starts_in(store, ranges) -> None:
    long_line = b'{"event_id":"long","pad":"' + b"y" * 300 + b'"}'
    body = (b"\xef\xbb\xbf" + b"\n".join([b'{"event_id":"a"}', b"", b'{"event_id":"b"}\r', long_line,
                                         b"\n", b'{"event_id":"c"}', b"tail-without-newline"]))
    info = store.put_bytes("landing/r/ranges.jsonl", body)
    bounds = [len(body) * k // ranges for k in range(ranges + 1)]
    pieces = []
    for k in range(ranges):
        unit = ReadUnit(0, info, k, ranges, bounds[k], bounds[k + 1])
        got = read_unit_bytes(store, unit)
        assert got == expected_range_bytes(body, bounds[k], bounds[k + 1]), k
        pieces.append(got)
    assert b"".join(pieces) == body


def test_a_range_boundary_on_a_newline_starts_the_next_line_in_the_next_range(store) -> None:
    body = b"0123\n5678\nabc\n"
    info = store.put_bytes("landing/r/exact.jsonl", body)
    for cut in range(1, len(body)):
        first = read_unit_bytes(store, ReadUnit(0, info, 0, 2, 0, cut))
        second = read_unit_bytes(store, ReadUnit(0, info, 1, 2, cut, len(body)))
        assert first + second == body, cut
        assert second == expected_range_bytes(body, cut, len(body)), cut


def test_plan_cuts_large_objects_packs_small_ones_and_never_cuts_what_may_not_be_cut(monkeypatch, store) -> None:
    monkeypatch.setattr(read_units, "MAX_SPLIT_BYTES", 1000)
    monkeypatch.setattr(read_units, "OPEN_COST_BYTES", 10)
    big = store.put_bytes("landing/p/big.jsonl", b"x\n" * 2000)  # 4,000 bytes
    gz = store.put_bytes("landing/p/big.jsonl.gz", gzip.compress(b"x\n" * 20_000, mtime=0, compresslevel=0))
    whole = store.put_bytes("landing/p/whole.jsonl", b"x\n" * 2000)  # as an excluded or oversized object
    small = [store.put_bytes(f"landing/p/s{i}.jsonl", b"x\n" * 10) for i in range(6)]
    inputs = [(0, big), (1, gz), (8, whole), *[(2 + i, info) for i, info in enumerate(small)]]
    cuts = {0: Cut.BYTES, 1: Cut.SHARES, 8: Cut.WHOLE}
    tasks = plan_read_tasks(inputs, 2, lambda index, info: cuts[index])
    units = [unit for task in tasks for unit in task]
    by_object: dict[int, list[ReadUnit]] = {}
    for unit in units:
        by_object.setdefault(unit.input_index, []).append(unit)
    for index, info in inputs:  # every object's ranges tile it, in order
        parts = sorted(by_object[index], key=lambda unit: unit.unit)
        assert [p.unit for p in parts] == list(range(len(parts)))
        assert parts[0].start == 0 and parts[-1].stop == info.size
        assert all(a.stop == b.start for a, b in zip(parts, parts[1:], strict=False))
    # bytes: as many ranges as shares of the input; a gzip object: one share per core at most,
    # each inflating the whole object; an object that may not be cut: one range
    assert len(by_object[0]) > 2 and not any(unit.inflated_share for unit in by_object[0])
    assert len(by_object[1]) == 2 and all(unit.inflated_share for unit in by_object[1])
    assert len(by_object[8]) == 1 and not by_object[8][0].inflated_share
    assert all(len(by_object[2 + i]) == 1 for i in range(6))
    share = read_units.split_bytes(sum(info.size for _, info in inputs), 2)
    assert all(unit.size <= share for unit in by_object[0])  # cut into shares of the input
    assert any(len(task) > 1 for task in tasks)  # small objects share tasks


def events_with_copies_and_bad_lines(count: int) -> list[bytes]:
    """Events of varied length, some malformed, some natural copies of a line 200 lines back."""
    lines: list[bytes] = []
    for n in range(count):
        if n % 97 == 13:
            lines.append(b'{"event_id":"broken-%d",' % n)  # malformed JSON
        elif n % 50 == 7 and n > 200:
            lines.append(lines[n - 200])
        else:
            pad = "p" * (n * 7 % 90)
            lines.append(json.dumps({"event_id": f"e-{n}", "created_at": TIME, "pad": pad},
                                    separators=(",", ":")).encode())
    return lines


def test_a_batch_read_in_many_ranges_is_the_batch_read_whole(monkeypatch, store, config, spark) -> None:
    lines = events_with_copies_and_bad_lines(96_000)  # ~12 MB: data files span many Parquet pages
    store.put_bytes("landing/big/1.jsonl", b"\n".join(lines) + b"\n")
    store.put_bytes("landing/big/2.jsonl.gz", gzip.compress(b"\n".join(lines[:300]) + b"\n", mtime=0))
    # stored, not compressed (~12 MB), so over a task's share: cut into shares of its inflated lines
    store.put_bytes("landing/big/3.jsonl.gz", gzip.compress(b"\n".join(lines[::-1]) + b"\n", mtime=0, compresslevel=0))
    # and one cut short mid-line: its complete lines are read, its partial last line quarantined
    truncated = gzip.compress(b"\n".join(lines[1000:60_000]) + b"\n", mtime=0, compresslevel=0)[:6_000_017]
    store.put_bytes("landing/big/4.jsonl.gz", truncated)
    *complete, partial = zlib.decompressobj(wbits=31).decompress(truncated).split(b"\n")
    assert partial and len(complete) > 40_000
    monkeypatch.setattr(read_units, "MAX_SPLIT_BYTES", 1024 * 1024)
    monkeypatch.setattr(read_units, "OPEN_COST_BYTES", 1024)
    planned: list[ReadUnit] = []

    def recording_plan(*args, **kwargs):  # the plan as the driver made it
        tasks = plan_read_tasks(*args, **kwargs)
        planned.extend(unit for task in tasks for unit in task)
        return tasks

    monkeypatch.setattr(driver, "plan_read_tasks", recording_plan)

    run_batch(store, config, "ranges", InputSelector(input_prefix="landing/big/"), NOW, lambda: spark)

    cut = {unit.info.key: (unit.units, unit.inflated_share) for unit in planned}
    assert cut["landing/big/1.jsonl"][0] > 2 and not cut["landing/big/1.jsonl"][1]
    assert (cut["landing/big/2.jsonl.gz"], cut["landing/big/3.jsonl.gz"]) == ((1, False), (2, True))
    assert cut["landing/big/4.jsonl.gz"] == (2, True)

    # The rules, applied to the lines in input order (object 1, then 2, 3, 4).
    expected_output: list[str] = []
    expected_audit: list[tuple[str, int, str]] = []
    expected_quarantine: list[tuple[str, int]] = []
    seen: set[str] = set()
    objects = {"landing/big/1.jsonl": lines, "landing/big/2.jsonl.gz": lines[:300],
               "landing/big/3.jsonl.gz": lines[::-1], "landing/big/4.jsonl.gz": complete}
    for key, object_lines in objects.items():
        for number, line in enumerate(object_lines, 1):
            try:
                event_id = json.loads(line)["event_id"]
            except json.JSONDecodeError:
                expected_quarantine.append((key, number))
                continue
            if event_id in seen:
                expected_audit.append((key, number, event_id))
            else:
                seen.add(event_id)
                expected_output.append(event_id)
    assert sorted(r["event_id"] for r in committed_rows(store, config, "data")) == sorted(expected_output)
    assert sorted((r["source_object"], r["line_number"], r["event_id"])
                  for r in committed_rows(store, config, "audit")) == sorted(expected_audit)
    quarantine = committed_rows(store, config, "quarantine")
    tail = ("landing/big/4.jsonl.gz", len(complete) + 1)
    assert sorted((r["source_object"], r["line_number"]) for r in quarantine) == sorted([*expected_quarantine, tail])
    for row in quarantine:  # each quarantined line is the object's line of that number
        if (row["source_object"], row["line_number"]) == tail:
            assert (row["raw"], row["error"].split(":")[0]) == (partial, "truncated gzip stream")
        else:
            assert row["raw"] == objects[row["source_object"]][row["line_number"] - 1]
    counts = commit_counts(store, config)["ranges"]
    assert counts["input_lines"] == 192_300 + len(complete) + 1 and counts["output_rows"] == len(expected_output)
    assert len(expected_audit) > 10 and len(expected_quarantine) > 10
    # Recomputed in other ranges (as on a cluster with other cores), byte for byte the same.
    monkeypatch.setattr(read_units, "MAX_SPLIT_BYTES", 600 * 1024)
    assert verify_rerun(store, config, "ranges", spark) == []


def damaged_gzip_objects() -> dict[str, bytes]:
    """Gzip objects as producers and damage leave them, each large enough to be cut."""
    lines = events_with_copies_and_bad_lines(1_500)  # ~160 kB
    lines[5:9] = [b"", b"  \r", lines[5] + b"\r", lines[1]]  # blank lines, CRLF, a copy of line 2
    text = b"\xef\xbb\xbf" + b"\n".join(lines)  # a byte order mark, no final newline
    cuts = [0, 1234, 5001, 5002, 40_000, len(text)]
    compressed = gzip.compress(b"\n".join(lines[::-1]) + b"\n", mtime=0)
    return {
        "landing/g/1.jsonl.gz": gzip.compress(text, mtime=0, compresslevel=0),
        # several members, each cut mid-line
        "landing/g/2.jsonl.gz": b"".join(gzip.compress(text[a:b], mtime=0) for a, b in zip(cuts, cuts[1:], strict=False)),
        "landing/g/3.jsonl.gz": gzip.compress(text, mtime=0, compresslevel=0)[:70_001],  # cut short mid-line
        # corrupt mid-stream: the lines inflated before the damage are read
        "landing/g/4.jsonl.gz": compressed[:len(compressed) // 2] + bytes([compressed[len(compressed) // 2] ^ 0x55])
        + compressed[len(compressed) // 2 + 1:] + bytes(20_000),
        "landing/g/5.jsonl.gz": gzip.compress(b"", mtime=0) * 3_000,  # empty, in 3,000 empty members
        "landing/g/6.jsonl.gz": gzip.compress(b"\n".join(lines * 3), mtime=0),  # inflates past max_object_bytes
    }


def test_gzip_objects_of_any_damage_read_in_shares_equal_them_read_whole(monkeypatch, s3_server, spark) -> None:
    """Each damaged object, cut into 5 shares, commits exactly the rows, audit entries,
    quarantined lines and counts it commits read whole: a finding about the object as a whole
    is reported once (the other shares report nothing), a damaged tail once, with its number."""
    monkeypatch.setattr(read_units, "MAX_SPLIT_BYTES", 1024)
    monkeypatch.setattr(read_units, "OPEN_COST_BYTES", 1024)
    planned: list[ReadUnit] = []

    def in_shares(inputs, parallelism, cut_of):  # five shares of every gzip object, whatever the cores
        tasks = plan_read_tasks(inputs, 5, cut_of)
        planned.extend(unit for task in tasks for unit in task)
        return tasks

    def whole(inputs, parallelism, cut_of):
        return plan_read_tasks(inputs, parallelism, lambda index, info: Cut.WHOLE)

    committed = {}
    for name, plan in (("whole", whole), ("shares", in_shares)):
        bucket = f"gzip-{name}-{os.getpid()}"
        s3_server.client().create_bucket(Bucket=bucket)
        config = make_config(s3_server.endpoint_url, bucket, events={"max_line_bytes": 100_000,
                                                                      "max_object_bytes": 200_000})
        store = S3Store(s3_server.client(), bucket)
        for key, body in damaged_gzip_objects().items():
            store.put_bytes(key, body)
        monkeypatch.setattr(driver, "plan_read_tasks", plan)
        run_batch(store, config, "g", InputSelector(input_prefix="landing/g/"), NOW, lambda: spark)
        committed[name] = ({kind: sorted(map(repr, committed_rows(store, config, kind)))
                            for kind in ("data", "audit", "quarantine")}, commit_counts(store, config)["g"])
    assert {unit.info.key for unit in planned if unit.inflated_share and unit.units == 5} == set(damaged_gzip_objects())
    rows, counts = committed["whole"]
    reasons = " ".join(rows["quarantine"])
    for finding in ("truncated gzip stream", "corrupt gzip stream", "empty object", "inflates past"):
        assert finding in reasons  # the damage is there to be found
    assert committed["shares"] == committed["whole"]
