"""The embedded S3 server: moto's S3-protocol server on the loopback interface.

moto keeps objects in memory; with a data directory the server restores a snapshot at start
and writes one at stop, so `make airflow` sessions survive a restart. It is a development and
test server: a crash loses what changed since the last snapshot.
"""
from __future__ import annotations

import hashlib
import io
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger(__name__)
LOOPBACK = "127.0.0.1"
IN_MEMORY_OBJECT_BYTES = 128 << 20
BUFFER_SIZE_VARIABLE = "MOTO_S3_DEFAULT_KEY_BUFFER_SIZE"  # moto reads it at each object's PUT
READY_LINE = "local S3 server on "
# Credentials for the local server only; moto accepts any, real AWS none of these.
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "eventdedup-local", "AWS_SECRET_ACCESS_KEY": "eventdedup-local"}


def free_port(host: str = LOOPBACK) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class _LoopbackS3:
    """What both ways of running the server share: the address, and one client for it."""

    def __init__(self, port: int = 0, data_dir: str | Path | None = None, host: str = LOOPBACK) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.data_dir = Path(data_dir) if data_dir else None
        self._client: Any = None

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> Any:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self) -> Any:
        """One shared client: creating a boto3 client costs ~70 ms, and clients are thread-safe."""
        if self._client is None:
            import boto3

            self._client = boto3.client("s3", endpoint_url=self.endpoint_url, region_name="us-east-1",
                                        aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                                        aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"])
        return self._client


def _s3_only_server(host: str, port: int) -> Any:
    """moto's threaded server, answering requests signed for S3 as S3 straight away. moto's
    dispatcher serves all AWS services, and for a path-style request (no service in the host
    name) it infers the service per request while holding one lock: a third of the server's
    time under the job's ~2,000 requests a batch, serialised. The applications are moto's,
    unchanged; requests for other services (SNS alerts) are dispatched as before."""
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    class S3Dispatcher(DomainDispatcherApplication):  # type: ignore[misc]
        def get_application(self, environ: dict[str, Any]) -> Any:
            # A request signed for S3 names it in its credential scope; anything else (SNS alerts,
            # moto's own API, unsigned requests) goes the dispatcher's way.
            if "/s3/aws4_request" not in str(environ.get("HTTP_AUTHORIZATION", "")):
                return super().get_application(environ)
            app = self.app_instances.get("s3")
            if app is None:
                with self.lock:
                    app = self.app_instances.get("s3") or self.create_app("s3")
                    self.app_instances["s3"] = app
            return app

    class Server(ThreadedMotoServer):  # type: ignore[misc]
        def _server_entry(self) -> None:
            self._server = make_server(self._ip_address, self._port, S3Dispatcher(create_backend_app), True,
                                       request_handler=MotoRequestHandler)
            self._server_ready_event.set()
            self._server.serve_forever()

    return Server(ip_address=host, port=port, verbose=False)


_RANGE = re.compile(r"bytes=(\d*)-(\d*)")
_ranged_get = threading.local()  # the Range of the GET this server thread is answering, if any


class _PartlyRead:
    """The value of an object a ranged GET returns: it holds only the asked part, read when moto
    asks for the key's value, and stands for the whole object in length (moto's range handling
    takes `len(value)` and slices it). Any other use reads the whole object, as moto would."""

    def __init__(self, key: Any, read_whole: Any, wanted: tuple[int, int] | None) -> None:
        self._key, self._read_whole, self._size = key, read_whole, int(key.size)
        self._wanted = wanted
        self._part = b""
        if wanted is not None:
            with key.lock:  # moto's own getter reads under this lock
                self._part = read_part(key._value_buffer, *wanted)

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, part: slice) -> bytes:
        asked = (part.start, part.stop) if isinstance(part, slice) and part.step is None else None
        if self._wanted is not None and asked == self._wanted:
            return self._part
        whole: bytes = self._read_whole(self._key)[part]
        return whole

    def whole(self) -> bytes:
        value: bytes = self._read_whole(self._key)
        return value


