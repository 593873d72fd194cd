"""Fixtures of the integration tests beyond the suite's own (tests/conftest.py)."""
from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import pytest

from eventdedup_dev.s3_fault_proxy import FaultProxy


@pytest.fixture(scope="module")
def dating_proxy(s3_server) -> Iterator[FaultProxy]:  # type: ignore[no-untyped-def]
    """A proxy in front of the S3 server whose LIST replies date keys as a test says."""
    with FaultProxy(s3_server.endpoint_url) as proxy:
        yield proxy


@pytest.fixture
def dated(dating_proxy: FaultProxy) -> Iterator[dict[str, datetime]]:
    """key -> the LastModified LIST replies show for it (the server's own for keys not in it)."""
    dates: dict[str, datetime] = {}
    dating_proxy.redate(dates.get)
    yield dates
    dating_proxy.redate(None)
