"""A folder of stream files (eventdedup.streams): each file validated alone, a broken one beside good
ones refused alone, two streams that would write the same objects both refused with a message naming
both files and the prefixes, and which folder a deployment runs."""
from __future__ import annotations

from itertools import combinations
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from eventdedup.config import Config, LayoutSettings, S3Settings
from eventdedup.streams import (
    Stream,
    deployment_folder,
    find_collisions,
    read_stream_folder,
    store_pool_name,
)

PREFIXES = ("landing", "output", "cache", "staging", "audit", "quarantine", "commit_log", "state", "manifest",
            "alerts", "reports")


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def under(root: str, bucket: str = "events") -> str:
    """A stream file whose every prefix lies under `root`."""
    return f'[s3]\nbucket = "{bucket}"\n[layout]\n' + "".join(f'{p}_prefix = "{root}{p}/"\n' for p in PREFIXES)


def test_each_file_is_a_stream_named_after_it_with_its_own_configuration(tmp_path: Path) -> None:
    write(tmp_path, "web.toml", under("web/") + '[events]\nid_field = "event_id"\n[dedup]\nwindow_hours = 24\n')
    write(tmp_path, "mobile.toml", under("mobile/") + '[events]\nid_field = "message_id"\n[dedup]\nwindow_hours = 72\n'
          '[schedule]\npipeline_cron = "*/10 * * * *"\nstart_date = 2026-11-24T00:00:00Z\n')
    write(tmp_path, "README.md", "not a stream")
    write(tmp_path, ".#web.toml", "an editor's lock file")
    found = read_stream_folder(tmp_path, {})
    assert found.errors == ()
    assert [(s.name, s.path.name, s.config.events.id_field, s.config.dedup.window_hours) for s in found.streams] == [
        ("mobile", "mobile.toml", "message_id", 72), ("web", "web.toml", "event_id", 24)]
    mobile = found.streams[0].config.schedule
    assert (mobile.pipeline_cron, mobile.start_date.isoformat()) == ("*/10 * * * *", "2026-11-24T00:00:00+00:00")
    assert found.streams[1].config.schedule.start_date is None


def test_a_broken_file_is_refused_alone_and_named(tmp_path: Path) -> None:
    write(tmp_path, "web.toml", '[s3]\nbucket = "web-events"\n')
    broken = write(tmp_path, "broken.toml", '[s3]\nbucket = "x-events"\n[dedup\n')
    odd = write(tmp_path, "Web Events.toml", '[s3]\nbucket = "y-events"\n')
    shapeless = write(tmp_path, "cron.toml", '[s3]\nbucket = "z-events"\n[schedule]\npipeline_cron = "every day"\n')
    found = read_stream_folder(tmp_path, {})
    assert [s.name for s in found.streams] == ["web"]
    assert found.refused == tuple(sorted([broken, odd, shapeless]))
    messages = {error.files: error.message for error in found.errors}
    assert messages[(broken,)].startswith(f"configuration file {broken} is not valid TOML")
    assert "'Web Events' is not a stream name" in messages[(odd,)]
    assert messages[(shapeless,)] == (f"{shapeless}: [schedule] pipeline_cron 'every day' is not a cron expression: "
                                      'five fields (e.g. "*/5 * * * *") or a preset such as @hourly or @daily')


def test_two_streams_writing_the_same_prefixes_are_both_refused_naming_both_files_and_the_prefix(
        tmp_path: Path) -> None:
    web = write(tmp_path, "web.toml", '[s3]\nbucket = "events"\n')
    app = write(tmp_path, "app.toml", '[s3]\nbucket = "events"\n[layout]\nlanding_prefix = "app/landing/"\n')
    write(tmp_path, "other.toml", '[s3]\nbucket = "other-events"\n')
    found = read_stream_folder(tmp_path, {})
    assert [s.name for s in found.streams] == ["other"]
    [error] = found.errors
    assert error.files == (app, web)
    assert error.message.startswith(f"{app} and {web} would write where the other reads or writes, so neither runs: "
                                    "[layout] both cache_prefix s3://events/_eventdedup/cache/; ")
    assert "both output_prefix s3://events/deduped/" in error.message and "landing_prefix" not in error.message


