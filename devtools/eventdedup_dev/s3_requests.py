"""What an S3 request is, apart from when it arrives: so that a fault test names the request it means.

A batch sends its requests from several threads and processes at once (the promotion's copies,
the executors' reads, delta-rs's own reads), so "request number k" is a different request from
one run to the next, and more so on a busy machine. A `FaultPoint` names a request by what it is
instead: its identity (verb, key, the query and headers that make it a different request, its
condition; never the bucket, so a clone of a bucket has the same requests) and which occurrence of
that identity it is. Both fault injectors take one: the HTTP proxy in front of the store
(`s3_fault_proxy.FaultProxy`, which sees the executors' requests too) and the client wrappers of
the promotion tests (`tests/support/s3_faults.py`).

A request is logged as an `S3Request`: the text the proxy always logged ("METHOD /bucket/path",
COPY for copies, " if-none-match" for conditional writes), which the tests read as text, with
its parsed parts beside it.
"""
from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

_KEY_ELEMENT = re.compile(rb"<Key>(.*?)</Key>", re.DOTALL)
# A dedup job's attempt stages under a root of its own, named at random (Layout.attempt_root): the
# same request of two runs differs only there, so an identity names every attempt alike.
_ATTEMPT = re.compile(r"/attempt-[0-9a-z]+/")


class S3Request(str):
    """One logged request: its text, and what it is (`verb`, `bucket`, `key`, `detail`, `condition`).

    A str, so that the tests' textual checks of the proxy's log keep reading as they always did;
    `identity` is the bucket-free name a `FaultPoint` matches.
    """

    verb: str       # GET, HEAD, PUT, COPY, DELETE, LIST, POST (batch delete, multipart create/complete)
    bucket: str
    key: str        # the object's key; a LIST's prefix
    detail: str     # what else makes it another request: a range, a LIST's start, a copy's source...
    condition: str  # "if-none-match" or "if-match" for a conditional write, else ""

    def __new__(cls, text: str, verb: str, bucket: str, key: str, detail: str = "",
                condition: str = "") -> S3Request:
        request = super().__new__(cls, text)
        request.verb, request.bucket, request.key = verb, bucket, key
        request.detail, request.condition = detail, condition
        return request

    @property
    def identity(self) -> str:
        named = " ".join(part for part in (self.verb, self.key, self.detail, self.condition) if part)
        return _ATTEMPT.sub("/attempt-*/", named)


def _condition(if_none_match: object, if_match: object) -> str:
    return "if-none-match" if if_none_match else "if-match" if if_match else ""


def _batch_delete_detail(keys: list[str]) -> str:
    return f"delete {len(keys)} from {min(keys)}" if keys else "delete 0"


def request_of_http(method: str, path: str, headers: Mapping[str, str], body: bytes) -> S3Request:
    """What an HTTP request to a path-style S3 endpoint is (the proxy's view)."""
    parts = urlsplit(path)
    bucket, _, raw_key = parts.path.lstrip("/").partition("/")
    key = unquote(raw_key)
    query = parse_qs(parts.query, keep_blank_values=True)
    copy_source = headers.get("x-amz-copy-source")
    condition = _condition(headers.get("If-None-Match"), headers.get("If-Match"))
    verb, detail = method, ""
    if copy_source:
        verb, detail = "COPY", "from " + unquote(copy_source).lstrip("/").partition("/")[2].split("?", 1)[0]
    elif method == "GET" and not key and ("list-type" in query or "prefix" in query):
        verb, key = "LIST", query.get("prefix", [""])[0]
        detail = " ".join(f"{name}={query[name][0]}" for name in ("start-after", "continuation-token", "delimiter")
                          if name in query)
    elif method == "GET" and headers.get("Range"):
        detail = str(headers.get("Range"))
    elif method == "POST" and "delete" in query:
        detail = _batch_delete_detail(sorted(unquote(k.decode()) for k in _KEY_ELEMENT.findall(body)))
    elif "uploads" in query:
        detail = "multipart create"
    elif "uploadId" in query:
        detail = f"part {query['partNumber'][0]}" if "partNumber" in query else "multipart complete"
    verb_text = "COPY" if copy_source else method
    text = f"{verb_text} {path}{' if-none-match' if headers.get('If-None-Match') else ''}"
    return S3Request(text, verb, bucket, key, detail, condition)


