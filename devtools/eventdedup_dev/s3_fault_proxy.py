"""An HTTP proxy in front of the local S3 server that 'kills the pipeline' at a request it names.

Every S3 request of a batch -- the driver's (staging, job set-up, promotion, commit) and the
Spark executors' (input reads, cache loads, staged writes), which run in other processes -- goes
through the endpoint in the configuration, so a proxy there sees them all, without patching
boto3. The fault is armed at a `FaultPoint` (eventdedup_dev.s3_requests): a request named by what
it is and which occurrence of it, never by its arrival number, which the batch's threads and
processes reorder from run to run. `faulted` records the request that was failed, or None if the
run never made it. Three flavours, the first two as in Delta Lake's failing log store and Iceberg's
commit-state-unknown tests:

- `raise_before`: the request never reaches S3; the caller gets an error;
- `lose_response`: the request takes effect on S3, but the caller gets an error instead of the reply;
- `conflict`: the request never reaches S3 and gets HTTP 409 `ConditionalRequestConflict`, what AWS
  answers a conditional write that raced another one: transient, the caller must retry.

With the first two, every request from then on fails (`InjectedCrash`, HTTP 403, which boto3 does
not retry): the process that made it is as good as dead. `heal()` revives the endpoint for recovery.
A callback can replace the failure (e.g. to SIGKILL a process at an exact request).

`redate()` injects time instead of failures: LIST replies carry the `LastModified` a test chose
for each key, so a test can place objects in any interval (or make one appear late, dated in
an interval already processed) without waiting for the wall clock.
"""
from __future__ import annotations

import html
import http.client
import re
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from .s3_requests import FaultPoint, PointCounter, S3Request, request_of_http

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}
_CONFLICT_BODY = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>ConditionalRequestConflict</Code>'
                  b"<Message>A conflicting operation occurred. If using PutObject you can retry the request."
                  b"</Message></Error>")
_CONTENTS = re.compile(rb"<Contents>(.*?)</Contents>", re.DOTALL)
_KEY = re.compile(rb"<Key>(.*?)</Key>", re.DOTALL)
_LAST_MODIFIED = re.compile(rb"<LastModified>[^<]*</LastModified>")
_CRASH_BODY = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InjectedCrash</Code>'
               b"<Message>fault injection: the pipeline process is dead</Message></Error>")


class FaultProxy:
    def __init__(self, upstream_url: str) -> None:
        parts = urlsplit(upstream_url)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.requests: list[S3Request] = []  # every request seen, in arrival order ("METHOD path" as text)
        self.bytes_served: dict[str, int] = {}  # body bytes of successful replies, per "METHOD path"
        self.bytes_received: dict[str, int] = {}  # object bytes of successful PUTs, per "METHOD path"
        self._armed = PointCounter(None)
        self.flavour = "raise_before"
        self.on_fault: Callable[[S3Request], None] | None = None
        self.dead = False
        self.sticky = True
        self.dates: Callable[[str], datetime | None] | None = None
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def arm(self, at: FaultPoint | None, flavour: str = "raise_before",
            on_fault: Callable[[S3Request], None] | None = None, sticky: bool = True) -> None:
        """Start a new log of requests and fail the request `at` names (None: fail none, only
        count); with sticky=False only that request fails (a transient fault, not a death)."""
        assert flavour in ("raise_before", "lose_response", "conflict")
        with self._lock:
            self.requests, self._armed = [], PointCounter(at)
            self.bytes_served, self.bytes_received = {}, {}
            self.flavour, self.on_fault, self.dead, self.sticky = flavour, on_fault, False, sticky

    @property
    def faulted(self) -> S3Request | None:
        """The request the armed fault failed; None while the run has not made it."""
        return self._armed.reached

    def redate(self, dates: Callable[[str], datetime | None] | None) -> None:
        """From now on, LIST replies show `dates(key)` as each object's LastModified (unchanged
        where it returns None); `redate(None)` shows the server's own dates again."""
        with self._lock:
            self.dates = dates

    def _redated(self, path: str, body: bytes) -> bytes:
        dates = self.dates
        query = parse_qs(urlsplit(path).query, keep_blank_values=True)
        if dates is None or ("list-type" not in query and "prefix" not in query):  # not a LIST reply
            return body
        url_encoded = query.get("encoding-type") == ["url"]

        def one(match: re.Match[bytes]) -> bytes:
            entry = match.group(1)
            key_match = _KEY.search(entry)
            if key_match is None:
                return match.group(0)
            key = html.unescape(key_match.group(1).decode())
            date = dates(unquote(key) if url_encoded else key)
            if date is None:
                return match.group(0)
            stamp = date.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z").encode()
            return b"<Contents>" + _LAST_MODIFIED.sub(b"<LastModified>" + stamp + b"</LastModified>", entry) + b"</Contents>"

        return _CONTENTS.sub(one, body)

    def heal(self) -> None:
        """Revive the endpoint; the fault stays recorded in `faulted`, and is not armed any more."""
        with self._lock:
            self._armed.disarm()
            self.dead, self.on_fault = False, None

    def _decide(self, request: S3Request) -> tuple[bool, bool, bool]:
        """(forward upstream?, fail the reply?, is it the armed request?) for one arriving request."""
        with self._lock:
            if self.dead:
                return False, True, False
            self.requests.append(request)
            if not self._armed.hit(request):
                return True, False, False
            if self.sticky and self.flavour != "conflict":
                self.dead = True
            return self.flavour == "lose_response", True, True

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes: with Nagle's algorithm on, the second waits
            # for the client's delayed ACK (~40 ms), which made every proxied request slow.
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                request = request_of_http(self.command, self.path, self.headers, body)  # type: ignore[arg-type]
                description = str(request)
                forward, fail, armed = proxy._decide(request)
                reply = proxy._forward(self.command, self.path, self.headers, body) if forward else None
                if fail:
                    if armed and proxy.on_fault is not None:
                        proxy.on_fault(request)
                    if proxy.flavour == "conflict":
                        self._send(409, [("Content-Type", "application/xml")], _CONFLICT_BODY)
                    else:
                        self._send(403, [("Content-Type", "application/xml")], _CRASH_BODY)
                else:
                    assert reply is not None
                    status, headers, payload = reply
                    if self.command == "GET" and status in (200, 206):
                        payload = proxy._redated(self.path, payload)
                        with proxy._lock:
                            proxy.bytes_served[description] = proxy.bytes_served.get(description, 0) + len(payload)
                    elif request.verb == "PUT" and status == 200:
                        # An aws-chunked body carries framing: the object's size is the decoded length.
                        size = int(self.headers.get("x-amz-decoded-content-length") or len(body))
                        with proxy._lock:
                            proxy.bytes_received[description] = proxy.bytes_received.get(description, 0) + size
                    self._send(status, headers, payload)

            def _send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
                try:
                    self._write(status, headers, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the caller was killed while we answered

            def _write(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
                self.send_response(status)
                # A HEAD reply has no body but announces the object's length: pass that through.
                keep_length = self.command == "HEAD" and any(n.lower() == "content-length" for n, _ in headers)
                for name, value in headers:
                    if name.lower() not in _HOP_BY_HOP and (name.lower() != "content-length" or keep_length):
                        self.send_header(name, value)
                if not keep_length:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _serve

        return Handler

    def _forward(self, method: str, path: str, headers: object, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        connection = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            outgoing = {k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP}  # type: ignore[attr-defined]
            connection.request(method, path, body=body, headers=outgoing)
            response = connection.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            connection.close()
