"""Serve one Spark peer from its own process and JVM: commands on stdin, results on stdout.

The benchmark's main process holds eventdedup's SparkContext; running the Spark peers in the
same JVM let their leftovers (garbage, RocksDB state-store maintenance) slow the next
eventdedup run. Each peer gets its own long-lived process instead, so its JVM warms up across
rounds just as eventdedup's does. Start-up is not timed.

    python bench/peer_run.py {spark_batch|streaming} ROOT SPEC_JSON
    stdin:  {"action": "seed"} | {"action": "run", "run": N, "batch_file": PATH}, one per line
    stdout: RESULT {json}, one per command
"""
from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import SparkBatchPeer, StreamingPeer  # noqa: E402
from workload import Workload, WorkloadSpec  # noqa: E402

from eventdedup.config import SparkSettings  # noqa: E402
from eventdedup.spark.session import build_spark_session  # noqa: E402


def main() -> int:
    name, root, spec_json = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    raw = json.loads(spec_json)
    spec = WorkloadSpec(**{**raw, "anchor": datetime.fromisoformat(raw["anchor"])})
    spark = build_spark_session(SparkSettings(master="local[2]"), f"bench-{name}")
    peer_class = SparkBatchPeer if name == "spark_batch" else StreamingPeer
    peer = peer_class(spark, root, Workload(spec))
    for line in sys.stdin:
        command = json.loads(line)
        if command["action"] == "seed":
            reply: dict = {"seconds": peer.seed()}
        else:
            batch_file = Path(command["batch_file"])
            outcome = peer.run(batch_file, command["run"]) if name == "streaming" else peer.run(batch_file)
            reply = {"seconds": outcome.seconds, "output_rows": outcome.output_rows, **outcome.detail}
        print("RESULT " + json.dumps(reply), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