def test_a_prefix_inside_another_streams_prefix_collides_but_shared_landing_does_not(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", under("a/"))
    write(tmp_path, "observe.toml", under("b/").replace('landing_prefix = "b/landing/"', 'landing_prefix = "a/landing/"'))
    b_writes_into_c = write(tmp_path, "c.toml", under("c/"))
    nested = write(tmp_path, "d.toml", under("d/").replace('audit_prefix = "d/audit/"', 'audit_prefix = "c/landing/x/"'))
    found = read_stream_folder(tmp_path, {})
    assert [s.name for s in found.streams] == ["a", "observe"]  # one landing prefix, read by two streams
    [error] = found.errors
    assert error.files == (b_writes_into_c, nested)
    assert error.message.endswith("[layout] c's landing_prefix s3://events/c/landing/ and d's audit_prefix "
                                  "s3://events/c/landing/x/. Give one of them prefixes of its own (none inside the "
                                  "other's), or a bucket of its own")


def test_the_same_prefixes_in_different_buckets_do_not_collide(tmp_path: Path) -> None:
    write(tmp_path, "web.toml", '[s3]\nbucket = "web-events"\n')
    write(tmp_path, "mobile.toml", '[s3]\nbucket = "mobile-events"\n')
    assert [s.name for s in read_stream_folder(tmp_path, {}).streams] == ["mobile", "web"]


def test_environment_overrides_apply_to_every_stream_file(tmp_path: Path) -> None:
    write(tmp_path, "web.toml", '[s3]\nbucket = "web-events"\n')
    write(tmp_path, "mobile.toml", '[s3]\nbucket = "mobile-events"\n')
    found = read_stream_folder(tmp_path, {"EVENTDEDUP_S3__BUCKET": "one-bucket"})
    assert found.streams == () and len(found.errors) == 1 and "s3://one-bucket/deduped/" in found.errors[0].message


def test_a_missing_folder_is_an_error_not_an_exception(tmp_path: Path) -> None:
    found = read_stream_folder(tmp_path / "nowhere", {})
    assert found.streams == () and "does not exist" in found.errors[0].message


def test_the_deployment_runs_the_named_folder_else_the_default_one_once_it_holds_a_stream(tmp_path: Path) -> None:
    default = tmp_path / "streams"
    assert deployment_folder({}, default) is None  # no folder: the one configuration
    default.mkdir()
    write(default, "notes.md", "")
    assert deployment_folder({}, default) is None  # no stream file yet
    write(default, "web.toml", '[s3]\nbucket = "web-events"\n')
    assert deployment_folder({}, default) == default
    assert deployment_folder({"EVENTDEDUP_CONFIG": "conf/x.toml"}, default) is None
    assert deployment_folder({"EVENTDEDUP_STREAMS_DIR": "/srv/streams", "EVENTDEDUP_CONFIG": "x"}, default) == Path(
        "/srv/streams")


def test_each_stream_has_its_own_store_pool_but_default_pool_is_shared() -> None:
    assert store_pool_name("eventdedup_store", "web") == "eventdedup_store_web"
    assert store_pool_name("default_pool", "web") == "default_pool"


# Any prefixes, drawn from few segments so that they often nest: the one pass over sorted prefixes
# finds exactly the pairs that comparing every prefix of every pair of streams finds.
_SEGMENTS = st.sampled_from(["a", "b", "ab"])
_PREFIX = st.lists(_SEGMENTS, min_size=1, max_size=3).map(lambda parts: "/".join(parts) + "/")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["x", "y"]), st.lists(_PREFIX, min_size=len(PREFIXES),
                                                                 max_size=len(PREFIXES))), min_size=2, max_size=5))
def test_collisions_are_exactly_the_pairs_with_nested_prefixes(drawn: list[tuple[str, list[str]]]) -> None:
    streams = [Stream(f"s{i}", Path(f"s{i}.toml"), Config(S3Settings(bucket), LayoutSettings(**{
        f"{name}_prefix": prefix for name, prefix in zip(PREFIXES, prefixes, strict=True)})))
        for i, (bucket, prefixes) in enumerate(drawn)]

    def nested(a: Stream, b: Stream) -> bool:
        return a.config.s3.bucket == b.config.s3.bucket and any(
            (pa.startswith(pb) or pb.startswith(pa)) and not sa == sb == "landing_prefix"
            for sa, pa in a.prefixes().items() for sb, pb in b.prefixes().items())

    expected = {(a.path, b.path) for a, b in combinations(streams, 2) if nested(a, b)}
    assert {error.files for error in find_collisions(streams)} == expected


@pytest.mark.parametrize("name", ["web", "tenant_07", "app-eu", "0day"])
def test_stream_names_that_go_into_dag_ids(tmp_path: Path, name: str) -> None:
    write(tmp_path, f"{name}.toml", '[s3]\nbucket = "events"\n')
    assert [s.name for s in read_stream_folder(tmp_path, {}).streams] == [name]
