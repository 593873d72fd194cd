"""Loading the compiled cores (eventdedup.compiled): a core that cannot be imported, or that was
built from other sources than the checkout's, is not used and the reason says why; a process that
wants a missing core warns once."""
from __future__ import annotations

import logging
import sys
import types
from pathlib import Path

import pytest

from eventdedup import compiled


def test_a_core_that_cannot_be_imported_is_not_loaded_and_says_why() -> None:
    core, why_not = compiled.load("eventdedup._no_such_core", "dedup_core.cpp")
    assert core is None and "_no_such_core" in why_not


def test_a_core_built_from_other_sources_is_not_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("eventdedup._fake_core")
    fake.source_sha256 = lambda: "0" * 64  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "eventdedup._fake_core", fake)
    monkeypatch.setattr(compiled, "NATIVE_SOURCES", tmp_path)
    (tmp_path / "fake.cpp").write_text("int main() {}\n")
    core, why_not = compiled.load("eventdedup._fake_core", "fake.cpp")
    assert core is None and "built from other sources than" in why_not and "fake.cpp" in why_not
    (tmp_path / "fake.cpp").unlink()  # a packaged archive has no sources to compare: the core loads
    assert compiled.load("eventdedup._fake_core", "fake.cpp") == (fake, "")


def test_a_missing_core_is_warned_about_once(caplog: pytest.LogCaptureFixture,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiled, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="eventdedup.compiled"):
        for _ in range(3):
            compiled.warn_missing_once("dedup core", "no compiler", "buckets are decided in Python, slower", "g++")
    assert [record.getMessage() for record in caplog.records] == [
        "eventdedup's compiled dedup core is not built (no compiler): buckets are decided in Python, slower. "
        "Build it with `make venv` (g++), or `python -m eventdedup_dev.native`"]
