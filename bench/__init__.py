"""The benchmarks (docs/performance.md), each run from the repository root as a module:

    python -m bench               eventdedup against its peers on one workload, its history committed by
                                  `eventdedup run-batch` itself, cold and warm (make bench)
    python -m bench.scale         one batch at production density, by kind of object (make bench-scale)
    python -m bench.reads         the bytes a batch reads as its history grows, by kind (make bench-reads)
    python -m bench.report_week   `eventdedup report` over a week of 5-minute batches
    python -m bench.profile       where a batch's CPU goes, by function
    python -m bench.parse_floor   a line's parse steps in Python beside the compiled core

Results go to bench/results/, which git ignores but for the runs the docs cite.
"""
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def write_result(name: str, document: Any) -> Path:
    """A bench's result as bench/results/<name>.json (values JSON lacks written as text); its path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps(document, indent=1, default=str) + "\n")
    return out
