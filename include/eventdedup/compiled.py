"""Loading a compiled core (native/*.cpp, built in place by eventdedup_dev.native): the module if it
is built from this checkout's source, else why not; and the one warning a process logs when a
batch wants a core that is not there. eventdedup.parse.native_core and eventdedup.native_dedup
each load theirs through it."""
from __future__ import annotations

import hashlib
import importlib
import logging
from pathlib import Path
from types import ModuleType

log = logging.getLogger(__name__)

# The cores' sources where this is a checkout (an editable install); absent in a packaged archive.
NATIVE_SOURCES = Path(__file__).resolve().parents[2] / "native"


def load(module: str, source: str) -> tuple[ModuleType | None, str]:
    """The compiled module `module` and '' where it is built from native/`source` as it is now
    (where the checkout is here to tell), else None and why not."""
    try:
        core = importlib.import_module(module)
    except ImportError as exc:
        return None, str(exc)
    path = NATIVE_SOURCES / source
    if path.exists() and core.source_sha256() != hashlib.sha256(path.read_bytes()).hexdigest():
        return None, f"built from other sources than {path} (a checkout changed since `make venv`)"
    return core, ""


_warned: set[str] = set()


def in_use(core: ModuleType | None, wanted: bool, title: str, why_not: str, slower: str,
           needs: str) -> ModuleType | None:
    """The core where the batch's rules want it (`wanted`: its configuration switch) and it is
    built; None else, and a process that wanted it and lacks it says so once."""
    if not wanted:
        return None
    if core is None:
        warn_missing_once(title, why_not, slower, needs)
    return core


def warn_missing_once(title: str, why_not: str, slower: str, needs: str) -> None:
    """The one warning a process logs when it wanted the core `title` and runs the Python instead."""
    if title in _warned:
        return
    _warned.add(title)
    log.warning("eventdedup's compiled %s is not built (%s): %s. Build it with `make venv` (%s), or "
                "`python -m eventdedup_dev.native`", title, why_not, slower, needs)
