from __future__ import annotations

import pytest

from eventdedup.errors import InvalidNameError
from eventdedup.naming import normalize_prefix, validate_batch_id


@pytest.mark.parametrize("batch_id", ["20261122T0500Z", "a", "demo-001", "x.y_z-1", "A" * 128])
def test_valid_batch_ids_pass_unchanged(batch_id: str) -> None:
    assert validate_batch_id(batch_id) == batch_id


@pytest.mark.parametrize("batch_id", ["", "a/b", "..", "a..b", ".hidden", "with space", "tab\t", "new\nline",
                                      "é", "A" * 129, "x%2F"])
def test_unsafe_batch_ids_are_refused(batch_id: str) -> None:
    with pytest.raises(InvalidNameError):
        validate_batch_id(batch_id)


@pytest.mark.parametrize("prefix, expected", [("landing", "landing/"), ("landing/", "landing/"),
                                              ("a/b/c/", "a/b/c/"), ("date=2026-11-22", "date=2026-11-22/")])
def test_prefixes_are_normalised_to_end_in_slash(prefix: str, expected: str) -> None:
    assert normalize_prefix(prefix) == expected


@pytest.mark.parametrize("prefix", ["", "/abs", "a//b", "a/../b", "./a", "a b/", "ctl\x01/", "a/\n"])
def test_unsafe_prefixes_are_refused(prefix: str) -> None:
    with pytest.raises(InvalidNameError):
        normalize_prefix(prefix)
