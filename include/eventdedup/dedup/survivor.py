"""Which copy of a key survives within a batch (Flink's ROW_NUMBER() OVER (PARTITION BY key ORDER BY ...)).

`first` and `last` follow input order (manifest object order, then line number). `min:<field>`
and `max:<field>` compare the field's values through `parse.order_keys`; ties go to the earliest
copy in input order, and a copy without the field (or with null) never beats one that has it.
No watermark: nothing is dropped for arriving late.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from eventdedup.config import parse_survivor


@dataclass(frozen=True)
class SurvivorPolicy:
    kind: str  # first | last | min | max
    field: str | None = None

    @classmethod
    def parse(cls, text: str) -> SurvivorPolicy:
        kind, field = parse_survivor(text)
        return cls(kind, field)

    def priorities(self, order_keys: pa.Array | pa.ChunkedArray, rows: int) -> npt.NDArray[np.int64]:
        """Per row (rows in input order), its rank in preference: 0 is the preferred copy."""
        if self.kind == "first":
            return np.arange(rows, dtype=np.int64)
        if self.kind == "last":
            return np.arange(rows - 1, -1, -1, dtype=np.int64)
        order = "ascending" if self.kind == "min" else "descending"
        ranks = pc.rank(order_keys, sort_keys=[("", order, "at_end")], tiebreaker="first")
        priorities: npt.NDArray[np.int64] = ranks.to_numpy().astype(np.int64) - 1
        return priorities
