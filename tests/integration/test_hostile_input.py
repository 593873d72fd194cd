"""Hostile input, end to end: every unusable line is quarantined with its reason, every usable one
is output, the batch still commits and its counts balance. Unsafe names are refused before any
S3 request."""
from __future__ import annotations

import gzip

import pytest

from eventdedup.errors import InvalidNameError
from eventdedup.inputs.selector import InputSelector
from eventdedup.ops.pipeline import run_batch
from eventdedup.s3store import S3Store

from ..support.helpers import NOW, commit_counts, committed_rows, make_config
from ..support.s3_faults import CrashingClient

T = b'"created_at":"2026-11-22T05:00:00Z"'
GOOD = b'{"event_id":"ok-%d",' + T + b"}"
HUGE = b'{"event_id":"huge",' + T + b',"blob":"' + b"x" * (10 * 1024 * 1024) + b'"}'

PLAIN = [  # (line bytes, expected quarantine reason or None if it must be output as event id)
    (b"\xef\xbb\xbf" + GOOD % 1, "ok-1"),  # a byte-order mark is removed, not quarantined
    (GOOD % 2 + b"\r", "ok-2"),  # CRLF line ending
    (b'{"event_id":42,' + T + b"}", "42"),  # integer ids are normalised to their decimal string
    (b'{"event_id":"x",' + T, "malformed JSON"),
    (b'{"event_id":"caf\xe9",' + T + b"}", "invalid UTF-8 at byte 16"),
    (b"{" + T + b"}", "event_id is missing or null"),
    (b'{"event_id":null,' + T + b"}", "event_id is missing or null"),
    (b'{"event_id":"  ",' + T + b"}", "event_id is empty"),
    (b'{"event_id":{"id":1},' + T + b"}", "event_id is a JSON object, not a string or integer"),
    (b'{"event_id":[1],' + T + b"}", "event_id is a JSON array, not a string or integer"),
    (b'{"event_id":false,' + T + b"}", "event_id is a boolean, not an id"),
    (b'{"event_id":"t1","created_at":"yesterday"}', "created_at 'yesterday' is not ISO-8601"),
    (b'{"event_id":"t2","created_at":"1999-12-31T23:59:59Z"}', "outside the accepted range"),
    (b'{"event_id":"t3","created_at":"2026-11-23T06:00:01Z"}', "outside the accepted range"),
    (b'{"event_id":"r1","event_id":"r2",' + T + b"}", 'repeated key "event_id" in one JSON object'),
    (b'{"event_id":"r3",' + T + b',"p":{"a":1, "a" :2}}', 'repeated key "a" in one JSON object'),
    (b"[]", "not a JSON object but list"),
    (b"", "blank line"),
]


def test_every_hostile_line_is_quarantined_with_its_reason_and_the_batch_commits(store, config, spark) -> None:
    store.put_bytes("landing/h/1.jsonl", b"\n".join(line for line, _ in PLAIN) + b"\n")
    truncated = gzip.compress(GOOD % 3 + b"\n" + GOOD % 4 + b"\n", mtime=0)[:-12]
    store.put_bytes("landing/h/2.jsonl.gz", gzip.compress(GOOD % 5 + b"\n", mtime=0) + truncated)
    store.put_bytes("landing/h/3.jsonl", b"")
    store.put_bytes("landing/h/4.jsonl", HUGE + b"\n" + GOOD % 6 + b"\n")

    run_batch(store, config, "h1", InputSelector(input_prefix="landing/h/"), NOW, lambda: spark)

    quarantine = {(r["source_object"], r["line_number"]): r for r in committed_rows(store, config, "quarantine")}
    expected = {("landing/h/1.jsonl", n): reason for n, (_, reason) in enumerate(PLAIN, 1) if " " in reason}
    expected.update({("landing/h/2.jsonl.gz", 3): "truncated gzip stream", ("landing/h/3.jsonl", 0): "empty object",
                     ("landing/h/4.jsonl", 1): "line of 10485825 bytes exceeds [events] max_line_bytes (1048576)"})
    assert set(quarantine) == set(expected)
    assert {row["batch_id"] for row in quarantine.values()} == {"h1"}
    for where, reason in expected.items():
        assert reason in quarantine[where]["error"], (where, quarantine[where]["error"])
    # Quarantined bytes are the input's, byte for byte (the 10 MB line included).
    assert quarantine[("landing/h/1.jsonl", 5)]["raw"] == PLAIN[4][0]
    assert quarantine[("landing/h/4.jsonl", 1)]["raw"] == HUGE

    output = sorted(r["event_id"] for r in committed_rows(store, config, "data"))
    # The truncated member's complete line (ok-3) is kept; its partial last line (ok-4) is quarantined.
    assert output == ["42", "ok-1", "ok-2", "ok-3", "ok-5", "ok-6"]
    assert quarantine[("landing/h/2.jsonl.gz", 3)]["raw"].startswith(b'{"event_id":"ok-4')
    counts = commit_counts(store, config)["h1"]
    assert (counts["input_lines"], counts["malformed"], counts["output_rows"]) == (len(PLAIN) + 3 + 1 + 2, 18, 6)
    assert len(expected) == 18


