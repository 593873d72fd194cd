"""S3 clients share botocore's parsed service models, and nothing else: each still looks its
credentials up when it is made."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from eventdedup.config import S3Settings
from eventdedup.s3store import make_client


def test_clients_share_one_model_loader_and_look_credentials_up_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = S3Settings(endpoint_url="http://127.0.0.1:9", bucket="unused")
    clients = []
    for key in ("first-key", "second-key", "third-key"):
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", f"secret-of-{key}")
        clients.append(make_client(settings))
    loaders = {id(client._loader) for client in clients}  # type: ignore[attr-defined]
    assert len(loaders) == 1
    paths = clients[0]._loader.search_paths  # type: ignore[attr-defined]
    assert len(paths) == len(set(paths))  # boto3 adds its data directory per session: kept once
    keys = [client._request_signer._credentials.access_key for client in clients]  # type: ignore[attr-defined]
    assert keys == ["first-key", "second-key", "third-key"]


def test_warming_the_models_opens_no_connection_and_asks_for_no_credentials() -> None:
    """The Spark daemon warms the loader before it forks workers: no socket may be open then,
    and with no credentials anywhere nothing may fail or look for them (no instance metadata)."""
    script = (
        "import os\n"
        "def sockets():\n"
        "    fds = os.listdir('/proc/self/fd')  # the listing's own descriptor is gone once listed\n"
        "    return sum(os.path.exists(f'/proc/self/fd/{fd}') and os.readlink(f'/proc/self/fd/{fd}')"
        ".startswith('socket:') for fd in fds)\n"
        "before = sockets()\n"
        "from eventdedup.s3store import warm_service_models\n"
        "warm_service_models()\n"
        "print(before, sockets())\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE="/nonexistent", AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
               AWS_EC2_METADATA_DISABLED="true")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env)
    before, after = done.stdout.split()
    assert before == after
