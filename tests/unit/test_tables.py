"""Column helpers of eventdedup.tables."""
from __future__ import annotations

import pyarrow as pa
import pytest

from eventdedup.tables import repeated_text


@pytest.mark.parametrize("rows", [0, 1, 7, 70_000])
@pytest.mark.parametrize("value", ["insert", "", "batch-é-ü-😀"])
def test_a_repeated_text_column_is_the_value_in_every_row_and_never_null(value: str, rows: int) -> None:
    column = repeated_text(value, rows)
    assert column.type == pa.string()
    assert column.null_count == 0
    assert column.to_pylist() == [value] * rows
