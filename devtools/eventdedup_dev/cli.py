"""`eventdedup-dev`: the embedded S3 server, a sample to upload and the planted-batches demo, for development."""
from __future__ import annotations

import argparse
import logging
import signal
import threading


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eventdedup-dev", description=__doc__)
    sub = parser.add_subparsers(required=True, metavar="COMMAND")
    local = sub.add_parser("local-s3", help="run the embedded S3 store (SeaweedFS) on 127.0.0.1, with the "
                                            "credentials of AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY if set")
    local.add_argument("--port", type=int, default=9000)
    local.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback unless in a container)")
    local.add_argument("--data-dir", help="keep the store's data in this directory (default: a temporary one)")
    local.add_argument("--log-dir", help="the store's log (store.log) and upkeep record (upkeep.json); default: "
                                         "beside the data directory, DATA_DIR.logs")
    local.add_argument("--min-free", default="1GiB", help="refuse new writes while the data directory's filesystem "
                                                          "has less free space than this (raised to 1%% of the "
                                                          "filesystem plus four volumes); default 1GiB")
    local.add_argument("--vacuum-every", type=float, default=300.0, metavar="SECONDS",
                       help="reclaim deleted objects' space at least this often (sooner when garbage grows); "
                            "default 300")
    local.add_argument("--create-bucket", action="append", default=[], help="bucket to create at start")
    local.set_defaults(handler=_local_s3)
    sample = sub.add_parser("upload-sample", help="upload a sample of 110 JSON-lines events, 10 of them exact copies, "
                                                  "to the bucket a configuration names (waits for the store to answer)")
    sample.add_argument("--config", required=True, help="eventdedup's TOML configuration: its S3 endpoint and bucket")
    sample.add_argument("--prefix", required=True, help="where the object goes, e.g. landing/sample/")
    sample.set_defaults(handler=_upload_sample)
    planted = sub.add_parser("planted-batches", help="three planted micro-batches through run_batch, counts checked")
    planted.add_argument("--json", action="store_true", help="print the counts as JSON too")
    planted.set_defaults(handler=_planted_batches)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return int(args.handler(args))


def _local_s3(args: argparse.Namespace) -> int:
    import os

    from eventdedup_dev.local_s3 import LOCAL_CREDENTIALS, READY_LINE, LocalS3Process, parse_size

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())  # before READY_LINE: an early SIGTERM still stops the store
    credentials = {name: os.environ.get(name) or default for name, default in LOCAL_CREDENTIALS.items()}
    server = LocalS3Process(port=args.port, data_dir=args.data_dir, host=args.host, credentials=credentials,
                            log_dir=args.log_dir, min_free=parse_size(args.min_free),
                            vacuum_every=args.vacuum_every).start()
    for bucket in args.create_bucket:
        try:
            server.client().create_bucket(Bucket=bucket)
        except server.client().exceptions.BucketAlreadyOwnedByYou:
            pass
    assert server.budget is not None
    print(f"{READY_LINE}{server.endpoint_url} (Ctrl-C to stop)", flush=True)
    print(f"data in {server.budget.describe(server.stored_in)}; log in {server.log_path}", flush=True)
    stop.wait()
    server.stop()
    return 0


def _upload_sample(args: argparse.Namespace) -> int:
    from eventdedup_dev.sample_upload import upload_sample

    print(upload_sample(args.config, args.prefix), flush=True)
    return 0


def _planted_batches(args: argparse.Namespace) -> int:
    from eventdedup_dev.planted_demo import run_planted_batches

    return run_planted_batches(print_json=args.json)
