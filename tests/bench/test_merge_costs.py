"""bench.scale's merge costs: the chain policy played over an hour's batches, beside copy-forward,
computed here from the composition (99 % of a batch in its hour, 1 % stragglers over 24 old hours,
16 buckets, 24 bytes an entry)."""
from __future__ import annotations

from bench.scale import merge_costs
from eventdedup.cache.heads import ChainPolicy


def test_chains_of_one_object_cost_what_copy_forward_costs() -> None:
    costs = merge_costs(1_000_000, ChainPolicy(max_chain=1))
    own = int(1_000_000 * 0.99 / 16 * 24)  # 1,485,000 bytes a batch and bucket
    assert costs["current_hour"]["written_per_batch"] == own * 78 // 12  # 1 + 2 + ... + 12 batches' runs
    assert costs["current_hour"]["written_per_batch"] == costs["current_hour"]["copy_forward_written_per_batch"]
    assert costs["current_hour"]["longest_chain"] == 1


def test_the_shipped_policy_writes_a_fraction_of_copy_forward_and_an_old_hour_kilobytes() -> None:
    costs = merge_costs(1_000_000)
    own = 1_485_000
    # In runs, batch by batch (written): [1] 1, [2] 2, [3] 3, [3,1] 1, [5] 5, [5,1] 1, [5,2] 2, [8] 8,
    # [8,1] 1, [8,2] 2, [8,3] 3, [8,3,1] 1: 30 runs' bytes over the hour
    assert costs["current_hour"]["written_per_batch"] == own * 30 // 12
    assert costs["old_hour"]["written_per_batch"] < 40_000 < 17_820_000 == costs["old_hour"]["base_bytes"]
    assert costs["old_hour"]["longest_chain"] <= 8
