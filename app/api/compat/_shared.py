"""What the codecs of the compatible endpoints share: reading request fields, framing server-sent
events, and telling a failure's status, code and message (pure, no I/O)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from app.api.problems import status_of
from app.core.content import ToolResultState
from app.core.errors import InvalidInput, ServiceError
from app.core.pipeline.prepared_call import ToolDefinition

__all__ = [
    "EMPTY_SCHEMA",
    "failure",
    "optional_bool",
    "positive_int",
    "required_string",
    "sse",
    "tool_definition",
    "tool_state",
]

logger = logging.getLogger(__name__)

# The schema of a tool that declares no parameters (both protocols allow leaving it out).
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def required_string(body: Mapping[str, Any], key: str, *, code: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidInput(code, f"{key} must be a non-empty string")
    return value


def positive_int(body: Mapping[str, Any], key: str, *, code: str) -> int | None:
    """``body[key]`` as a whole number ≥ 1, ``None`` when absent or null."""
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidInput(code, f"{key} must be a whole number of tokens ≥ 1; got {value!r:.40}")
    return value


def optional_bool(body: Mapping[str, Any], key: str, *, code: str) -> bool:
    value = body.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidInput(code, f"{key} must be true or false; got {value!r:.40}")
    return value


def tool_definition(name: Any, description: Any, schema: Any, index: int) -> ToolDefinition:
    """One function tool as the content model holds it; the protocol's field names differ, the
    rules do not: a name, an optional description, an optional object schema."""
    if not isinstance(name, str) or not name:
        raise InvalidInput("invalid_tools", f"tool {index} has no name")
    if description is not None and not isinstance(description, str):
        raise InvalidInput("invalid_tools", f"tool {index} ({name}): description must be a string")
    if schema is None:
        schema = dict(EMPTY_SCHEMA)
    if not isinstance(schema, dict):
        raise InvalidInput("invalid_tools", f"tool {index} ({name}): its schema must be an object")
    return {"name": name, "description": description or "", "input_schema": schema}


def tool_state(is_error: Any) -> ToolResultState:
    """A result the caller marked as an error is an ``error`` result (spec §9)."""
    return "error" if is_error is True else "success"


def sse(event: str, payload: Mapping[str, Any]) -> bytes:
    """One server-sent event: its name and its compact JSON data."""
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event}\ndata: {data}\n\n".encode()


def failure(exc: Exception) -> tuple[int, str, str]:
    """The status, code and message a failure mid-answer is told with. An expected failure (a
    ``ServiceError``: a provider's error, a limit) keeps its code and detail; anything else is a
    bug, logged here and told without its text (which may hold internals)."""
    if isinstance(exc, ServiceError):
        return status_of(exc), exc.code, exc.detail
    logger.error("a compatible answer failed mid-stream", exc_info=exc)
    return 500, "internal_error", "the service failed while answering; retry the request"