def read_part(buffer: Any, start: int, stop: int) -> bytes:
    """Bytes [start, stop) of a key's spooled buffer, without moving its shared position: moto
    computes a key's ETag by seeking and reading the same buffer outside the key's lock, so a
    seek-then-read here could return another offset's bytes under concurrent requests."""
    inner = getattr(buffer, "_file", None)
    if isinstance(inner, io.BytesIO):  # still in memory
        with inner.getbuffer() as view:
            return bytes(view[start:stop])
    if inner is None:  # not a SpooledTemporaryFile as moto 5 makes it: as before
        buffer.seek(start)
        data: bytes = buffer.read(stop - start)
        return data
    inner.flush()  # rolled over to a file: what the buffered writer holds must reach it first
    pieces, position = [], start
    while position < stop:
        piece = os.pread(inner.fileno(), stop - position, position)
        if not piece:
            break
        pieces.append(piece)
        position += len(piece)
    return b"".join(pieces)


def _wanted_part(header: str, size: int) -> tuple[int, int] | None:
    """The [start, stop) a single-range header asks of an object of `size` bytes, by S3's rules
    (an end past the object is cut to it; `-n` is the last n bytes); None when it asks nothing
    servable, which moto then answers as it always has."""
    match = _RANGE.fullmatch(header.strip())
    if match is None or size == 0 or not (match.group(1) or match.group(2)):
        return None
    first, last = match.group(1), match.group(2)
    if first:
        start, stop = int(first), size if not last else min(int(last), size - 1) + 1
    else:
        start, stop = size - min(int(last), size), size
    return (start, stop) if start < stop else None


def serve_ranges_in_place() -> bool:
    """Make moto answer a ranged GET by reading only the range. moto 5 builds the response of a GET
    from the whole object (reading it from its spooled file) and slices the range from that: every
    ranged GET of a 300 MB input cost the server ~0.25 s of CPU however little it asked for, where
    S3 reads what it is asked. Conditional headers, errors and every other request are moto's,
    unchanged. Returns False (moto serves as before) if this moto lacks what the patch wraps."""
    from moto.s3.models import FakeKey
    from moto.s3.responses import S3Response

    if getattr(S3Response.key_response, "_serves_ranges_in_place", False):
        return True
    value_property = FakeKey.__dict__.get("value")
    if not isinstance(value_property, property) or value_property.fset is None or not hasattr(FakeKey, "size"):
        log.warning("moto's FakeKey has changed; ranged GETs read whole objects")
        return False
    read_whole, key_response = value_property.fget, S3Response.key_response

    def value(key: Any) -> Any:
        header = getattr(_ranged_get, "header", None)
        if header is None:
            return read_whole(key)
        return _PartlyRead(key, read_whole, _wanted_part(header, int(key.size)))

    def ranged_key_response(self: Any, request: Any, full_url: str, headers: dict[str, Any]) -> Any:
        header = request.headers.get("range") if request.method == "GET" else None
        _ranged_get.header = header or None
        try:
            status, response_headers, body = key_response(self, request, full_url, headers)
        finally:
            _ranged_get.header = None
        # moto answers some ranges (several, or past the end) with the whole object
        return status, response_headers, body.whole() if isinstance(body, _PartlyRead) else body

    ranged_key_response._serves_ranges_in_place = True  # type: ignore[attr-defined]
    FakeKey.value = property(value, value_property.fset)  # type: ignore[method-assign,assignment]
    S3Response.key_response = ranged_key_response  # type: ignore[method-assign]
    return True


