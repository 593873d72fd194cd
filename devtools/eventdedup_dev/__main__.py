"""`python -m eventdedup_dev` is the `eventdedup-dev` command."""
from __future__ import annotations

import sys

from eventdedup_dev.cli import main

sys.exit(main())
