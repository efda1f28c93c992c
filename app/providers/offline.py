"""The offline model kinds (API.md): ``local`` and ``scripted``. No network, deterministic.

- ``local`` answers a compaction summary request with an extractive, contract-valid summary of
  the conversation (``app.core.compaction.local_summary``) and any other request with a short
  text reply, so the embedded default runs whole turns and compactions without an LLM.
- ``scripted`` replays ``provider.script``, one entry per model call to that model; the position
  is stored with the model (taken atomically by ``take``), so every replica agrees. Running out
  is an error (no cycling).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from app.core.caching import CachePlan
from app.core.compaction import is_summary_request, local_reply, local_summary
from app.core.content import ToolCallBlock, compact_json
from app.providers.base import (
    FinishReason,
    ModelResponse,
    ProviderError,
    ProviderErrorCode,
    StreamSink,
    Usage,
)

__all__ = ["LocalClient", "ScriptEntry", "ScriptedClient"]

_SCRIPTED_ERRORS: dict[str, ProviderErrorCode] = {
    "context_overflow": "context_overflow",
    "rate_limited": "rate_limited",
    "server_error": "server_error",
    "timeout": "timeout",
}


def _estimate(value: object) -> int:
    return -(-len(compact_json(value).encode()) // 4)


class LocalClient:
    """The deterministic offline model."""

    async def complete(
        self,
        request: dict[str, Any],
        *,
        sink: StreamSink | None = None,
        caching: CachePlan | None = None,  # no prompt cache offline
    ) -> ModelResponse:
        messages = [m for m in request["messages"] if m["role"] != "system"]
        text = local_summary(messages) if is_summary_request(messages) else local_reply(messages)
        if sink is not None:
            await sink.on_text_delta(text)
        return ModelResponse(
            text=text,
            finish_reason="stop",
            usage=Usage(input_tokens=_estimate(request["messages"]), output_tokens=_estimate(text)),
        )


@dataclass(frozen=True, slots=True)
class ScriptEntry:
    index: int
    length: int
    entry: dict[str, Any] | None


class ScriptedClient:
    """Replays a script; ``take`` consumes the next entry atomically (stored position)."""

    def __init__(self, model_id: str, take: Callable[[], Awaitable[ScriptEntry | None]]) -> None:
        self._model_id = model_id
        self._take = take

    async def complete(
        self,
        request: dict[str, Any],
        *,
        sink: StreamSink | None = None,
        caching: CachePlan | None = None,  # no prompt cache offline
    ) -> ModelResponse:
        taken = await self._take()
        if taken is None or taken.entry is None:
            length = taken.length if taken else 0
            raise ProviderError.of(
                "bad_request",
                f"scripted model {self._model_id!r} has no entry left (its script has {length}); "
                "PUT the model again to reset or extend the script",
            )
        entry = taken.entry
        if "error" in entry:
            code = _SCRIPTED_ERRORS.get(str(entry["error"]))
            if code is None:
                raise ProviderError.of("bad_request", f"unknown scripted error {entry['error']!r}")
            raise ProviderError.of(code, f"scripted {code} (entry {taken.index})")
        text = str(entry.get("text", ""))
        calls: list[ToolCallBlock] = []
        for j, call in enumerate(entry.get("tool_calls", [])):
            raw = call.get("input", {})
            calls.append(
                {
                    "type": "tool_call",
                    "id": str(call.get("id") or f"call_{self._model_id}_{taken.index}_{j}"),
                    "name": str(call["name"]),
                    # A string is sent as the raw arguments (so scripts can test invalid JSON).
                    "input": raw if isinstance(raw, str) else json.dumps(raw, sort_keys=True),
                }
            )
        if sink is not None and text:
            await sink.on_text_delta(text)
        usage = entry.get("usage") or {}
        finish: FinishReason = entry.get("finish_reason") or ("tool_calls" if calls else "stop")
        return ModelResponse(
            text=text,
            tool_calls=calls,
            finish_reason=finish,
            usage=Usage(
                input_tokens=usage.get("input_tokens"),
                output_tokens=usage.get("output_tokens"),
                cached_tokens=usage.get("cached_tokens"),
                reasoning_tokens=usage.get("reasoning_tokens"),
                cache_creation_tokens=usage.get("cache_creation_tokens"),
            ),
        )
