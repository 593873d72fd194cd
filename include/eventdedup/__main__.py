"""`python -m eventdedup` is the `eventdedup` command."""
from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
