"""The command line as other tools call it: exit codes and machine-readable output."""
from __future__ import annotations

from pathlib import Path

import orjson

from eventdedup.cli import EXIT_FAILED, EXIT_INCONSISTENT, main
from eventdedup.commit.job_result import JobResult, StagedObject
from eventdedup.commit.journal import PromotionJournal
from eventdedup.counts import BatchCounts
from eventdedup.layout import Layout
from eventdedup.s3store import ObjectInfo


def config_file(tmp_path: Path, endpoint: str, bucket: str) -> str:
    path = tmp_path / "eventdedup.toml"
    path.write_text(f'[s3]\nendpoint_url = "{endpoint}"\nbucket = "{bucket}"\n[dedup]\nbuckets = 4\n')
    return str(path)


def test_status_of_an_empty_store_is_consistent(tmp_path, s3_server, bucket, capsys) -> None:
    assert main(["status", "--config", config_file(tmp_path, s3_server.endpoint_url, bucket), "--json"]) == 0
    status = orjson.loads(capsys.readouterr().out)
    assert status == {"consistent": True, "problems": [], "pending": [], "head_version": 0, "batches": [],
                      "ledger": {"unconsumed": 0, "oldest_unconsumed": None, "oldest_unconsumed_last_modified": None,
                                 "ledger_entries": 0, "lookback_hours": 3},
                      # No Delta table before the store's first commit creates it.
                      "table": {"mode": "auto", "location": f"s3://{bucket}/deduped", "exists": False,
                                "table_version": None, "projected_log_version": 0, "log_version": 0, "lag": 0}}


def test_recover_exits_3_and_names_the_lost_object(tmp_path, s3_server, bucket, store, config, capsys) -> None:
    entry = StagedObject("data", ObjectInfo("_eventdedup/staging/b9/data/x.parquet", 5, '"e"'), "deduped/x.parquet", 1)
    journal = PromotionJournal("tok", None, JobResult("b9", 0, "2026-11-22T06:00:00+00:00", BatchCounts(), (entry,)))
    store.put_bytes(Layout(config.layout).journal("b9"), journal.to_bytes())
    path = config_file(tmp_path, s3_server.endpoint_url, bucket)
    assert main(["recover", "--config", path]) == EXIT_INCONSISTENT
    out = capsys.readouterr().out
    assert f"s3://{bucket}/deduped/x.parquet is missing" in out and "INCONSISTENT: batch b9" in out
    assert main(["status", "--config", path]) == EXIT_INCONSISTENT


def test_bad_batch_id_is_refused_with_exit_1(tmp_path, s3_server, bucket, capsys) -> None:
    path = config_file(tmp_path, s3_server.endpoint_url, bucket)
    assert main(["run-batch", "--config", path, "--batch-id", "../x", "--input-prefix", "landing/"]) == EXIT_FAILED
    assert "batch id '../x' is invalid" in capsys.readouterr().err


