"""Serve one Spark peer from its own process and JVM: commands on stdin, results on stdout.

The benchmark's main process holds eventdedup's SparkContext; running the Spark peers in the
same JVM let their leftovers (garbage, RocksDB state-store maintenance) slow the next
eventdedup run. Each peer gets its own long-lived process instead, so its JVM warms up across
rounds just as eventdedup's does. Start-up is not timed.

    python bench/peer_run.py {spark_batch|streaming} ROOT SPEC_JSON [CONFIGURATION_JSON]
    stdin:  {"action": "settings"} | {"action": "seed"} | {"action": "run", "run": N, "batch_file": PATH},
            one per line
    stdout: RESULT {json}, one per command

CONFIGURATION_JSON is a peers.PeerConfiguration (default: as configured).
"""
from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import AS_CONFIGURED, REPORTED_SETTINGS, PeerConfiguration, SparkBatchPeer, StreamingPeer  # noqa: E402
from workload import Workload, WorkloadSpec  # noqa: E402

from eventdedup.config import SparkSettings  # noqa: E402
from eventdedup.spark.session import build_spark_session  # noqa: E402


def main() -> int:
    name, root, spec_json = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    configuration = PeerConfiguration.from_json(sys.argv[4]) if len(sys.argv) > 4 else AS_CONFIGURED
    raw = json.loads(spec_json)
    spec = WorkloadSpec(**{**raw, "anchor": datetime.fromisoformat(raw["anchor"])})
    spark = build_spark_session(SparkSettings(master=configuration.master), f"bench-{configuration.key(name)}",
                                configuration.spark_conf)
    if name == "streaming":
        peer: SparkBatchPeer | StreamingPeer = StreamingPeer(spark, root, Workload(spec), configuration.state_snapshot)
    else:
        peer = SparkBatchPeer(spark, root, Workload(spec))
    for line in sys.stdin:
        command = json.loads(line)
        if command["action"] == "settings":
            reply: dict = {"configuration": configuration.name, "master": spark.sparkContext.master,
                           "state_snapshot": configuration.state_snapshot if name == "streaming" else None,
                           **{key: effective_setting(spark, key) for key in REPORTED_SETTINGS}}
        elif command["action"] == "seed":
            reply = {"seconds": peer.seed()}
        else:
            batch_file = Path(command["batch_file"])
            outcome = peer.run(batch_file, command["run"]) if name == "streaming" else peer.run(batch_file)
            reply = {"seconds": outcome.seconds, "output_rows": outcome.output_rows, **outcome.detail}
        print("RESULT " + json.dumps(reply), flush=True)
    spark.stop()
    return 0


def effective_setting(spark: object, key: str) -> str | None:
    """The value the session runs with: a SQL setting's default when unset (get with a default
    would return that default instead), None for an unset setting without one."""
    try:
        return spark.conf.get(key)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 (py4j raises a generic error for an unset key)
        return None


if __name__ == "__main__":
    sys.exit(main())
