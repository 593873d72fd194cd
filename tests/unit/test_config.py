from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from eventdedup.config import config_from_mapping, configuration_keys, load_config
from eventdedup.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "eventdedup.toml"
    path.write_text(text)
    return path


def test_defaults_fill_everything_but_the_bucket(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, '[s3]\nbucket = "events"\n'), environ={})
    assert config.s3.endpoint_url is None
    assert config.layout.output_prefix == "deduped/"
    assert config.events.id_field == "event_id" and config.events.time_field == "created_at"
    assert config.dedup.buckets == 0 and config.dedup.window_hours == 168  # 0: the cache's own count
    assert config.dedup.new_cache_buckets == 16
    assert config.spark.master == "local[*]" and config.spark.partitions == 0


def test_dedup_semantics_read_as_documented_and_key_fields_default_to_the_id_field(tmp_path: Path) -> None:
    default = load_config(write(tmp_path, '[s3]\nbucket = "events"\n'), environ={})
    assert (default.key_fields, default.dedup.synthetic, default.dedup.survivor, default.dedup.changelog) == (
        ("event_id",), "rename", "first", False)
    config = load_config(write(tmp_path, '[s3]\nbucket = "events"\n[dedup]\nkey_fields = ["user_id", "insert_id"]\n'
                                         'fingerprint_exclude = ["collector_tstamp"]\nsurvivor = "max:updated_at"\n'
                                         'changelog = true\nnormalize = ["trim", "lower"]\n'), environ={})
    assert config.key_fields == ("user_id", "insert_id") and config.dedup.normalize == ("trim", "lower")
    assert config.dedup.fingerprint_exclude == ("collector_tstamp",) and config.dedup.changelog is True
    assert config.cache_identity() == {
        "buckets": 16, "key_fields": ["user_id", "insert_id"], "normalize": ["trim", "lower"],
        "fingerprint_fields": [], "fingerprint_exclude": ["collector_tstamp"], "fingerprint_hash": "xxh3-64",
        "time_field": "created_at", "ordering": {"survivor": "max:updated_at", "values": "value", "changelog": True}}
    # The time field orders as an instant whatever survivor_values says; first/last record no order.
    timed = load_config(write(tmp_path, '[s3]\nbucket = "events"\n[dedup]\nsurvivor = "min:created_at"\n'), environ={})
    assert timed.cache_identity()["ordering"] == {"survivor": "min:created_at", "values": "instant", "changelog": False}
    assert "ordering" not in default.cache_identity()


def test_a_new_cache_records_xxh3_64_unless_the_configuration_names_its_fingerprint_hash(tmp_path: Path) -> None:
    unset = load_config(write(tmp_path, '[s3]\nbucket = "events"\n'), environ={})
    assert (unset.dedup.fingerprint_hash, unset.cache_identity()["fingerprint_hash"]) == ("", "xxh3-64")
    named = load_config(write(tmp_path, '[s3]\nbucket = "events"\n[dedup]\nfingerprint_hash = "blake2b-64"\n'),
                        environ={})
    assert named.cache_identity()["fingerprint_hash"] == "blake2b-64"


def test_environment_overrides_file_values_with_typed_values(tmp_path: Path) -> None:
    path = write(tmp_path, '[s3]\nbucket = "events"\n[dedup]\nbuckets = 8\n')
    config = load_config(path, environ={"EVENTDEDUP_DEDUP__BUCKETS": "16",
                                        "EVENTDEDUP_S3__ENDPOINT_URL": "http://127.0.0.1:9000",
                                        "EVENTDEDUP_LAYOUT__OUTPUT_PREFIX": "clean"})
    assert config.dedup.buckets == 16
    assert config.s3.endpoint_url == "http://127.0.0.1:9000"
    assert config.layout.output_prefix == "clean/"


