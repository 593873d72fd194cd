"""A batch's S3 requests and bytes by kind of object, as the counting proxy saw them."""
from __future__ import annotations

from eventdedup.layout import GUARD_SUFFIX, SEGMENT_SUFFIX, Layout
from eventdedup_dev.s3_fault_proxy import FaultProxy

KINDS = ("input", "segments", "guards", "state", "output")
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


def traffic(layout: Layout, proxy: FaultProxy) -> Traffic:
    """Requests (reads, writes, others: COPY, DELETE, POST) and body bytes per kind of object since
    the proxy was last armed."""
    out = {kind: {"read_requests": 0, "read_bytes": 0, "write_requests": 0, "write_bytes": 0, "other_requests": 0}
           for kind in KINDS}
    keys = {str(request): request.key for request in proxy.requests}
    for request in proxy.requests:
        how = "read" if request.verb in READS else "write" if request.verb == "PUT" else "other"
        out[kind_of(layout, request.key)][f"{how}_requests"] += 1
    for figure, sizes in (("read_bytes", proxy.bytes_served), ("write_bytes", proxy.bytes_received)):
        for request, size in sizes.items():
            out[kind_of(layout, keys[request])][figure] += size
    return out


def added(*parts: Traffic) -> Traffic:
    return {kind: {name: sum(part[kind][name] for part in parts) for name in parts[0][kind]} for kind in parts[0]}


def requests(figures: Traffic) -> int:
    return sum(f["read_requests"] + f["write_requests"] + f["other_requests"] for f in figures.values())
