"""Bucket counts by hour (eventdedup.cache.epochs): an hour's count, and the fine buckets of a coarse one."""
from __future__ import annotations

import random

import numpy as np
import pytest

from eventdedup.cache.epochs import BucketEpochs
from eventdedup.errors import ConfigError
from eventdedup.keys import DIGEST_DTYPE

from ..test_keys import splitmix_bucket


def test_each_hour_takes_the_count_of_its_epoch_and_a_key_stays_inside_its_coarse_bucket() -> None:
    epochs = BucketEpochs(4).with_cutover(100, 8).with_cutover(200, 32)
    assert [epochs.at(hour) for hour in (0, 99, 100, 199, 200, 10**6)] == [4, 4, 8, 8, 32, 32]
    assert (epochs.coarse, epochs.current) == (4, 32)
    rng = random.Random(11)
    keys = [rng.randbytes(16) for _ in range(3000)]
    hours = np.array([rng.choice((5, 150, 250)) for _ in keys], np.int64)
    fine = epochs.fine_buckets(np.array(keys, DIGEST_DTYPE), hours)
    for key, hour, bucket in zip(keys, hours.tolist(), fine.tolist(), strict=True):
        assert bucket == splitmix_bucket(key, epochs.at(hour))  # the written-out rule, in that hour's count
        coarse = splitmix_bucket(key, 4)
        assert bucket in epochs.fine_of(coarse, hour)  # a task holding the coarse bucket holds the key
    assert list(epochs.fine_of(3, 250)) == [3, 7, 11, 15, 19, 23, 27, 31] and list(epochs.fine_of(3, 5)) == [3]


@pytest.mark.parametrize("first_hour, buckets", [(100, 8), (50, 16), (300, 12), (300, 24), (300, 16)])
def test_a_cutover_grows_by_a_whole_factor_after_the_last_one(first_hour: int, buckets: int) -> None:
    epochs = BucketEpochs(4).with_cutover(100, 16)
    with pytest.raises(ConfigError):
        epochs.with_cutover(first_hour, buckets)
    assert epochs.with_cutover(300, 48).current == 48
