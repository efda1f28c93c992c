"""Reading provider error bodies (both protocols wrap them as ``{"error": {...}}``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ErrorBody", "parse_error_body", "retry_after_seconds"]

_MAX_MESSAGE = 300


@dataclass(frozen=True, slots=True)
class ErrorBody:
    type: str | None = None
    code: str | None = None
    message: str = ""

    def quoted(self) -> str:
        """The provider's message, shortened, for a ``detail`` (never for auth errors)."""
        text = " ".join(self.message.split())
        if len(text) > _MAX_MESSAGE:
            text = text[: _MAX_MESSAGE - 1] + "…"
        return f": {text}" if text else ""


def parse_error_body(raw: bytes | str | dict[str, Any] | None) -> ErrorBody:
    """The ``error`` object of a body; anything unreadable gives an empty ``ErrorBody``."""
    payload: Any = raw
    if isinstance(raw, bytes | str):
        try:
            payload = json.loads(raw)
        except ValueError:
            return ErrorBody()
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        payload = payload["error"]
    if not isinstance(payload, dict):
        return ErrorBody()
    kind, code, message = payload.get("type"), payload.get("code"), payload.get("message")
    return ErrorBody(
        type=kind if isinstance(kind, str) else None,
        code=code if isinstance(code, str) else None,
        message=message if isinstance(message, str) else "",
    )


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """``retry-after-ms`` (OpenAI) or ``retry-after`` in seconds; HTTP dates are ignored."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue
        if seconds >= 0:
            return seconds
    return None
