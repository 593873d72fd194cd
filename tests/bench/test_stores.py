"""The bench's settings read the same in a command's file as in process, and its request counts book
each object to its kind."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from bench.stores import BenchSettings
from bench.traffic import kind_of, state_part, traffic
from eventdedup.config import load_config
from eventdedup.keys import CacheKey
from eventdedup.layout import Layout
from eventdedup_dev.s3_requests import request_of_http


def test_a_commands_configuration_file_reads_as_the_configuration_the_bench_runs_with(tmp_path: Path) -> None:
    settings = BenchSettings("bench", {"dedup": {"window_hours": 26, "buckets": 8, "normalize": ["trim", "lower"]},
                                       "report": {"producer_field": "app_id"}, "spark": {}})
    path = settings.write_file(tmp_path / "eventdedup.toml", "http://127.0.0.1:9000")
    assert load_config(path, environ={}) == settings.config("http://127.0.0.1:9000")
    assert settings.config("http://x").s3.bucket == "bench" and settings.config("http://x").dedup.buckets == 8


def test_every_object_a_batch_touches_is_booked_to_its_kind() -> None:
    layout = Layout(BenchSettings("bench").config("http://x").layout)
    key = CacheKey.of_hour(490_000, 3)
    staged = layout.staging_root("b1")
    assert kind_of(layout, "landing/main/part-000.jsonl") == "input"
    assert kind_of(layout, layout.final_cache_segment("b1", key)) == "segments"
    assert kind_of(layout, layout.final_guard("b1", 490_000, 3)) == "guards"
    assert kind_of(layout, layout.commit(7)) == kind_of(layout, layout.checkpoint(10)) == "state"
    assert kind_of(layout, staged + "manifest.json") == "state"
    assert kind_of(layout, layout.final_audit("b1", 0)) == kind_of(layout, staged + "data/part-0.parquet") == "output"


def test_a_listing_is_booked_by_its_prefix_and_a_replys_bytes_to_its_requests_kind() -> None:
    layout = Layout(BenchSettings("bench").config("http://x").layout)
    # A slash left unencoded in the query once sent such a listing of the log to "output".
    listing = request_of_http("GET", "/bench?list-type=2&prefix=_eventdedup/log/&start-after=_eventdedup/log/1.json",
                              {}, b"")
    segment = request_of_http("GET", "/bench/" + layout.final_cache_segment("b1", CacheKey.of_hour(490_000, 3)),
                              {"Range": "bytes=0-9"}, b"")
    put = request_of_http("PUT", "/bench/landing/main/part-000.jsonl", {}, b"x" * 7)
    proxy = SimpleNamespace(requests=[listing, segment, put], bytes_received={str(put): 7},
                            bytes_served={str(listing): 300, str(segment): 10})
    figures = traffic(layout, proxy)  # type: ignore[arg-type]
    assert (figures["state"]["read_requests"], figures["state"]["read_bytes"]) == (1, 300)
    assert (figures["segments"]["read_requests"], figures["segments"]["read_bytes"]) == (1, 10)
    assert (figures["input"]["write_requests"], figures["input"]["write_bytes"]) == (1, 7)
    assert sum(f["read_requests"] + f["write_requests"] for f in figures.values()) == 3


def test_the_states_objects_are_booked_to_their_part_and_the_delta_tables_log_apart() -> None:
    layout = Layout(BenchSettings("bench").config("http://x").layout)
    assert state_part(layout, layout.commit(7)) == "commit log"
    assert state_part(layout, "_eventdedup/log/") == "commit log"  # a listing of the log
    assert state_part(layout, layout.checkpoint(10)) == state_part(layout, layout.last_checkpoint) == "checkpoints"
    assert state_part(layout, layout.ledger_part(1, 10)) == "ledger"
    assert state_part(layout, layout.view_part(0, 10)) == state_part(layout, layout.view_checkpoint(10)) == "view"
    assert state_part(layout, layout.batch_manifest("b1")) == "batch records"
    assert state_part(layout, layout.journal("b1")) == "journal"
    assert state_part(layout, layout.staging_root("b1") + "manifest.json") == "staged state"
    assert state_part(layout, layout.cache_identity()) == "other state"
    assert state_part(layout, "deduped/_delta_log/00000000000000000003.json") == "delta log"
    assert kind_of(layout, "deduped/_delta_log/00000000000000000003.json") == "output"  # by kind: output, as before
    assert state_part(layout, layout.final_cache_segment("b1", CacheKey.of_hour(490_000, 3))) == "not state"
    assert state_part(layout, "landing/main/part-000.jsonl") == "not state"