_CLIENT_VERBS = {"get_object": "GET", "put_object": "PUT", "head_object": "HEAD", "copy_object": "COPY",
                 "delete_object": "DELETE", "delete_objects": "POST", "list_objects_v2": "LIST"}


def request_of_call(method: str, kwargs: Mapping[str, Any]) -> S3Request:
    """What a boto3 client call is (the client wrappers' view), named as the proxy names it."""
    verb = _CLIENT_VERBS[method]
    bucket = str(kwargs.get("Bucket", ""))
    key = str(kwargs.get("Prefix", "") if verb == "LIST" else kwargs.get("Key", ""))
    detail = ""
    if verb == "COPY":
        detail = "from " + str(kwargs["CopySource"]["Key"])
    elif verb == "LIST":
        detail = " ".join(f"{name}={kwargs[arg]}" for name, arg in (
            ("start-after", "StartAfter"), ("continuation-token", "ContinuationToken"), ("delimiter", "Delimiter"))
            if kwargs.get(arg))
    elif verb == "GET" and kwargs.get("Range"):
        detail = str(kwargs["Range"])
    elif verb == "POST":
        detail = _batch_delete_detail(sorted(str(o["Key"]) for o in kwargs["Delete"]["Objects"]))
    condition = _condition(kwargs.get("IfNoneMatch"), kwargs.get("IfMatch"))
    return S3Request(f"{method} {bucket}/{key}", verb, bucket, key, detail, condition)


@dataclass(frozen=True)
class FaultPoint:
    """The `occurrence`-th request (from 1) whose identity is `identity`, or that `where` accepts.

    `identity` names one exact request of a clean run (what a sweep takes); `where` a kind of
    request ("the first COPY", "the commit's PUT"); `label` says it in the test's words.
    """

    identity: str | None = None
    where: Callable[[S3Request], bool] | None = None
    occurrence: int = 1
    label: str = ""

    def __post_init__(self) -> None:
        if (self.identity is None) == (self.where is None):
            raise ValueError("a fault point names its request by identity or by a predicate, exactly one")
        if self.occurrence < 1:
            raise ValueError(f"occurrence counts from 1, not {self.occurrence}")

    def matches(self, request: S3Request) -> bool:
        if self.identity is not None:
            return request.identity == self.identity
        assert self.where is not None
        return self.where(request)

    def __str__(self) -> str:
        what = self.label or self.identity or "a matching request"
        return what if self.occurrence == 1 else f"{what} (occurrence {self.occurrence})"


def first_request(where: Callable[[S3Request], bool], label: str) -> FaultPoint:
    """The first request of a kind."""
    return FaultPoint(where=where, label=label)


def points_of(requests: Iterable[S3Request]) -> list[FaultPoint]:
    """Every request of a run as a fault point: each identity with each of its occurrences, in the
    order the run first made them. A sweep over these covers the same requests on every run."""
    seen: Counter[str] = Counter()
    points = []
    for request in requests:
        seen[request.identity] += 1
        points.append(FaultPoint(identity=request.identity, occurrence=seen[request.identity]))
    return points


class PointCounter:
    """Counts the requests a fault point matches, from any number of threads; `hit` is true for
    exactly one request: the point's occurrence. `reached` is that request, once it came."""

    def __init__(self, point: FaultPoint | None) -> None:
        self.point = point
        self.reached: S3Request | None = None
        self._matched = 0
        self._lock = threading.Lock()

    def disarm(self) -> None:
        """Match nothing from now on; what was reached stays recorded."""
        with self._lock:
            self.point = None

    def hit(self, request: S3Request) -> bool:
        point = self.point
        if point is None or not point.matches(request):
            return False
        with self._lock:
            if self.point is None:
                return False
            self._matched += 1
            if self._matched != point.occurrence:
                return False
            self.reached = request
            return True
