"""Where the compiled parse core is not built, the pure-Python parser runs, says so once per
process, and gives the same rows (eventdedup.parse.native_core)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from eventdedup.parse import native_core

REPO = Path(__file__).resolve().parents[3]

# A child process in which the core cannot be imported (as on a machine without a compiler): it
# parses two objects and prints their rows; the warnings go to stderr.
_WITHOUT_CORE = textwrap.dedent("""
    import importlib.abc, json, logging, sys

    class NoCore(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "eventdedup.parse._parse_core":
                raise ImportError("no compiled core here (test)")
            return None

    if sys.argv[1] == "without":
        sys.meta_path.insert(0, NoCore())
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
    from datetime import datetime, timezone
    from eventdedup.config import config_from_mapping
    from eventdedup.parse import native_core
    from eventdedup.parse.rules import ParseRules
    from eventdedup.parse.object_parser import parse_object

    rules = ParseRules.for_batch(config_from_mapping({"s3": {"bucket": "events"}}),
                                 datetime(2026, 11, 22, tzinfo=timezone.utc), fingerprint_hash="xxh3-64")
    body = (b'{"event_id":"7f2c1a1e-3b4d-4c5e-8f60-718293a4b5c6","created_at":"2026-11-22T11:00:00Z","n":1}\\n'
            b'{"event_id":"e-2","created_at":1763809200,"n":[1.5,{"b":1,"a":2}]}\\n'
            b'not json\\n')
    rows = []
    for index in range(2):
        parsed = parse_object(body, index, rules)
        rows.append([parsed.table.to_pylist(), parsed.bad_error])
    print(json.dumps({"available": native_core.available(), "rows": rows}, default=str))
""")


def _run(mode: str) -> tuple[dict[str, object], str]:
    done = subprocess.run([sys.executable, "-c", _WITHOUT_CORE, mode], capture_output=True, text=True, check=True,
                          cwd=REPO)
    return json.loads(done.stdout), done.stderr


@pytest.mark.skipif(not native_core.available(), reason="the compiled core is not built on this machine")
def test_without_the_core_the_python_parser_gives_the_same_rows_and_warns_once() -> None:
    without, stderr = _run("without")
    with_core, quiet = _run("with")
    assert without["available"] is False and with_core["available"] is True
    assert without["rows"] == with_core["rows"]
    warnings = [line for line in stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1, stderr
    assert "compiled parse core is not built" in warnings[0] and "make venv" in warnings[0]
    assert "no compiled core here (test)" in warnings[0]
    assert "WARNING" not in quiet


def test_the_core_is_built_and_loads_wherever_it_can_be_built() -> None:
    """A machine with the compiler and headers (CI's) runs the core: a build that broke must fail
    the suite, not pass it on the Python parser with the core's tests skipped."""
    from eventdedup_dev import native

    lacking = native.missing()
    if lacking is not None:
        pytest.skip(f"the core cannot be built here: {lacking}")
    assert native_core.available(), native_core.why_not()
    from eventdedup.parse import _parse_core

    assert _parse_core.source_sha256() == native.source_digest()  # built from this checkout's source