@pytest.mark.parametrize("text, message", [
    ('[s3]\nbucket = "events"\n[dedup]\nbucketz = 3\n', "unknown key(s) ['bucketz'] in [dedup]"),
    ('[s3]\nendpoint_url = "http://x"\n', "[s3] bucket is required"),
    ('[s3]\nbucket = "events"\n[dedup]\nbuckets = "many"\n', "[dedup] buckets must be an integer"),
    ('[s3]\nbucket = "events"\n[dedup]\nbuckets = -1\n', "buckets must be between 1 and 65536 (or 0"),
    ('[s3]\nbucket = "events"\n[layout]\naudit_prefix = "deduped/audit/"\n', "lies inside output_prefix"),
    ('[s3]\nbucket = "events"\n[layout]\noutput_prefix = "../x"\n', "'..' path segment"),
    ('[s3]\nbucket = "events"\n[layout]\noutput_prefix = "my data/"\n', "space, control or non-ASCII"),
    ('[s3]\nbucket = "events"\nendpoint_url = "localhost:9000"\n', "must start with http://"),
    ('[s3]\nbucket = "events"\n[events]\nmin_event_time = "2000-01-01T00:00:00"\n', "needs a UTC offset"),
    ('[s3]\nbucket = "events"\n[nope]\nx = 1\n', "unknown section(s) ['nope']"),
    ('[s3\nbucket = "events"\n', "not valid TOML"),
    ('[s3]\nbucket = "events"\n[dedup]\nsynthetic = "merge"\n', "synthetic must be one of ['rename', 'drop', 'keep']"),
    ('[s3]\nbucket = "events"\n[dedup]\nsurvivor = "max"\n', "survivor must be 'first', 'last', 'min:<field>'"),
    ('[s3]\nbucket = "events"\n[dedup]\nsurvivor = "first:x"\n', "survivor must be"),
    ('[s3]\nbucket = "events"\n[dedup]\nnormalize = ["upper"]\n', "normalize accepts ['trim', 'lower']"),
    ('[s3]\nbucket = "events"\n[dedup]\nkey_fields = "user_id"\n', "key_fields must be a list of non-empty strings"),
    ('[s3]\nbucket = "events"\n[dedup]\nkey_fields = ["a", "a"]\n', "lists a name twice"),
    ('[s3]\nbucket = "events"\n[dedup]\nchangelog = "yes"\n', "changelog must be true or false"),
    ('[s3]\nbucket = "events"\n[dedup]\nfingerprint_hash = "xxh3"\n',
     "fingerprint_hash must be one of ['blake2b-64', 'xxh3-64'] (or unset"),
])
def test_invalid_configuration_is_refused_with_a_precise_message(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text), environ={})
    assert message in str(caught.value)


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "absent.toml", environ={})


def test_unknown_environment_section_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown section 'sparks'"):
        load_config(write(tmp_path, '[s3]\nbucket = "events"\n'), environ={"EVENTDEDUP_SPARKS__MASTER": "x"})


def test_the_documented_example_configuration_loads_as_written() -> None:
    example = Path(__file__).resolve().parents[2] / "conf" / "eventdedup.example.toml"
    config = load_config(example, environ={})
    assert config.s3.bucket == "events" and config.key_fields == ("event_id",)
    assert (config.dedup.synthetic, config.dedup.survivor, config.dedup.changelog) == ("rename", "first", False)


def test_the_example_configuration_documents_every_key_there_is() -> None:
    example = Path(__file__).resolve().parents[2] / "conf" / "eventdedup.example.toml"
    with open(example, "rb") as handle:
        documented = tomllib.load(handle)
    assert {section: sorted(keys) for section, keys in documented.items()} == {
        section: sorted(keys) for section, keys in configuration_keys().items()}


@pytest.mark.parametrize("inputs, message", [
    ({"partition_format": "%Y/%m/%d/%H/%M/"}, "fixed-width directives"),
    ({"partition_format": "%m/%d/"}, "must use %Y"),
    ({"partition_format": "%Y/%m/%d/%H"}, "must end with '/'"),
    ({"partition_format": "%Y/", "sorted_key_format": "%Y"}, "not both"),
    ({"lookback_hours": 0}, "at least 1"),
])
def test_input_layouts_that_cannot_bound_a_listing_are_refused(inputs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_mapping({"s3": {"bucket": "events"}, "inputs": inputs})


@pytest.mark.parametrize("bucket", ["[mobile-events", "Events", "ev", "events_raw", "-events", "events-"])
def test_a_bucket_name_s3_would_refuse_is_refused_at_start_up(bucket: str) -> None:
    """A stream's bucket names its output Asset (s3://<bucket>/...): a name S3 refuses would break
    the DAG folder's import for every stream, not only its own."""
    with pytest.raises(ConfigError, match=re.escape(f"bucket {bucket!r} is not a valid bucket name")):
        config_from_mapping({"s3": {"bucket": bucket}})
