"""The bench's density growth is read round by round, as the peers' ratios are."""
from __future__ import annotations

import pytest

from bench.summary import summarise_scaling


def _density(scale: int, seconds: list[float]) -> dict:
    return {"scale": scale, "cache_bytes_read": scale * 100,
            "runs": [{"seconds": s, "output_rows": 950} for s in seconds]}


def test_growth_is_the_median_of_the_rounds_ratios_with_the_medians_ratio_beside_it() -> None:
    # The host drifts: round 3 is slow for the 10x window alone. Per round: 1.2, 1.1, 1.4.
    rows = summarise_scaling([_density(1, [5.0, 9.0, 7.0]), _density(10, [6.0, 9.9, 9.8])], base=99.0)
    assert [row["scale"] for row in rows] == [1, 10]
    assert rows[0]["growth"] == pytest.approx(0.0) and rows[0]["median_growth"] == pytest.approx(0.0)
    assert rows[1]["growth"] == pytest.approx(1.2 - 1)
    assert rows[1]["median_growth"] == pytest.approx(9.8 / 7.0 - 1)
    assert (rows[1]["median_seconds"], rows[1]["cache_bytes_read"], rows[1]["output_rows"]) == (9.8, 1000, 950)


def test_without_a_1x_window_growth_is_against_the_main_batch() -> None:
    rows = summarise_scaling([_density(10, [6.0, 8.0, 7.0])], base=5.0)
    assert rows[0]["growth"] == rows[0]["median_growth"] == pytest.approx(7.0 / 5.0 - 1)
