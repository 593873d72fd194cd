"""The batch parser survives an exception inside its fast paths by parsing the chunk line by line
(slow but equal): a test of the fast paths must fail on it instead of passing on that fallback."""
from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from eventdedup.parse import object_parser


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def no_line_by_line_fallback() -> Iterator[None]:
    """Fails the test if object_parser fell back to parsing a chunk line by line inside the block."""
    warnings = _Warnings()
    logger = logging.getLogger(object_parser.__name__)
    logger.addHandler(warnings)
    try:
        yield
    finally:
        logger.removeHandler(warnings)
    assert not [message for message in warnings.messages if message.startswith("fast parse of lines")], \
        warnings.messages
