"""Store-wide invariants checked after every injected fault."""
from __future__ import annotations

from eventdedup.cache_segment import decode_segment
from eventdedup.commit_log import load_committed_state, read_commit
from eventdedup.config import Config
from eventdedup.keys import key_digest
from eventdedup.layout import Layout
from eventdedup.s3store import S3Store

from .helpers import committed_rows


def assert_commits_are_whole(store: S3Store, config: Config) -> None:
    """Every object a commit names exists with its recorded size and ETag: no partial batch is visible."""
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    for version in range(1, state.version + 1):
        record = read_commit(store, layout, version)
        assert record is not None
        for obj in record.objects:
            head = store.head(obj.key)
            assert head is not None and (head.size, head.etag) == (obj.size, obj.etag), f"v{version}: {obj.key}"


def assert_seen_ids_match_output(store: S3Store, config: Config) -> None:
    """An id is marked seen in a committed cache exactly when a committed batch output it."""
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    seen = set()
    for segment_key in state.cache_heads.values():
        for run in decode_segment(store.get_bytes(segment_key), segment_key):
            assert run.owner in state.batches, f"{segment_key} holds ids of uncommitted batch {run.owner}"
            seen |= {bytes(d).ljust(16, b"\x00") for d in run.digests.tolist()}
    output = {key_digest(row["event_id"]) for row in committed_rows(store, config, "data")}
    assert seen == output
