"""A batch's LIST requests are bounded by its lookback, not by the age of the landing prefix.

30 days of time-partitioned keys (two objects an hour) land through the fault proxy, which
records every request and dates each object (LIST replies) at its partition's time plus a minute.
Expected from the documented rule: a batch lists the partitions of its lookback plus the one
after it, one LIST each (each holds far fewer than 1,000 keys).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from eventdedup.inputs.landing import partition_prefixes
from eventdedup.inputs.selector import InputSelector
from eventdedup.ops.scheduling import BatchPlan, stage_planned_batch
from eventdedup.s3store import S3Store, make_client
from eventdedup_dev.s3_fault_proxy import FaultProxy

from ..support.helpers import NOW, make_config

DAYS = 30
UNTIL = NOW + timedelta(minutes=5)  # the batch of 06:00 .. 06:05


def landing_lists(requests: list[str]) -> list[str]:
    """The prefixes of the LIST requests made under landing/."""
    prefixes = []
    for request in requests:
        query = parse_qs(urlsplit(request.split(" ", 1)[1]).query)
        if "list-type" in query and query.get("prefix", [""])[0].startswith("landing/"):
            prefixes.append(query["prefix"][0])
    return prefixes


@pytest.fixture(scope="module")
def month_of_landing(s3_server):  # type: ignore[no-untyped-def]
    """A bucket with DAYS days of Firehose-style keys, two objects an hour, and their dates."""
    bucket = "landing-month"
    s3_server.client().create_bucket(Bucket=bucket)
    store = S3Store(s3_server.client(), bucket)
    hours = [NOW - timedelta(hours=h) for h in range(DAYS * 24)]
    keys = {f"landing/{hour:%Y/%m/%d/%H}/part-{i}.jsonl": hour + timedelta(minutes=1) for hour in hours for i in (0, 1)}
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda key: store.put_bytes(key, b"{}\n"), keys))
    return bucket, keys


@pytest.mark.parametrize("inputs, expected_lists", [
    ({"partition_format": "%Y/%m/%d/%H/"}, [f"landing/2026/11/22/{h:02d}/" for h in (3, 4, 5, 6, 7)]),
    ({}, ["landing/"] * 2),  # no layout: the whole prefix, a page per 1,000 keys (1,440 keys)
])
def test_a_five_minute_batch_lists_only_its_lookback(s3_server, month_of_landing, inputs, expected_lists) -> None:
    bucket, dates = month_of_landing
    with FaultProxy(s3_server.endpoint_url) as proxy:
        proxy.redate(dates.get)
        config = make_config(proxy.endpoint_url, bucket, inputs=inputs)
        store = S3Store(make_client(config.s3), bucket)
        plan = BatchPlan(f"{UNTIL - timedelta(minutes=5):%Y%m%dT%H%M%SZ}",
                         InputSelector(since=UNTIL - timedelta(minutes=5), until=UNTIL))
        manifest = stage_planned_batch(store, config, plan, UNTIL)
        requests = list(proxy.requests)
    assert landing_lists(requests) == expected_lists
    # The batch takes what is visible before its end: by partition (every object of a listed
    # partition, whatever its date), or, unpartitioned, by LastModified within the lookback.
    lookback_start = UNTIL - timedelta(hours=config.inputs.lookback_hours)
    listed = tuple(expected_lists) if inputs else ()
    assert [info.key for info in manifest.inputs] == sorted(
        key for key, at in dates.items() if at < UNTIL and (key.startswith(listed) if inputs else lookback_start <= at))
    store.delete_prefix("_eventdedup/")  # the next case stages the same batch id afresh


@pytest.mark.parametrize("partition_format, expected", [
    ("%Y/%m/%d/%H/", ["in/2026/11/22/23/", "in/2026/11/23/00/", "in/2026/11/23/01/"]),  # Firehose
    ("dt=%Y-%m-%d/hour=%H/", ["in/dt=2026-11-22/hour=23/", "in/dt=2026-11-23/hour=00/", "in/dt=2026-11-23/hour=01/"]),
    ("year=%Y/month=%m/day=%d/", ["in/year=2026/month=11/day=22/", "in/year=2026/month=11/day=23/"]),  # daily
])
def test_partition_prefixes_cover_the_range_and_the_hour_after_it(partition_format, expected) -> None:
    start = datetime(2026, 11, 22, 23, 30, tzinfo=NOW.tzinfo)
    assert partition_prefixes("in/", partition_format, start, start + timedelta(minutes=40)) == expected
    assert partition_prefixes("in/", partition_format, start, start + timedelta(minutes=30), ahead=False) == expected[:1]


def test_keys_that_begin_with_their_time_are_listed_from_the_lookback_on(s3_server) -> None:
    bucket = "landing-sorted"
    s3_server.client().create_bucket(Bucket=bucket)
    store = S3Store(s3_server.client(), bucket)
    dates = {f"landing/{NOW - timedelta(minutes=30 * i):%Y%m%dT%H%M}-part.jsonl": NOW - timedelta(minutes=30 * i - 1)
             for i in range(3 * 48)}  # three days, one object every 30 minutes
    for key in dates:
        store.put_bytes(key, b"{}\n")
    with FaultProxy(s3_server.endpoint_url) as proxy:
        proxy.redate(dates.get)
        config = make_config(proxy.endpoint_url, bucket, inputs={"sorted_key_format": "%Y%m%dT%H%M"})
        plan = BatchPlan("20261122T060000Z", InputSelector(since=NOW, until=UNTIL))
        manifest = stage_planned_batch(S3Store(make_client(config.s3), bucket), config, plan, UNTIL)
        requests = list(proxy.requests)
    starts_after = [parse_qs(urlsplit(r.split(" ", 1)[1]).query).get("start-after") for r in requests
                    if "prefix=landing" in r]
    assert starts_after == [["landing/20261122T0205"]]  # one LIST, from the lookback's start less an hour
    lookback_start = UNTIL - timedelta(hours=config.inputs.lookback_hours)
    assert [info.key for info in manifest.inputs] == sorted(k for k, at in dates.items() if lookback_start <= at < UNTIL)