@pytest.mark.parametrize("batch_id, prefix", [
    ("../b1", "landing/"), ("b 1", "landing/"), ("b\x01", "landing/"), ("a/b", "landing/"),
    ("b1", "landing/../_eventdedup/"), ("b1", "land ing/"), ("b1", "landing/\x7f"), ("b1", "/landing/"),
])
def test_unsafe_batch_ids_and_prefixes_are_refused_before_any_s3_request(store, config, spark, batch_id, prefix) -> None:
    recording = CrashingClient(store.client, None)
    with pytest.raises(InvalidNameError):
        run_batch(S3Store(recording, store.bucket), config, batch_id, InputSelector(input_prefix=prefix), NOW,
                  lambda: spark)
    assert recording.calls == []


def test_a_gzip_bomb_and_an_oversized_object_are_quarantined_whole_and_the_batch_commits(
        s3_server, store, spark) -> None:
    """A 2 MB object of 2 GiB of zeros (256 gzip members: one object to S3 and to gzip) and a plain
    object over the limit: each becomes one quarantine row for the object as a whole (line 0), the
    bomb inflated only up to the limit; the good objects around them are output as usual."""
    limit = 8 * 1024 * 1024
    config = make_config(s3_server.endpoint_url, store.bucket, events={"max_object_bytes": limit})
    bomb = gzip.compress(bytes(limit), mtime=0) * 256
    assert len(bomb) < 3_000_000
    store.put_bytes("landing/bomb/1.jsonl", GOOD % 1 + b"\n")
    store.put_bytes("landing/bomb/2.jsonl.gz", bomb)
    store.put_bytes("landing/bomb/3.jsonl", (GOOD % 3 + b"\n") * (limit // len(GOOD % 3) + 1))
    store.put_bytes("landing/bomb/4.jsonl.gz", gzip.compress(GOOD % 4 + b"\n", mtime=0))

    run_batch(store, config, "bomb", InputSelector(input_prefix="landing/bomb/"), NOW, lambda: spark)

    quarantine = sorted((r["source_object"], r["line_number"], r["error"], r["raw"])
                        for r in committed_rows(store, config, "quarantine"))
    tail = (f"max_object_bytes ({limit} bytes): quarantined whole, its lines unread; "
            "raise the limit (and executor memory) to process it")
    assert quarantine == [("landing/bomb/2.jsonl.gz", 0, f"object inflates past [events] {tail}", b""),
                          ("landing/bomb/3.jsonl", 0, f"object is larger than [events] {tail}", b"")]
    assert sorted(r["event_id"] for r in committed_rows(store, config, "data")) == ["ok-1", "ok-4"]
    counts = commit_counts(store, config)["bomb"]
    assert (counts["input_lines"], counts["malformed"], counts["output_rows"]) == (4, 2, 2)
