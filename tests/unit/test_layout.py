"""Every object name comes from the batch id and the partition: same inputs, same names."""
from __future__ import annotations

from datetime import date

from eventdedup.config import LayoutSettings
from eventdedup.keys import CacheKey
from eventdedup.layout import Layout

LAYOUT = Layout(LayoutSettings())
KEY = CacheKey.parse("2026-11-22/05/0003")


def test_final_cache_segment_names_parse_back_to_their_batch_and_key() -> None:
    name = LAYOUT.final_cache_segment("b-7", KEY)
    assert name == "_eventdedup/cache/date=2026-11-22/hour=05/bucket=0003/b-7.seg"
    assert LAYOUT.segment_owner_and_key(name) == ("b-7", KEY)


def test_objects_under_the_cache_prefix_that_are_not_segments_have_no_owner() -> None:
    for key in ("_eventdedup/cache/date=2026-11-22/hour=05/bucket=0003/b-7.tmp",
                "_eventdedup/cache/date=2026-11-22/hour=05/b-7.seg",
                "_eventdedup/cache/date=2026-11-22/hour=xx/bucket=0003/b-7.seg",
                "elsewhere/date=2026-11-22/hour=05/bucket=0003/b-7.seg"):
        assert LAYOUT.segment_owner_and_key(key) is None, key


def test_cache_objects_parse_back_to_their_owner_and_head() -> None:
    segment = LAYOUT.final_cache_segment("b-7", KEY)
    guard = LAYOUT.final_guard("b-7", KEY.hour_index, 3)
    day_guard = LAYOUT.final_day_guard("b-7", KEY.day, 3)  # format 1, before 2026-11-26
    assert guard == "_eventdedup/cache/guard/date=2026-11-22/hour=05/bucket=0003/b-7.guard"
    assert day_guard == "_eventdedup/cache/guard/date=2026-11-22/bucket=0003/b-7.guard"
    assert LAYOUT.cache_object_of(segment) == ("b-7", "2026-11-22/05/0003")
    assert LAYOUT.cache_object_of(guard) == ("b-7", "guard/2026-11-22/05/0003")
    assert LAYOUT.cache_object_of(day_guard) == ("b-7", "guard/2026-11-22/0003")
    for key in ("_eventdedup/cache/guard/date=2026-11-22/bucket=0003/b-7.seg",
                "_eventdedup/cache/guard/date=2026-11-22/b-7.guard",
                "_eventdedup/cache/guard/date=2026-11-22/bucket=0003/hour=05/b-7.guard",
                "_eventdedup/cache/guard/date=2026-11-22/hour=5x/bucket=0003/b-7.guard",
                "_eventdedup/cache/guard/date=2026-13-22/bucket=0003/b-7.guard",
                "elsewhere/guard/date=2026-11-22/bucket=0003/b-7.guard"):
        assert LAYOUT.cache_object_of(key) is None, key


def test_commit_names_sort_by_version_and_parse_back() -> None:
    names = [LAYOUT.commit(v) for v in (9, 10, 123)]
    assert names == sorted(names)
    assert [LAYOUT.version_of_commit_key(n) for n in names] == [9, 10, 123]
    assert LAYOUT.version_of_commit_key("_eventdedup/log/000.json") is None
    # Digits of other scripts are digits to str.isdigit, and "²" too (int() refuses it): not a version.
    assert LAYOUT.version_of_commit_key(LAYOUT.commit(9)[:-6] + "\u0669.json") is None
    assert LAYOUT.version_of_commit_key(LAYOUT.commit(9)[:-6] + "\u00b2.json") is None


def test_view_checkpoint_names_sort_by_version_and_parse_back() -> None:
    names = [LAYOUT.view_checkpoint(v) for v in (9, 10, 123)]
    assert names == sorted(names)
    assert [LAYOUT.version_of_view_checkpoint_key(n) for n in names] == [9, 10, 123]
    # Anything else under the prefix is no checkpoint: a stray object, a commit's name elsewhere.
    stray = LAYOUT.view_checkpoint_prefix + "notes.json"
    assert LAYOUT.version_of_view_checkpoint_key(stray) is None
    assert LAYOUT.version_of_view_checkpoint_key(LAYOUT.commit(9)) is None


def test_own_prefixes_are_every_prefix_but_landing() -> None:
    own = LAYOUT.own_prefixes()
    assert "landing_prefix" not in own
    assert own["alerts_prefix"] == "alerts/" and own["cache_prefix"] == "_eventdedup/cache/"
    assert len(own) == len(LayoutSettings.__dataclass_fields__) - 1


def test_staged_and_final_names_carry_the_batch_id() -> None:
    assert LAYOUT.staged_data("b1", "a7", "2026-11-22", "05", 3) == \
        "_eventdedup/staging/b1/attempt-a7/data/date=2026-11-22/hour=05/part-00003.parquet"
    assert LAYOUT.final_data("b1", "2026-11-22", "05", 3) == "deduped/date=2026-11-22/hour=05/b1-part-00003.parquet"
    assert LAYOUT.redshift_manifest("b1") == "manifests/b1.manifest"


def test_cache_key_codes_order_by_hour_then_bucket_and_invert() -> None:
    keys = [CacheKey.parse(text) for text in ("2026-11-22/05/0003", "2026-11-22/05/0001", "2026-11-21/23/0002")]
    codes = [key.code(4) for key in keys]
    assert [CacheKey.of_code(code, 4) for code in codes] == keys
    assert sorted(codes) == [keys[2].code(4), keys[1].code(4), keys[0].code(4)]
    days = (date(2026, 11, 22) - date(1970, 1, 1)).days
    assert keys[0].hour_index == days * 24 + 5


def test_a_staged_key_names_its_attempt_root() -> None:
    root = LAYOUT.attempt_root("b2", "0123abcd")
    assert LAYOUT.attempt_root_of("b2", LAYOUT.staged_audit("b2", "0123abcd", 3)) == root
    assert LAYOUT.attempt_root_of("b2", root) == root
    # Not an attempt's: the batch's own staging files, another batch's attempt, a root without its slash.
    assert LAYOUT.attempt_root_of("b2", LAYOUT.job_result("b2")) is None
    assert LAYOUT.attempt_root_of("b2", LAYOUT.staged_audit("b3", "0123abcd", 3)) is None
    assert LAYOUT.attempt_root_of("b2", root.rstrip("/")) is None



def test_a_data_files_owner_is_read_from_its_name_whatever_its_part_number() -> None:
    layout = Layout(LayoutSettings())
    for part in (0, 12, 99_999, 100_000, 1_234_567):  # final_data pads to 5 digits, and never cuts
        key = layout.final_data("20261122T050000Z", "2026-11-22", "05", part)
        assert layout.data_owner(key) == "20261122T050000Z"
        assert layout.data_owner(key[len("deduped/"):]) == "20261122T050000Z"
    for name in ("date=2026-11-22/hour=5/part-00001-cbf58eb6-f007-475e-af12-c79396ad540b-c000.zstd.parquet",
                 "date=2026-11-22/hour=05/b1-part-0001.parquet", "date=2026-11-22/hour=05/b1-part-0000x.parquet",
                 "date=2026-11-22/hour=05/-part-00000.parquet", "date=2026-11-22/hour=05/b 1-part-00000.parquet",
                 "date=2026-11-22/hour=05/b1-part-00000.json"):
        assert layout.data_owner(name) is None, name
