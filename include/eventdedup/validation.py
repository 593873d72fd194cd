"""Checks on what a person or a DAG asks for, done before any S3 call."""
from __future__ import annotations

from .naming import normalize_prefix, validate_batch_id
from .staging import InputSelector


def validated_batch_request(batch_id: str, selector: InputSelector) -> tuple[str, InputSelector]:
    validate_batch_id(batch_id)
    if selector.input_prefix is not None:
        selector = InputSelector(input_prefix=normalize_prefix(selector.input_prefix, what="input prefix"))
    return batch_id, selector
