"""Store-wide invariants checked after every injected fault."""
from __future__ import annotations

import orjson
from deltalake import DeltaTable

from eventdedup.commit.log import load_committed_state, read_commit
from eventdedup.commit.view import EMPTY_LOAD_MANIFEST, committed_entries
from eventdedup.config import Config
from eventdedup.delta.projection import APP_ID, table_files, table_status
from eventdedup.delta.storage import storage_options
from eventdedup.keys import key_digest
from eventdedup.layout import Layout
from eventdedup.parse.fingerprints import FingerprintRules
from eventdedup.s3store import S3Store
from eventdedup.tables import parquet_to_table

from .helpers import committed_cache_entries, committed_rows, recorded_fingerprint_hash


def assert_commits_are_whole(store: S3Store, config: Config) -> None:
    """Every object a commit names exists with its recorded size and ETag: no partial batch is
    visible. A retracted batch's load manifest exists, emptied (eventdedup.commit.view). And the
    load manifests follow the log (assert_load_manifests_follow_the_log), and the Delta table is
    the committed view as of the log version it reflects (assert_table_is_the_view_at_its_version)."""
    assert_load_manifests_follow_the_log(store, config)
    assert_table_is_the_view_at_its_version(store, config)
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    for version in range(1, state.version + 1):
        record = read_commit(store, layout, version)
        assert record is not None
        for obj in record.objects:
            if obj.kind == "load_manifest" and record.batch_id in state.retracted:
                # Emptied after the retraction's commit, before its journal goes: until then, the
                # journal says who finishes it (recover, or the retried retract).
                retraction = read_commit(store, layout, state.retracted[record.batch_id])
                assert retraction is not None
                unfinished = store.head(layout.journal(retraction.batch_id)) is not None
                assert unfinished or store.get_bytes(obj.key) == EMPTY_LOAD_MANIFEST, f"v{version}: {obj.key}"
                continue
            head = store.head(obj.key)
            assert head is not None and (head.size, head.etag) == (obj.size, obj.etag), f"v{version}: {obj.key}"


def assert_seen_ids_match_output(store: S3Store, config: Config) -> None:
    """A (key, fingerprint) is marked seen in a committed cache exactly when a committed batch output it."""
    seen = {(key, fp) for _, key, fp in committed_cache_entries(store, config)}
    fingerprints = FingerprintRules(config.dedup.fingerprint_fields, config.dedup.fingerprint_exclude,
                                    recorded_fingerprint_hash(store, config))
    output = {
        (key_digest(row["original_event_id"] or row["event_id"]), fingerprints.fingerprint(orjson.loads(row["raw"])))
        for row in committed_rows(store, config, "data")
    }
    assert seen == output


def assert_load_manifests_follow_the_log(store: S3Store, config: Config) -> None:
    """A Redshift load manifest exists only for a committed batch, listing exactly its committed
    data files (emptied once it is retracted); a committed batch has one, unless the promotion
    that wrote its commit has not finished (its journal, or its retraction's, still exists:
    whoever finishes it writes the manifest). Written out from the rule, not by the code's helper."""
    layout = Layout(config.layout)
    state = load_committed_state(store, layout)
    records = {}
    for version in range(1, state.version + 1):
        record = read_commit(store, layout, version)
        assert record is not None
        records[record.batch_id] = record
    manifests = {info.key[len(config.layout.manifest_prefix):-len(".manifest")]: info.key
                 for info in store.list(config.layout.manifest_prefix)}
    retracted_by = {target: record.batch_id for record in records.values() for target in record.retracts}
    uncommitted = sorted(set(manifests) - set(records))
    assert uncommitted == [], f"load manifests of batches that are not committed: {uncommitted}"
    for batch_id, record in records.items():
        if record.is_operation:
            continue
        finisher = retracted_by.get(batch_id, batch_id)
        pending = store.head(layout.journal(finisher)) is not None
        body = store.get_bytes_or_none(layout.redshift_manifest(batch_id))
        wanted = [] if batch_id in state.retracted else [(obj.key, obj.size) for obj in record.objects
                                                         if obj.kind == "data"]
        # The URLs name the bucket (a test's cloned bucket keeps its source's): compared by key.
        listed = None if body is None else [(entry["url"].split("/", 3)[3], entry["meta"]["content_length"])
                                            for entry in orjson.loads(body)["entries"] if entry["mandatory"]]
        assert pending or listed == wanted, f"{batch_id}: load manifest {body!r}"


def assert_table_is_the_view_at_its_version(store: S3Store, config: Config, *, caught_up: bool = False) -> int:
    """The Delta table (read with delta-rs) holds exactly the committed view as of the log version
    it reflects: never a batch the log has not committed, never one the view has left, never a row
    twice. `caught_up`: and that version is the log's last. Returns the version it reflects.

    Where every file of the table is a batch's own (no compaction), its files are the view's data
    files, each once (files are immutable: assert_commits_are_whole holds them to their commits);
    otherwise its rows are the view's rows."""
    layout = Layout(config.layout)
    head = load_committed_state(store, layout).version
    status = table_status(store, config)
    if not status.exists:
        assert not caught_up or config.table.delta == "off", "no Delta table"  # these stores are new: auto makes one
        return 0
    table = DeltaTable(status.location, storage_options=storage_options(store, config.s3))
    at = table.transaction_version(APP_ID) or 0
    assert at <= head, f"the table reflects log version {at}, the log ends at {head}"
    assert not caught_up or at == head, f"the table reflects log version {at}, the log is at {head}"
    view = [entry.promoted for entry in committed_entries(store, layout, at) if entry.promoted.kind == "data"]
    files = table_files(table)
    if all(layout.data_owner(path) is not None for path in files):
        wanted = sorted(obj.key[len(config.layout.output_prefix):] for obj in view)
        assert sorted(files) == wanted, f"table at log version {at}: files {sorted(files)}, the view's {wanted}"
        return at
    expected = [_row_text(row) for obj in view for row in parquet_to_table(store.get_bytes(obj.key)).to_pylist()]
    found = [_row_text({k: v for k, v in row.items() if k not in ("date", "hour")})
             for row in table.to_pyarrow_table().to_pylist()]
    assert sorted(found) == sorted(expected), f"table at log version {at}: {len(found)} rows, view {len(expected)}"
    return at


def _row_text(row: dict) -> str:  # type: ignore[type-arg]
    return orjson.dumps(row, default=str, option=orjson.OPT_SORT_KEYS).decode()
