"""A batch's S3 requests and bytes by kind of object, as the counting proxy saw them; the state and
the Delta table's log also by part."""
from __future__ import annotations

from collections.abc import Callable

from eventdedup.layout import GUARD_SUFFIX, SEGMENT_SUFFIX, Layout
from eventdedup_dev.s3_fault_proxy import FaultProxy

KINDS = ("input", "segments", "guards", "state", "output")
# The state's parts (its "state" kind), and the Delta table's log (booked to "output" by kind).
STATE_PARTS = ("commit log", "checkpoints", "ledger", "view", "batch records", "journal", "staged state",
               "other state", "delta log", "not state")
READS = ("GET", "HEAD", "LIST")
Traffic = dict[str, dict[str, int]]


def kind_of(layout: Layout, key: str) -> str:
    """Which kind of object a key (or a listing's prefix) is: the landing input, hour segments, id
    guards, the state (the log, checkpoints, markers, the view, staged cache objects) or output
    (data, audit, quarantine, manifests)."""
    settings = layout.settings
    if key.startswith("landing/"):
        return "input"
    if key.endswith(SEGMENT_SUFFIX):
        return "segments"
    if key.endswith(GUARD_SUFFIX):
        return "guards"
    staged_output = any(part in key for part in ("/data/", "/audit/", "/quarantine/"))
    if key.startswith(settings.staging_prefix) and not staged_output:
        return "state"
    if key.startswith((settings.state_prefix, settings.commit_log_prefix)):
        return "state"
    return "output"


def state_part(layout: Layout, key: str) -> str:
    """Which part of the state a key (or a listing's prefix) is: the commit log, its checkpoints, the
    ingestion ledger, the committed view, the batches' manifests and markers, promotion journals,
    staged state (a job result), other state (the cache identity); or the Delta table's log; or
    "not state" (cache objects, input, output data)."""
    settings = layout.settings
    if key.startswith(f"{settings.output_prefix}_delta_log/"):
        return "delta log"
    if kind_of(layout, key) != "state":
        return "not state"
    if key.startswith(settings.commit_log_prefix):
        return "commit log"
    if key.startswith(settings.staging_prefix):
        return "staged state"
    folder = key[len(settings.state_prefix):].split("/", 1)[0] if key.startswith(settings.state_prefix) else ""
    return {"checkpoints": "checkpoints", "ledger": "ledger", "view": "view", "batches": "batch records",
            "journal": "journal"}.get(folder, "other state")


def traffic(layout: Layout, proxy: FaultProxy, kinds: tuple[str, ...] = KINDS,
            classify: Callable[[Layout, str], str] = kind_of) -> Traffic:
    """Requests (reads, writes, others: COPY, DELETE, POST) and body bytes per kind of object (or per
    what `classify` names among `kinds`) since the proxy was last armed."""
    out = {kind: {"read_requests": 0, "read_bytes": 0, "write_requests": 0, "write_bytes": 0, "other_requests": 0}
           for kind in kinds}
    keys = {str(request): request.key for request in proxy.requests}
    for request in proxy.requests:
        how = "read" if request.verb in READS else "write" if request.verb == "PUT" else "other"
        out[classify(layout, request.key)][f"{how}_requests"] += 1
    for figure, sizes in (("read_bytes", proxy.bytes_served), ("write_bytes", proxy.bytes_received)):
        for request, size in sizes.items():
            out[classify(layout, keys[request])][figure] += size
    return out


def state_traffic(layout: Layout, proxy: FaultProxy) -> Traffic:
    """The same by part of the state (bench.traffic.STATE_PARTS)."""
    return traffic(layout, proxy, STATE_PARTS, state_part)


def added(*parts: Traffic) -> Traffic:
    return {kind: {name: sum(part[kind][name] for part in parts) for name in parts[0][kind]} for kind in parts[0]}


def requests(figures: Traffic) -> int:
    return sum(f["read_requests"] + f["write_requests"] + f["other_requests"] for f in figures.values())
