"""Where the Delta table is, and how delta-rs reaches it: the same endpoint and credentials as the
store's own S3 client, so that a table is never written with another identity than its files.

delta-rs (object_store) has a credential chain of its own; it is not used. The credentials are
the ones the caller's boto3 client signs with (an Airflow connection's, the environment's, a
profile's, an instance role's), frozen for one operation.
"""
from __future__ import annotations

from typing import Any

import boto3
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from eventdedup.config import Config, S3Settings
from eventdedup.s3store import S3Store

DELTA_LOG = "_delta_log/"
# object_store's retries: as many attempts as boto3's standard mode makes, within a minute.
_RETRIES = {"max_retries": "4", "retry_timeout": "60s"}


def table_location(store: S3Store, config: Config) -> str:
    return store.uri(config.layout.output_prefix).rstrip("/")


def storage_options(store: S3Store, settings: S3Settings) -> dict[str, str]:
    # The client's own region (an Airflow connection's may differ from the configuration's).
    region = next((str(meta.region_name) for client in _through_wrappers(store.client)
                   if (meta := getattr(client, "meta", None)) is not None and getattr(meta, "region_name", None)),
                  settings.region)
    options = {"AWS_REGION": region, **_RETRIES}
    endpoint = settings.endpoint_url and (store.endpoint or settings.endpoint_url)
    if endpoint:
        options.update(AWS_ENDPOINT_URL=endpoint, AWS_ALLOW_HTTP=str(endpoint.startswith("http://")).lower(),
                       AWS_VIRTUAL_HOSTED_STYLE_REQUEST="false")
    credentials = _credentials(store.client)
    if credentials is not None:
        options.update(AWS_ACCESS_KEY_ID=credentials.access_key, AWS_SECRET_ACCESS_KEY=credentials.secret_key)
        if credentials.token:
            options["AWS_SESSION_TOKEN"] = credentials.token
    return options


def _through_wrappers(client: Any) -> list[Any]:
    """The client, and the one a wrapper (a test's fault injector) holds."""
    return [candidate for candidate in (client, getattr(client, "inner", None), getattr(client, "_client", None))
            if candidate is not None]


def _credentials(client: Any) -> Any:
    """The frozen credentials a boto3 client signs with (looked for through wrappers); else boto3's
    default chain."""
    for candidate in _through_wrappers(client):
        signer = getattr(candidate, "_request_signer", None)
        found = getattr(signer, "_credentials", None)
        if found is not None:
            return found.get_frozen_credentials()
    found = boto3.session.Session().get_credentials()
    return None if found is None else found.get_frozen_credentials()


def open_table(store: S3Store, config: Config) -> DeltaTable | None:
    """The table at the output prefix, or None where there is none (delta-rs finds no commit: a
    GET of `_last_checkpoint` and a LIST of its log)."""
    try:
        return DeltaTable(table_location(store, config), storage_options=storage_options(store, config.s3))
    except TableNotFoundError:
        return None
