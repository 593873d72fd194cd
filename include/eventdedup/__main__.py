"""`python -m eventdedup` is the `eventdedup` command."""
from __future__ import annotations

from eventdedup.cli import run

run()
