"""`eventdedup-dev upload-sample`: a planted sample for a first batch (the README's "Running a
batch"): 110 JSON-lines events, 10 of them exact copies, uploaded as one object to the bucket a
configuration names. The sample is the generator's (eventdedup_dev.sample_events), so what a batch
of it must commit is known without running one: 110 input lines, 10 in-batch duplicates, 100 rows.
"""
from __future__ import annotations

import sys
import time
from datetime import datetime, timedelta, timezone

from botocore.exceptions import BotoCoreError, ClientError

from eventdedup.config import load_config
from eventdedup.naming import normalize_prefix
from eventdedup.s3store import S3Store, make_client
from eventdedup_dev.sample_events import PlantedBatch, SampleStream

SAMPLE_SEED = 20261122
SAMPLE_EVENTS, SAMPLE_COPIES = 100, 10


def sample_batch(now: datetime) -> PlantedBatch:
    """The sample: its events dated within the hour before `now`'s (inside any dedup window, never
    in the future), one uncompressed object."""
    stream = SampleStream(SAMPLE_SEED, start=now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=1))
    return stream.batch("sample", new=SAMPLE_EVENTS, in_batch_dups=SAMPLE_COPIES, cross_batch_dups=0, malformed=0,
                        objects=1, hours=1.0, gzip_last=False)


def upload_sample(config_path: str, prefix: str, timeout: float = 120.0) -> str:
    """Upload the sample under `prefix` in the configuration's bucket, once the store answers (the
    README starts it in the background just before); returns what was uploaded, for people."""
    config = load_config(config_path)
    store = S3Store(make_client(config.s3), config.s3.bucket)
    wait_for_bucket(store, config.s3.endpoint_url or "AWS", timeout)
    batch = sample_batch(datetime.now(timezone.utc))
    [(name, body)] = batch.objects.items()
    key = normalize_prefix(prefix, what="--prefix") + name
    store.put_bytes(key, body)
    return (f"uploaded {store.uri(key)}: {batch.input_lines} lines, {len(batch.unique_ids)} events and "
            f"{batch.in_batch_duplicates} exact copies of them")


def wait_for_bucket(store: S3Store, endpoint: str, timeout: float) -> None:
    """Return once the bucket answers. A store still starting refuses connections, or answers
    before it holds the bucket (local-s3 creates it once the store is up), or with an error: each
    is waited out, up to `timeout` seconds, saying on stderr what it waits for."""
    deadline, said = time.monotonic() + timeout, ""
    while True:
        try:
            store.client.head_bucket(Bucket=store.bucket)
            return
        except (BotoCoreError, ClientError) as exc:
            reason = str(exc)
            if time.monotonic() > deadline:
                raise SystemExit(f"eventdedup-dev: bucket {store.bucket} at {endpoint} did not answer in "
                                 f"{timeout:.0f} s: {reason}") from None
            if reason != said:
                print(f"waiting for bucket {store.bucket} at {endpoint}: {reason}", file=sys.stderr, flush=True)
                said = reason
            time.sleep(0.5)