class LocalS3Server(_LoopbackS3):
    """moto's threaded server inside this process: what `eventdedup-dev local-s3` runs."""

    def __init__(self, port: int = 0, data_dir: str | Path | None = None, host: str = LOOPBACK) -> None:
        super().__init__(port, data_dir, host)
        self._server: Any = None
        self._buffer_set = False

    def start(self) -> LocalS3Server:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
        # moto spools an object larger than ~5 MB to a temporary file, copying it there on its
        # PUT: a batch's data files cost the server ~0.25 s of CPU that way (of ~1.8 s a 1M
        # batch). A server without a data directory lives for one run (tests, the bench, the
        # demo): its objects up to IN_MEMORY_OBJECT_BYTES stay in memory. One with a data
        # directory (the stack's, `make airflow`'s) keeps data for long, so moto's spooling
        # stays. A setting of the variable wins; ours is removed again at stop.
        if self.data_dir is None and BUFFER_SIZE_VARIABLE not in os.environ:
            os.environ[BUFFER_SIZE_VARIABLE] = str(IN_MEMORY_OBJECT_BYTES)
            self._buffer_set = True
        serve_ranges_in_place()
        self._server = _s3_only_server(self.host, self.port)
        self._server.start()
        if self.data_dir is not None:
            self._restore()
        log.info("local S3 server listening on %s", self.endpoint_url)
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        if self.data_dir is not None:
            self._snapshot()
        self._server.stop()
        self._server = None
        if self._buffer_set:
            os.environ.pop(BUFFER_SIZE_VARIABLE, None)
            self._buffer_set = False

    def _snapshot(self) -> None:
        assert self.data_dir is not None
        client = self.client()
        target = self.data_dir.with_name(self.data_dir.name + ".new")
        shutil.rmtree(target, ignore_errors=True)
        (target / "blobs").mkdir(parents=True)
        index: dict[str, list[dict[str, str]]] = {}
        for bucket in client.list_buckets().get("Buckets", []):
            name = bucket["Name"]
            index[name] = []
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
                for item in page.get("Contents", []):
                    body = client.get_object(Bucket=name, Key=item["Key"])["Body"].read()
                    digest = hashlib.sha256(body).hexdigest()
                    (target / "blobs" / digest).write_bytes(body)
                    index[name].append({"key": item["Key"], "blob": digest})
        (target / "index.json").write_bytes(orjson.dumps(index))
        # Swap whole directories so a crash mid-snapshot leaves the previous snapshot intact.
        if self.data_dir.exists():
            old = self.data_dir.with_name(self.data_dir.name + ".old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(self.data_dir, old)
            os.replace(target, self.data_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(target, self.data_dir)

    def _restore(self) -> None:
        assert self.data_dir is not None
        index_file = self.data_dir / "index.json"
        if not index_file.exists():
            return
        client = self.client()
        for bucket, items in orjson.loads(index_file.read_bytes()).items():
            client.create_bucket(Bucket=bucket)
            for item in items:
                client.put_object(Bucket=bucket, Key=item["key"], Body=(self.data_dir / "blobs" / item["blob"]).read_bytes())


class LocalS3Process(_LoopbackS3):
    """The same server in a child process (`eventdedup-dev local-s3`), as tests and the demo use it:
    it then has its own interpreter and core instead of competing with the client for the GIL."""

    def __init__(self, port: int = 0, data_dir: str | Path | None = None, host: str = LOOPBACK) -> None:
        super().__init__(port, data_dir, host)
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The server's process id (the benchmark reads the emulator's CPU time from it)."""
        assert self._process is not None, "the server is not running"
        return self._process.pid

    def start(self, timeout: float = 60.0) -> LocalS3Process:
        command = [sys.executable, "-m", "eventdedup_dev", "local-s3", "--port", str(self.port)]
        if self.data_dir is not None:
            command += ["--data-dir", str(self.data_dir)]
        self._process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        # The server prints READY_LINE only after restoring its snapshot: an open port alone
        # would let a caller in before the restored objects are there.
        ready = threading.Event()

        def wait_for_ready() -> None:
            assert self._process is not None and self._process.stdout is not None
            for line in self._process.stdout:
                if line.startswith(READY_LINE.encode()):
                    ready.set()
                    return

        threading.Thread(target=wait_for_ready, daemon=True).start()
        if not ready.wait(timeout):
            code = self._process.poll()
            self.stop()
            raise RuntimeError(f"local S3 server on {self.endpoint_url} did not become ready within {timeout:.0f}s"
                               + (f" (exited with {code})" if code is not None else ""))
        return self

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.send_signal(signal.SIGTERM)  # lets the server write its snapshot
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None
