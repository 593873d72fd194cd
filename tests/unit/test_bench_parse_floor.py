"""The bench's parse floor times the steps it names, and its sums are the figures' arithmetic."""
from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from parse_floor import REQUIRED_STEPS, _vouch, measure_floor  # noqa: E402
from report import print_parse_floor  # noqa: E402


def test_every_step_is_timed_and_the_required_ones_are_summed() -> None:
    floor = measure_floor(200, 1, seed=3)
    micros = floor["microseconds_per_line"]
    assert set(micros) == {"loads", "vouching_dump", "canonical_dump", "blake2b", "parse_lines"}
    assert all(value > 0 for value in micros.values())
    assert floor["required_microseconds_per_line"] == pytest.approx(sum(micros[name] for name in REQUIRED_STEPS))
    assert REQUIRED_STEPS == ("loads", "canonical_dump", "blake2b")


def test_the_vouching_step_compares_what_it_dumps() -> None:
    event = {"b": 1, "a": [1, 2]}
    _vouch([event], [orjson.dumps(event)])
    with pytest.raises(AssertionError):
        _vouch([event], [b'{"b": 1, "a": [1, 2]}'])  # spaces: not orjson's compact spelling


def test_the_batch_figure_is_the_per_line_floor_times_the_events(capsys: pytest.CaptureFixture[str]) -> None:
    floor = {"lines": 1000, "required_microseconds_per_line": 2.75,
             "microseconds_per_line": {"loads": 1.0, "canonical_dump": 0.75, "blake2b": 1.0, "vouching_dump": 0.5,
                                       "parse_lines": 4.5}}
    print_parse_floor(floor, events=2_000_000)
    out = capsys.readouterr().out
    assert "2.75 required by the fingerprint's definition" in out
    assert f"{2.75 * 2:.1f} core-seconds required, {4.5 * 2:.1f} for parse_lines" in out
