"""The `eventdedup` command line. Exit codes: 0 success, 1 a refused or failed operation,
2 usage errors, 3 the store is inconsistent (recovery could not finish)."""
from __future__ import annotations

import argparse
import atexit
import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, NoReturn

import orjson

from eventdedup.config import Config, load_config
from eventdedup.errors import EventDedupError
from eventdedup.inputs.selector import InputSelector
from eventdedup.naming import validate_batch_id
from eventdedup.s3store import S3Store, make_client

if TYPE_CHECKING:
    from pyspark import SparkContext

EXIT_FAILED = 1
EXIT_INCONSISTENT = 3
DEFAULT_STREAMS_DIR = "conf/streams"


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except EventDedupError as exc:
        _error(f"eventdedup: {exc}")
        return EXIT_FAILED


def _error(message: str) -> None:
    """A line on stderr in one write: the relays of the JVM's output write there too, and print's
    separate write of the newline would let one of their lines in before it."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def run() -> NoReturn:
    """The `eventdedup` console script: `main`, then the process ends without Python's teardown.

    Tearing down the interpreter (pyarrow, numpy, botocore and py4j loaded) took ~0.25 s of every
    command on a 2-core host, and a finished command gains nothing from it: what has to happen at
    exit is registered with atexit and runs here, streams are flushed, and the threads still
    alive are daemons (Spark's start, py4j, our output relays). If some other thread is still
    running, or `main` raised, the exit is Python's own."""
    code = main()
    if any(thread.is_alive() and not thread.daemon and thread is not threading.main_thread()
           for thread in threading.enumerate()):
        sys.exit(code)
    atexit._run_exitfuncs()  # logging's shutdown, our output relays' last copy
    for stream in (sys.stdout, sys.stderr):
        if stream is None or stream.closed:  # started without it, or closed: Python skips it too
            continue
        try:
            stream.flush()
        except OSError:  # a reader that went away
            code = code or 120  # what Python's own exit returns when it cannot flush
    os._exit(code)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="eventdedup", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    sub = parser.add_subparsers(required=True, metavar="COMMAND")

    def command(name: str, handler: Callable[[argparse.Namespace], int], help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.set_defaults(handler=handler)
        p.add_argument("--config", required=True, help="TOML configuration file")
        return p

    run = command("run-batch", _run_batch, "stage, deduplicate and promote one batch")
    _batch_args(run, selectors=True)
    run.add_argument("--timings", action="store_true",
                     help="print each phase's wall seconds as JSON on stderr (staging, spark_wait, job, promotion)")
    stage = command("stage", _stage, "freeze a batch's input list")
    _batch_args(stage, selectors=True)
    _batch_args(command("dedup", _dedup, "run the Spark dedup job of a staged batch"))
    _batch_args(command("promote", _promote, "promote a batch's job output atomically"))
    _batch_args(command("verify-rerun", _verify_rerun, "recompute a committed batch and compare byte for byte"))
    exclude = command("exclude-input", _exclude_input,
                      "quarantine one whole input object of a staged, uncommitted batch (a way out of a wedged batch)")
    _batch_args(exclude)
    exclude.add_argument("--key", required=True, help="the input object's key, as in the batch manifest")
    exclude.add_argument("--reason", required=True, help="why: written to the quarantine row and the log")
    recover = command("recover", _recover, "finish or report every unfinished promotion")
    recover.add_argument("--dry-run", action="store_true", help="only report what would be done")
    recover.add_argument("--json", action="store_true")
    report = command("report", _report, "what the pipeline did over a range of commits: an HTML page with charts")
    report.add_argument("--since", type=_timestamp, help="commits made at or after this (ISO-8601 with offset; "
                        "default: a day before --until)")
    report.add_argument("--until", type=_timestamp, help="commits made before this (default: now)")
    report.add_argument("--last", type=int, help="the newest N commits instead of a time range")
    report.add_argument("--out", help="write the HTML page here (default: report.html)", default="report.html")
    report.add_argument("--json", action="store_true", help="print the figures as JSON instead of writing the page")
    check = command("fsck", _fsck, "check every committed object against the commit log (exists, size, ETag)")
    check.add_argument("--json", action="store_true")
    check.add_argument("--last", type=int, help="check only the newest N commits")
    populate = command("populate", _populate, "commit an existing dataset (JSON lines or Parquet, e.g. deduped/) to "
                       "the cache as a batch that emits nothing: the cold start")
    populate.add_argument("--source-prefix", required=True, help="the dataset's prefix in the bucket")
    populate.add_argument("--batch-id", help="default: populate-<hash of the prefix and its objects' keys and ETags>")
    retract = command("retract", _retract, "take a committed batch out of the committed view (output, manifest, cache "
                      "runs, ledger) so its input can be processed again as new")
    _batch_args(retract)
    retract.add_argument("--reason", required=True, help="why: recorded in the retraction's commit")
    retract.add_argument("--cascade", action="store_true",
                         help="also retract every later batch that decided duplicates against it")
    grow = command("reshard", _reshard, "grow the cache's bucket count from an hour boundary on, keeping every hour's "
                   "history (a whole multiple of the current count)")
    grow.add_argument("--buckets", type=int, required=True, help="the new count: a multiple of the current one")
    grow.add_argument("--effective-from", type=_timestamp,
                      help="a whole hour with a UTC offset; default: the earliest safe hour")
    backfill = command("backfill-columns", _backfill_columns, "fill the declared columns ([table.columns]) into the "
                       "committed files of a range of output hours: one commit per hour, resumable")
    backfill.add_argument("--since", type=_timestamp, required=True, help="the first output hour (ISO-8601 with "
                          "offset; the hour holding it)")
    backfill.add_argument("--until", type=_timestamp, help="before this (default: every later hour committed)")
    infer = command("infer-columns", _infer_columns, "suggest a [table.columns] block from a sample of landing lines")
    infer.add_argument("--input-prefix", required=True, help="the landing prefix to sample (objects in key order)")
    infer.add_argument("--sample", type=int, default=100_000, help="lines to read (default: 100000)")
    infer.add_argument("--json", action="store_true")
    command("sweep", _sweep, "process landing objects older than the lookback that no batch consumed, "
            "as one batch")
    status = command("status", _status, "committed batches, ingestion lag and store consistency")
    status.add_argument("--json", action="store_true")
    status.add_argument("--limit", type=int, default=20, help="how many recent batches to list")
    streams = sub.add_parser("streams", help="every stream of a folder at once: consistency, latest batch, ingestion "
                             "lag, and the stream files that cannot run")
    streams.set_defaults(handler=_streams)
    streams.add_argument("--dir", help="the folder of <stream>.toml files (default: EVENTDEDUP_STREAMS_DIR, "
                         f"else {DEFAULT_STREAMS_DIR})")
    streams.add_argument("--json", action="store_true")
    return parser


def _batch_args(p: argparse.ArgumentParser, selectors: bool = False) -> None:
    p.add_argument("--batch-id", required=True)
    if selectors:
        p.add_argument("--input-prefix")
        p.add_argument("--since", type=_timestamp, help="ISO-8601 with offset: the interval's start")
        p.add_argument("--until", type=_timestamp, help="ISO-8601 with offset: the interval's end; the batch takes "
                       "landing objects of the lookback before it that no batch has consumed")
        p.add_argument("--reprocess", action="store_true",
                       help="with --input-prefix: also objects a committed batch consumed (their events come out "
                            "as audited cross-batch duplicates)")


def _timestamp(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} needs a UTC offset, e.g. 2026-11-22T05:00:00Z")
    return moment


def _batch_request(args: argparse.Namespace) -> tuple[str, InputSelector]:
    """The batch id and selector, checked before the configuration is read or S3 is asked."""
    selector = InputSelector(input_prefix=args.input_prefix, since=args.since, until=args.until,
                             reprocess=args.reprocess)
    return validate_batch_id(args.batch_id), selector


def _store(config: Config) -> S3Store:
    return S3Store(make_client(config.s3), config.s3.bucket)


def _counts_text(counts: Mapping[str, int]) -> str:
    """A batch's counts as the commands print them: JSON, names sorted."""
    return orjson.dumps(dict(counts), option=orjson.OPT_SORT_KEYS).decode()


def _spark_factory(config: Config) -> Callable[[], SparkContext]:
    from eventdedup.spark.session import build_spark_context

    return lambda: build_spark_context(config.spark)


def _early_spark(config: Config) -> Callable[[], SparkContext]:
    """For a command that almost always runs a job: Spark starts while it stages."""
    from eventdedup.spark.session import started_in_background

    return started_in_background(_spark_factory(config))


def _run_batch(args: argparse.Namespace) -> int:
    from eventdedup.errors import EmptyIntervalError
    from eventdedup.ops.pipeline import run_batch
    from eventdedup.ops.scheduling import explain_empty_selection
    from eventdedup.ops.timings import PhaseTimes

    timings = PhaseTimes()
    with timings.phase("total"):
        batch_id, selector = _batch_request(args)
        config = load_config(args.config)
        spark = _early_spark(config)  # first: the JVM starts while the S3 client is made and staging runs
        store, now = _store(config), datetime.now(timezone.utc)
        try:
            outcome = run_batch(store, config, batch_id, selector, now, spark, timings, by_hand=True)
        except EmptyIntervalError as refused:  # its message names this command's configuration file
            _error(f"eventdedup: {refused.explain(args.config)}")
            return EXIT_FAILED
    state = "committed" if outcome.newly_committed else "already committed"
    print(f"batch {outcome.batch_id} {state} as log version {outcome.version}: {_counts_text(outcome.counts)}")
    empty = (explain_empty_selection(store, config, batch_id, now)
             if selector.since is not None and outcome.counts["input_lines"] == 0 else None)
    if empty is not None:  # a batch of a time range that selected nothing: why, and what waits outside it
        print(empty.committed(args.config))
    if args.timings:
        print(orjson.dumps({name: round(seconds, 3) for name, seconds in timings.seconds.items()}).decode(),
              file=sys.stderr)
    return 0


def _stage(args: argparse.Namespace) -> int:
    from eventdedup.ops.scheduling import BatchPlan, stage_planned_batch

    batch_id, selector = _batch_request(args)
    config = load_config(args.config)
    manifest = stage_planned_batch(_store(config), config, BatchPlan(batch_id, selector), datetime.now(timezone.utc))
    print(f"batch {manifest.batch_id}: {len(manifest.inputs)} input objects")
    return 0


def _dedup(args: argparse.Namespace) -> int:
    from eventdedup.commit.log import is_committed
    from eventdedup.job.driver import run_dedup_job
    from eventdedup.layout import Layout

    config = load_config(args.config)
    batch_id = validate_batch_id(args.batch_id)
    # A cleared or retried run of a committed batch: nothing to compute (its promotion step then
    # reports the commit). Recomputing a committed batch is verify-rerun's job, not this step's.
    if is_committed(_store(config), Layout(config.layout), batch_id):
        print(f"batch {batch_id} is already committed; nothing to compute")
        return 0
    result = run_dedup_job(_spark_factory(config)(), config, batch_id)
    print(_counts_text(result.counts))
    return 0


def _promote(args: argparse.Namespace) -> int:
    from eventdedup.promotion.promote import promote_batch

    config = load_config(args.config)
    outcome = promote_batch(_store(config), config, validate_batch_id(args.batch_id))
    print(f"batch {outcome.batch_id} at log version {outcome.version}")
    return 0


def _verify_rerun(args: argparse.Namespace) -> int:
    from eventdedup.ops.pipeline import verify_rerun

    config = load_config(args.config)
    problems = verify_rerun(_store(config), config, validate_batch_id(args.batch_id), _spark_factory(config)())
    for problem in problems:
        print(problem)
    print("identical" if not problems else f"{len(problems)} difference(s)")
    return 0 if not problems else EXIT_FAILED


def _exclude_input(args: argparse.Namespace) -> int:
    from eventdedup.layout import Layout
    from eventdedup.ops.exclude import exclude_input

    config = load_config(args.config)
    store = _store(config)
    record = exclude_input(store, Layout(config.layout), validate_batch_id(args.batch_id), args.key, args.reason,
                           datetime.now(timezone.utc))
    print(f"batch {args.batch_id}: input {store.uri(record.key)} (ETag {record.etag}) is excluded: "
          f"{record.quarantine_reason!r}; rerun the batch (run-batch, or clear its Airflow run) to commit it. "
          "The object is not processed by any interval batch now: land its current version under a prefix of "
          "its own and run it as a manual batch (run-batch --input-prefix) when it should be")
    return 0


def _recover(args: argparse.Namespace) -> int:
    from eventdedup.promotion.recovery import examine, recover

    config = load_config(args.config)
    report = (examine if args.dry_run else recover)(_store(config), config)
    print(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode() if args.json else report.text())
    return 0 if report.consistent else EXIT_INCONSISTENT


def _fsck(args: argparse.Namespace) -> int:
    from eventdedup.ops.fsck import fsck

    config = load_config(args.config)
    report = fsck(_store(config), config, args.last)
    print(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode() if args.json else report.text())
    return 0 if report.consistent else EXIT_INCONSISTENT


def _report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from eventdedup.report.build import build_report

    now = datetime.now(timezone.utc)
    until = args.until or now
    refused = _report_arguments_refused(args, until)
    if refused:  # before anything is read: a report of a large range reads for minutes
        _error(f"eventdedup: {refused}")
        return 2
    config = load_config(args.config)
    report = build_report(_store(config), config, args.since or until - timedelta(days=1), until,
                          now if args.until is None else None, args.last)
    if args.json:
        print(report.json.decode())
    else:
        Path(args.out).write_text(report.html, encoding="utf-8")
        figures = report.figures
        print(f"{args.out}: {figures['log']['batches']} batches committed from {figures['range']['since']} to "
              f"{figures['range']['until']}; {figures['copy_lag']['verdict']}")
    return 0


def _report_arguments_refused(args: argparse.Namespace, until: datetime) -> str | None:
    """Why `report`'s arguments cannot make a report (None: they can): a range that holds no
    moment, or a page that could not be written where --out says."""
    from pathlib import Path

    if args.last is not None and (args.last < 1 or args.since or args.until):
        return "--last takes a positive count, without --since or --until"
    if args.last is None and args.since is not None and args.since >= until:
        end = f"--until {until.isoformat()}" if args.until else f"now ({until.isoformat()})"
        return f"--since {args.since.isoformat()} is not before {end}: the range [since, until) holds no commit"
    if not args.json:
        out = Path(args.out)
        if out.is_dir():
            return f"--out {args.out} is a directory: name the page's file, e.g. {out / 'report.html'}"
        if not out.parent.is_dir():
            return f"--out {args.out}: {out.parent} is not an existing directory"
        if not os.access(out.parent, os.W_OK):
            return f"--out {args.out}: the directory {out.parent} is not writable"
    return None


def _populate(args: argparse.Namespace) -> int:
    from eventdedup.ops.populate import run_populate

    config = load_config(args.config)
    outcome = run_populate(_store(config), config, args.source_prefix, datetime.now(timezone.utc),
                           _spark_factory(config), args.batch_id)
    state = "committed" if outcome.newly_committed else "already committed (nothing changed)"
    print(f"populate {outcome.batch_id} {state} as log version {outcome.version}: {_counts_text(outcome.counts)}")
    return 0


def _retract(args: argparse.Namespace) -> int:
    from eventdedup.ops.retract import retract_batch

    config = load_config(args.config)
    outcome = retract_batch(_store(config), config, validate_batch_id(args.batch_id), args.reason,
                            datetime.now(timezone.utc), args.cascade)
    state = "committed" if outcome.newly_committed else "already committed"
    print(f"retraction {outcome.retraction_id} of {', '.join(outcome.retracted)} {state} as log version "
          f"{outcome.version}: {orjson.dumps(outcome.figures).decode()}")
    return 0


def _reshard(args: argparse.Namespace) -> int:
    from eventdedup.ops.reshard import reshard

    config = load_config(args.config)
    outcome = reshard(_store(config), config, args.buckets, datetime.now(timezone.utc), args.effective_from)
    state = "committed" if outcome.newly_committed else "already committed"
    then = (f"Now set [dedup] buckets = {outcome.buckets} in the configuration (or leave it unset to follow the cache)"
            if config.dedup.buckets else "The configuration leaves [dedup] buckets unset: batches follow the cache")
    print(f"reshard {outcome.reshard_id} {state} as log version {outcome.version}: {outcome.buckets} buckets from "
          f"{outcome.from_text}. {then}")
    return 0


def _backfill_columns(args: argparse.Namespace) -> int:
    from eventdedup.ops.backfill_columns import backfill_columns

    config = load_config(args.config)
    hours = backfill_columns(_store(config), config, args.since, args.until, datetime.now(timezone.utc))
    for hour in hours:
        if hour.change is None:
            print(f"{hour.hour_text}: every file already holds the columns")
            continue
        state = "committed" if hour.newly_committed else "already committed"
        print(f"{hour.hour_text}: {hour.backfill_id} {state} as log version {hour.version}: "
              f"{orjson.dumps(hour.change.figures).decode()}")
    print(f"{len(hours)} hour(s) of committed output in the range; "
          f"{sum(1 for hour in hours if hour.newly_committed)} backfilled now")
    return 0


def _infer_columns(args: argparse.Namespace) -> int:
    from eventdedup.ops.infer_columns import infer_columns

    if args.sample < 1:
        _error("eventdedup: --sample takes a positive count of lines")
        return 2
    config = load_config(args.config)
    inferred = infer_columns(_store(config), config, args.input_prefix, args.sample)
    print(orjson.dumps(inferred.to_json(), option=orjson.OPT_INDENT_2).decode() if args.json else inferred.toml(),
          end="" if not args.json else "\n")
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from eventdedup.ops.alerts import Alert, record_alert
    from eventdedup.ops.pipeline import run_batch
    from eventdedup.ops.sweep import stage_sweep

    config = load_config(args.config)
    store, now = _store(config), datetime.now(timezone.utc)
    outcome = stage_sweep(store, config)
    if outcome is None:
        print("sweep: every landing object older than the lookback is consumed")
        return 0
    record_alert(store, config, Alert.now(outcome.plan.batch_id, "unconsumed_inputs", outcome.message(store), "cli"))
    promoted = run_batch(store, config, outcome.plan.batch_id, outcome.plan.selector, now, _early_spark(config))
    print(f"sweep: batch {promoted.batch_id} committed {outcome.found} unconsumed object(s) as log version "
          f"{promoted.version}: {_counts_text(promoted.counts)}")
    return 0


def _status(args: argparse.Namespace) -> int:
    from eventdedup.ops.status import format_status, store_status

    config = load_config(args.config)
    status = store_status(_store(config), config, datetime.now(timezone.utc), args.limit)
    print(orjson.dumps(status, option=orjson.OPT_INDENT_2).decode() if args.json else format_status(status))
    return 0 if status["consistent"] else EXIT_INCONSISTENT


def _streams(args: argparse.Namespace) -> int:
    from pathlib import Path

    from eventdedup.ops.stream_status import folder_exit_code, folder_status, format_folder_status
    from eventdedup.streams import read_stream_folder

    # Each file validated with this environment's overrides, as `--config` of that file would be.
    folder = read_stream_folder(Path(args.dir or os.environ.get("EVENTDEDUP_STREAMS_DIR") or DEFAULT_STREAMS_DIR),
                                os.environ)
    status = folder_status(folder, _store, datetime.now(timezone.utc))
    print(orjson.dumps(status, option=orjson.OPT_INDENT_2).decode() if args.json else format_folder_status(status))
    return folder_exit_code(status)
