"""`python -m eventdedup` is the `eventdedup` command."""
from __future__ import annotations

import sys

from eventdedup.cli import main

sys.exit(main())
