"""`eventdedup report`'s arguments are checked before anything is read (docs/operations.md): a
report of a large range reads for minutes, and must not end in a traceback or an empty page."""
from __future__ import annotations

from pathlib import Path

import pytest

from eventdedup.cli import main


@pytest.fixture
def config_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    def never(*_: object, **__: object) -> None:
        raise AssertionError("the report was built before its arguments were checked")

    monkeypatch.setattr("eventdedup.report.build.build_report", never)
    path = tmp_path / "eventdedup.toml"
    path.write_text('[s3]\nendpoint_url = "http://127.0.0.1:9"\nbucket = "reports"\n')
    return str(path)


RANGE = ["--since", "2026-11-20T00:00:00Z", "--until", "2026-11-21T00:00:00Z"]


def test_a_page_into_a_missing_directory_is_refused_before_reading(config_path: str, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "missing" / "report.html"
    assert main(["report", "--config", config_path, *RANGE, "--out", str(out)]) == 2
    assert capsys.readouterr().err == (f"eventdedup: --out {out}: {out.parent} is not an existing directory\n")


def test_a_page_onto_a_directory_is_refused_before_reading(config_path: str, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["report", "--config", config_path, *RANGE, "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"eventdedup: --out {tmp_path} is a directory: name the page's file, "
                                       f"e.g. {tmp_path / 'report.html'}\n")


@pytest.mark.parametrize("until", ["2026-11-20T00:00:00Z", "2026-11-19T23:59:59Z"], ids=["equal", "before"])
def test_a_since_not_before_until_is_refused_before_reading(config_path: str, tmp_path: Path, until: str,
                                                            capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["report", "--config", config_path, "--since", "2026-11-20T00:00:00Z", "--until", until,
                 "--out", str(tmp_path / "r.html")]) == 2
    assert capsys.readouterr().err == (
        f"eventdedup: --since 2026-11-20T00:00:00+00:00 is not before --until {until.replace('Z', '+00:00')}: "
        "the range [since, until) holds no commit\n")
    assert not (tmp_path / "r.html").exists()


def test_with_json_no_page_is_written_so_out_is_not_checked(config_path: str, tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="built before its arguments were checked"):  # it went on to read
        main(["report", "--config", config_path, *RANGE, "--json", "--out", str(tmp_path)])
