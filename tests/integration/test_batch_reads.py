"""One batch reads each metadata object once (issue 57): `eventdedup run-batch` as users run it,
a new process (staging, its Spark driver and workers, the promotion, the Delta projection), every
request counted at a proxy in front of the store.

Each step of a batch needs the folded state, the records and the table: they are handed from
step to step (eventdedup.s3store.BatchReads), so no metadata object is fetched twice, except:
- the batch's promotion journal, looked for (and not found) by each step that must know no
  promotion is under way at that moment: the staging gate, the job before it computes, the
  promotion before it writes its own (another promoter may have started in between);
- the Delta table's log entries after its last checkpoint, which delta-rs reads twice to open the
  table and once to find the application transaction, and its own new entry, which it reads back
  after committing it: bounded by a checkpoint every CHECKPOINT_EVERY table versions.
LISTs (the log's and the exclusions' new entries) are the protocol's looks and are not counted.
"""
from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from eventdedup.config import Config
from eventdedup.delta.projection import CHECKPOINT_EVERY
from eventdedup.inputs.selector import InputSelector
from eventdedup.ops.pipeline import run_batch
from eventdedup.s3store import S3Store
from eventdedup_dev.s3_fault_proxy import FaultProxy

from ..support.helpers import NOW, make_config, put_lines

HISTORY = 12  # batches: a state checkpoint at 10, a Delta checkpoint at table version 10, entries after both


def event(batch: int, n: int) -> bytes:
    return b'{"event_id":"e%d-%d","created_at":"2026-11-22T0%d:10:00Z"}' % (batch, n, 1 + n % 4)


def config_file(path: Path, endpoint: str, bucket: str) -> Path:
    path.write_text(f'[s3]\nendpoint_url = "{endpoint}"\nbucket = "{bucket}"\n[dedup]\nbuckets = 4\n'
                    '[spark]\nmaster = "local[2]"\npartitions = 2\ndriver_memory = "1g"\n')
    return path


def with_history(s3_server, bucket: str, spark) -> tuple[S3Store, Config]:  # type: ignore[no-untyped-def]
    config = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 4})
    store = S3Store(s3_server.client(), bucket)
    for number in range(HISTORY):
        put_lines(store, f"landing/h{number}/1.jsonl", [event(number, n) for n in range(20)])
        run_batch(store, config, f"h{number}", InputSelector(input_prefix=f"landing/h{number}/"), NOW, lambda: spark)
    return store, config


def test_a_batch_fetches_each_metadata_object_once(s3_server, bucket, spark, tmp_path) -> None:
    store, config = with_history(s3_server, bucket, spark)
    checkpoint = HISTORY // config.dedup.checkpoint_interval * config.dedup.checkpoint_interval
    table_checkpoint = HISTORY // CHECKPOINT_EVERY * CHECKPOINT_EVERY  # table versions: created, then a batch each
    # A copy of a committed event, in another hour (a guard finds it), and new ones.
    put_lines(store, "landing/next/1.jsonl", [event(3, 5).replace(b"T02", b"T04"), event(99, 1), event(99, 2)])
    with FaultProxy(s3_server.endpoint_url) as proxy:
        proxy.arm(None)
        done = subprocess.run([sys.executable, "-m", "eventdedup", "run-batch", "--config",
                               str(config_file(tmp_path / "c.toml", proxy.endpoint_url, bucket)), "--batch-id", "next",
                               "--input-prefix", "landing/next/"], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        gets = Counter(request.key for request in proxy.requests if request.verb == "GET")
    metadata = {key: n for key, n in gets.items() if key.startswith("_eventdedup/")
                and not key.startswith(("_eventdedup/cache/", "_eventdedup/staging/next/attempt-"))}
    delta = {key: n for key, n in gets.items() if "/_delta_log/" in key}
    journal = "_eventdedup/state/journal/next.json"
    assert metadata.pop(journal) <= 3  # the looks for a promotion under way (the module's docstring)
    assert {key: n for key, n in metadata.items() if n > 1} == {}
    # What is read once: the checkpoint pointer, the checkpoint, the commits after it, the manifest,
    # the cache identity, the ledger's parts the lookups need, the job result.
    assert f"_eventdedup/state/checkpoints/{checkpoint:020d}.json.gz" in metadata
    assert {f"_eventdedup/log/{version:020d}.json" for version in range(checkpoint + 1, HISTORY + 1)} <= metadata.keys()
    # The table's log: nothing before its checkpoint; after it, delta-rs's reads; the batch's own entry.
    log_entries = {key.rsplit("/", 1)[1]: n for key, n in delta.items() if key.endswith(".json")}
    assert log_entries.keys() == {f"{version:020d}.json" for version in range(table_checkpoint + 1, HISTORY + 2)}
    assert log_entries[f"{HISTORY + 1:020d}.json"] <= 2 and max(log_entries.values()) <= 3
    assert delta["deduped/_delta_log/_last_checkpoint"] == 1
