"""What the operation builders share: parsers of typed answers, bodies, paths."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter

from ctxsvc_client._calls import path

__all__ = [
    "COMPACTION_TIMEOUT_SECONDS",
    "Encode",
    "body_of",
    "list_of",
    "model_of",
    "session_path",
    "wait_param",
]

M = TypeVar("M", bound=BaseModel)
Encode = Literal["openai_chat", "anthropic_messages", "openai_responses"]

# A manual compaction with the service's own model may take its attempts (3 × 120 s by
# default) and the delays between them: its answer is waited for longer than other calls.
COMPACTION_TIMEOUT_SECONDS = 600.0


def model_of(cls: type[M]) -> Callable[[httpx.Response], M]:
    return lambda response: cls.model_validate_json(response.content)


def list_of(cls: type[M], key: str | None = None) -> Callable[[httpx.Response], list[M]]:
    adapter = TypeAdapter(list[cls])  # type: ignore[valid-type]

    def parse(response: httpx.Response) -> list[M]:
        value = response.json() if key is None else response.json()[key]
        result: list[M] = adapter.validate_python(value)
        return result

    return parse


def body_of(**fields: Any) -> dict[str, Any]:
    """The fields that were given (``None`` leaves the server's default)."""
    return {k: v for k, v in fields.items() if v is not None}


def wait_param(wait: bool) -> dict[str, str] | None:
    return {"wait": "true"} if wait else None


def session_path(session_id: str, *rest: str) -> str:
    return path("v1", "sessions", session_id, *rest)