def test_run_batch_from_a_plain_shell_works_without_pyspark_python_set(tmp_path, s3_server, bucket, store) -> None:
    import os
    import subprocess
    import sys

    store.put_bytes("landing/b1/1.jsonl", b'{"event_id":"e1","created_at":"2026-11-22T03:10:00Z"}\n' * 2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    done = subprocess.run(
        [sys.executable, "-m", "eventdedup", "run-batch", "--config", config_file(tmp_path, s3_server.endpoint_url, bucket),
         "--batch-id", "b1", "--input-prefix", "landing/b1/", "--timings"], env=env, capture_output=True, text=True,
        timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("batch b1 committed as log version 1: ")
    counts = orjson.loads(done.stdout.split(": ", 1)[1])
    assert (counts["input_lines"], counts["in_batch_duplicates"], counts["output_rows"]) == (2, 1, 1)
    # The session started in the background while staging ran; --timings names every phase it went through.
    # The timings line, wherever a relayed line of the JVM's output falls beside it.
    timings = next(orjson.loads(line) for line in reversed(done.stderr.splitlines())
                   if line.startswith("{") and '"total"' in line)
    assert set(timings) == {"total", "staging", "spark_wait", "job", "promotion"}
    assert timings["total"] >= timings["staging"] + timings["spark_wait"] + timings["job"] + timings["promotion"]


def test_a_refused_run_batch_exits_without_waiting_for_the_session_it_started(tmp_path, s3_server, bucket,
                                                                               store) -> None:
    import subprocess
    import sys

    # Staging refuses a prefix inside our own output while the session is still starting in the
    # background: the command fails with staging's message alone, and does not hang on the JVM.
    done = subprocess.run(
        [sys.executable, "-m", "eventdedup", "run-batch", "--config", config_file(tmp_path, s3_server.endpoint_url, bucket),
         "--batch-id", "own", "--input-prefix", "deduped/x/"], capture_output=True, text=True, timeout=300)
    assert done.returncode == EXIT_FAILED, done.stderr[-3000:]
    message = "eventdedup: input prefix 'deduped/x/' overlaps eventdedup's own output_prefix 'deduped/'"
    assert message in done.stderr.splitlines(), done.stderr[-3000:]


_EXITING = """
import atexit, sys, threading, time
from eventdedup.cli import run

print("buffered by main, not flushed")  # stdout is a pipe: block-buffered
atexit.register(lambda: sys.stderr.write("atexit ran\\n"))
if sys.argv[1] == "no-stdout":  # what Python sets when it starts with descriptor 1 closed
    sys.stdout.flush()
    sys.stdout = None
if sys.argv[1] == "busy-thread":
    # The thread works on for a while after main returns, however long main took: a fast exit
    # would kill it before it prints, so the test fails on one; Python's exit waits for it.
    import eventdedup.cli as cli
    returned, real_main = threading.Event(), cli.main
    def main_then_signal() -> int:
        try:
            return real_main()
        finally:
            returned.set()
    cli.main = main_then_signal
    def finish() -> None:
        returned.wait()
        time.sleep(0.5)
        print("the thread finished", flush=True)
    threading.Thread(target=finish).start()
sys.argv = ["eventdedup", "status", "--config", sys.argv[2]]
run()
"""


def test_the_console_script_skips_teardown_but_not_what_exit_owes(tmp_path) -> None:
    """`run` ends the process without Python's teardown: buffered output is still written,
    atexit handlers still run, the exit code is main's; a running non-daemon thread gets
    Python's own exit, which waits for it."""
    import subprocess
    import sys

    missing = str(tmp_path / "missing.toml")
    for mode in ("plain", "busy-thread", "no-stdout"):
        done = subprocess.run([sys.executable, "-c", _EXITING, mode, missing], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == EXIT_FAILED
        expected_out = "buffered by main, not flushed\n" + ("the thread finished\n" if mode == "busy-thread" else "")
        assert done.stdout == expected_out
        assert done.stderr.startswith("eventdedup: ") and done.stderr.endswith("atexit ran\n")


def test_retract_and_reshard_from_the_command_line(tmp_path, s3_server, bucket, store, spark, capsys) -> None:
    from eventdedup.config import load_config
    from eventdedup.inputs.selector import InputSelector
    from eventdedup.ops.pipeline import run_batch

    from ..support.helpers import NOW, put_lines

    path = config_file(tmp_path, s3_server.endpoint_url, bucket)
    put_lines(store, "landing/x/1.jsonl", [b'{"event_id":"a","created_at":"2026-11-22T05:00:00Z"}'])
    run_batch(store, load_config(path), "x", InputSelector(input_prefix="landing/x/"), NOW, lambda: spark)
    assert main(["retract", "--config", path, "--batch-id", "y", "--reason", "typo"]) == EXIT_FAILED
    assert "batch y is not committed" in capsys.readouterr().err
    assert main(["retract", "--config", path, "--batch-id", "x", "--reason", "wrong prefix"]) == 0
    assert capsys.readouterr().out.startswith("retraction retract-x of x committed as log version 2: ")
    assert main(["reshard", "--config", path, "--buckets", "6"]) == EXIT_FAILED
    assert "a multiple of the current 4" in capsys.readouterr().err
    assert main(["reshard", "--config", path, "--buckets", "8", "--effective-from", "2026-11-30T00:00:00Z"]) == 0
    assert "8 buckets from 2026-11-30T00:00Z. Now set [dedup] buckets = 8" in capsys.readouterr().out
