"""How many LIST requests staging a 5-minute batch makes, as the landing prefix ages.

    .venv/bin/python bench/landing_listing.py [--objects 20000] [--days 30]

Lands --objects objects over --days days of Firehose-style keys (YYYY/MM/DD/HH/) on the embedded
S3 server, dates each (through the fault proxy's LIST rewriting) a minute after its partition's
hour, and stages one 5-minute interval batch at the end with three layouts: the partitioned
listing (`partition_format`), the whole prefix (no layout: what every batch did before the
ingestion ledger), and keys that sort by time (`sorted_key_format`, on a second copy of the keys).
Prints the LIST requests each made, counted by the proxy, and the objects each batch took.
"""
from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qs, urlsplit

from eventdedup.config import config_from_mapping
from eventdedup.inputs.selector import InputSelector
from eventdedup.ops.scheduling import BatchPlan, stage_planned_batch
from eventdedup.s3store import S3Store, make_client
from eventdedup_dev.local_s3 import LocalS3Process, use_local_credentials
from eventdedup_dev.s3_fault_proxy import FaultProxy

END = datetime(2026, 11, 22, 6, 0, tzinfo=timezone.utc)
LAYOUTS = {"partitioned": {"partition_format": "%Y/%m/%d/%H/"}, "whole prefix": {},
           "time-sorted keys": {"sorted_key_format": "%Y%m%dT%H%M"}}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=20_000)
    parser.add_argument("--days", type=int, default=30)
    args = parser.parse_args(argv)
    use_local_credentials()
    hours = args.days * 24
    dates: dict[str, datetime] = {}
    for i in range(args.objects):
        hour = END - timedelta(hours=hours - (i * hours) // args.objects)
        at = hour + timedelta(minutes=1, seconds=i % 3000 / 100)
        dates[f"landing/{hour:%Y/%m/%d/%H}/part-{i:06d}.jsonl"] = at
        dates[f"sorted/{at:%Y%m%dT%H%M%S}-{i:06d}.jsonl"] = at
    with LocalS3Process() as server, FaultProxy(server.endpoint_url) as proxy:
        server.client().create_bucket(Bucket="listing")
        store = S3Store(server.client(), "listing")
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda key: store.put_bytes(key, b"{}\n"), dates))
        proxy.redate(dates.get)
        print(f"{args.objects} objects over {args.days} days; a 5-minute batch ending {END.isoformat()}:")
        for name, inputs in LAYOUTS.items():
            landing = "sorted/" if "sorted_key_format" in inputs else "landing/"
            config = config_from_mapping({"s3": {"bucket": "listing", "endpoint_url": proxy.endpoint_url},
                                          "layout": {"landing_prefix": landing}, "inputs": inputs})
            proxy.arm(None)
            selector = InputSelector(since=END - timedelta(minutes=5), until=END)
            manifest = stage_planned_batch(S3Store(make_client(config.s3), "listing"), config,
                                           BatchPlan(f"b-{name.replace(' ', '-')}", selector), END)
            lists = [r for r in proxy.requests if "list-type" in parse_qs(urlsplit(r.split(" ", 1)[1]).query)
                     and f"prefix={landing.rstrip('/')}" in r]
            print(f"  {name:18s} {len(lists):4d} LIST requests, {len(manifest.inputs):4d} objects taken")


if __name__ == "__main__":
    main(sys.argv[1:])
