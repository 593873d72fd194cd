"""A batch's counts (eventdedup.counts.BatchCounts): the sums that must hold under either mode,
the names readers rely on, and records written before a name existed."""
from __future__ import annotations

import pytest

from eventdedup import codec
from eventdedup.counts import BatchCounts
from eventdedup.errors import EventDedupError

OBSERVE_NAMES = ("would_drop_in_batch", "would_drop_cross_batch", "would_rename", "would_keep", "would_update")

# 10 lines: 1 malformed, 9 parsed; found 2 in-batch natural, 1 in-batch synthetic, 2 cross-batch
# natural, 1 cross-batch synthetic (renamed under synthetic = "rename").
ENFORCED = BatchCounts(input_lines=10, malformed=1, in_batch_duplicates=2, cross_batch_duplicates=2, output_rows=5,
                       in_batch_natural=2, in_batch_synthetic=1, cross_batch_natural=2, cross_batch_synthetic=1,
                       renamed=2)
# The same batch observed: all 9 parsed events output, the same duplicates found, none settled.
OBSERVED = BatchCounts(input_lines=10, malformed=1, output_rows=9, in_batch_natural=2, in_batch_synthetic=1,
                       cross_batch_natural=2, cross_batch_synthetic=1, would_drop_in_batch=2,
                       would_drop_cross_batch=2, would_rename=2)


def test_the_observe_counts_are_public_names_after_the_counts_they_mirror() -> None:
    names = BatchCounts.names()
    assert set(OBSERVE_NAMES) <= set(names)
    assert names.index("updates") < names.index("would_drop_in_batch")  # a mapping shows them by the others


@pytest.mark.parametrize("counts", [ENFORCED, OBSERVED], ids=["enforce", "observe"])
def test_every_line_and_every_duplicate_found_is_accounted_for_in_either_mode(counts: BatchCounts) -> None:
    counts.check_balance()


@pytest.mark.parametrize("unbalanced, message", [
    pytest.param({"would_rename": 1}, "6 duplicates found, 0 dropped, renamed or kept, 5 observed",
                 id="an observed duplicate not counted"),
    pytest.param({"in_batch_duplicates": 2, "output_rows": 7}, "6 duplicates found, 2 dropped, renamed or kept, 6 observed",
                 id="counted as dropped and as would-drop"),
    pytest.param({"output_rows": 8}, "9 accounted for, 10 input lines", id="an event neither output nor dropped"),
])
def test_observed_counts_that_do_not_add_up_are_refused(unbalanced: dict[str, int], message: str) -> None:
    counts = BatchCounts.of({**dict(OBSERVED), **unbalanced})
    with pytest.raises(EventDedupError, match=message):
        counts.check_balance()


def test_a_changelog_update_observed_is_no_duplicate_found() -> None:
    BatchCounts(input_lines=2, output_rows=2, would_update=1).check_balance()


def test_counts_recorded_before_observe_mode_read_its_names_as_zero() -> None:
    older = {name: value for name, value in codec.to_doc(ENFORCED).items() if name not in OBSERVE_NAMES}
    read = codec.from_doc(BatchCounts, older)
    assert read == ENFORCED and BatchCounts.of(older) == ENFORCED
    assert {name: read[name] for name in OBSERVE_NAMES} == dict.fromkeys(OBSERVE_NAMES, 0)


def test_every_name_is_written_zeros_too() -> None:
    assert set(codec.to_doc(BatchCounts())) == set(BatchCounts.names())
