"""The bench's parse floor times the steps the product runs, per line, and its sums are the
figures' arithmetic."""
from __future__ import annotations

from dataclasses import replace
from itertools import count

import orjson
import pytest

from bench.parse_floor import (
    REQUIRED_STEPS,
    _blake2b,
    _canonical_dumps,
    _loads,
    _vouch,
    _xxh3,
    main_shape_lines,
    measure_floor,
    new_cache_rules,
)
from bench.summary import print_parse_floor
from eventdedup.parse import native_core
from eventdedup.parse.event_parser import parse_event


def test_each_step_computes_what_the_parser_computes_for_a_line() -> None:
    rules = new_cache_rules()
    line = main_shape_lines(3, seed=7)[-1]
    event = orjson.loads(line)
    assert list(event) != sorted(event)  # the canonical step has keys to sort
    assert _loads([line]) == event
    canonical = _canonical_dumps([event])
    assert list(orjson.loads(canonical)) == sorted(event) and orjson.loads(canonical) == event
    assert rules.fingerprint.algorithm == "xxh3-64"  # a new cache's
    assert _xxh3([canonical]) == parse_event(line, rules).fingerprint
    older = replace(rules, fingerprint=replace(rules.fingerprint, algorithm="blake2b-64"))
    assert int.from_bytes(_blake2b([canonical]), "big") == parse_event(line, older).fingerprint


def test_the_main_shape_is_the_workloads_events_in_orjsons_compact_spelling() -> None:
    lines = main_shape_lines(50, seed=5)
    events = [orjson.loads(line) for line in lines]
    assert [orjson.dumps(event) for event in events] == lines
    assert all(len(event["event_id"]) == 36 and event["created_at"].endswith("+00:00") for event in events)


def test_the_vouching_step_compares_what_it_dumps() -> None:
    event = {"b": 1, "a": [1, 2]}
    _vouch([event], [orjson.dumps(event)])
    with pytest.raises(AssertionError):
        _vouch([event], [b'{"b": 1, "a": [1, 2]}'])  # spaces: not orjson's compact spelling


def test_figures_are_microseconds_a_line_and_the_required_steps_are_summed() -> None:
    ticks = count()
    # A clock that advances one second a reading: every step takes 1 s a run, whatever it does.
    floor = measure_floor(250, 3, seed=3, timer=lambda: float(next(ticks)))
    micros = floor["microseconds_per_line"]
    steps = ["loads", "vouching_dump", "canonical_dump", "blake2b", "xxh3", "parse_lines", "parse_lines_python"]
    assert micros == dict.fromkeys(steps + (["native_scan"] if native_core.available() else []), 1e6 / 250)
    assert REQUIRED_STEPS == ("loads", "canonical_dump", "xxh3")
    assert floor["required_microseconds_per_line"] == 3 * 1e6 / 250


def test_the_batch_figure_is_the_per_line_floor_times_the_events(capsys: pytest.CaptureFixture[str]) -> None:
    floor = {"lines": 1000, "required_microseconds_per_line": 2.0,
             "microseconds_per_line": {"loads": 1.0, "canonical_dump": 0.75, "blake2b": 1.0, "xxh3": 0.25,
                                       "vouching_dump": 0.5, "parse_lines": 0.75, "parse_lines_python": 4.5,
                                       "native_scan": 0.5}}
    print_parse_floor(floor, events=2_000_000)
    out = capsys.readouterr().out
    assert "XXH3-64 0.25 (BLAKE2b-64, older caches: 1.00): 2.00 required by the fingerprint's definition" in out
    assert "parse_lines whole: 0.75 as shipped (the compiled core's scan alone 0.50); 4.50 with the core off" in out
    assert f"{2.0 * 2:.1f} core-seconds required in Python, {0.75 * 2:.1f} for parse_lines" in out
