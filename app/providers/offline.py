"""The offline model kinds (spec §14.2): ``local`` and ``scripted``. No network, deterministic.

- ``local`` answers a compaction summary request with an extractive, contract-valid summary of
  the conversation (``app.core.compaction.local_summary``) and any other request with a short
  text reply, so the embedded default runs whole turns and compactions without an LLM.
- ``scripted`` replays ``provider.script``, one entry per model call of a session; each session
  has its own position, stored in the database (taken atomically by ``take``), so every replica
  agrees. Running out is an error (no cycling).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast, get_args

from app.core.caching.breakpoints import CachePlan
from app.core.compaction import is_summary_request, local_reply, local_summary
from app.core.compaction.local import Message
from app.core.content import Item, ToolCallBlock, compact_json
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
        conversation: Sequence[Item] | None = None,
    ) -> ModelResponse:
        # The items, when given, say what each message is (a previous summary, a reminder, a
        # replay) by their stored origin; the request's messages carry only role and content,
        # and are then read as plain messages (spec §1: no text claims the service's voice).
        messages: Sequence[Message] = (
            conversation
            if conversation is not None
            else [m for m in request["messages"] if m["role"] != "system"]
        )
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
        conversation: Sequence[Item] | None = None,  # a script does not read the conversation
    ) -> ModelResponse:
        taken = await self._take()
        if taken is None or taken.entry is None:
            length = taken.length if taken else 0
            raise ProviderError.of(
                "bad_request",
                f"scripted model {self._model_id!r} has no entry left (its script has {length}); "
                "PUT the model again to reset or extend the script",
            )
        response = _scripted_response(self._model_id, taken.index, taken.entry)
        if sink is not None and response.text:
            await sink.on_text_delta(response.text)
        return response


_FINISH_REASONS = frozenset(get_args(FinishReason))
_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "reasoning_tokens",
    "cache_creation_tokens",
)


def _scripted_response(model_id: str, index: int, entry: Any) -> ModelResponse:
    """The answer a script entry stands for (or the failure it scripts). An entry no version
    stores — registration checks the script, so another version's or a hand edit — is a
    ``bad_request`` that says so, never an internal error of the turn."""

    def unreadable(what: str) -> ProviderError:
        return ProviderError.of(
            "bad_request",
            f"scripted model {model_id!r}: entry {index} of its script {what}; PUT the model "
            "again with a valid script",
        )

    if not isinstance(entry, dict):
        raise unreadable("is not an object")
    if "error" in entry:
        code = _SCRIPTED_ERRORS.get(str(entry["error"]))
        if code is None:
            raise ProviderError.of("bad_request", f"unknown scripted error {entry['error']!r}")
        raise ProviderError.of(code, f"scripted {code} (entry {index})")
    text = str(entry.get("text", ""))
    raw_calls = entry.get("tool_calls", [])
    if not isinstance(raw_calls, list) or not all(
        isinstance(c, dict) and isinstance(c.get("name"), str) for c in raw_calls
    ):
        raise unreadable("has tool_calls that are not objects with a name")
    calls: list[ToolCallBlock] = []
    for j, call in enumerate(raw_calls):
        raw = call.get("input", {})
        calls.append(
            {
                "type": "tool_call",
                "id": str(call.get("id") or f"call_{model_id}_{index}_{j}"),
                "name": call["name"],
                # A string is sent as the raw arguments (so scripts can test invalid JSON).
                "input": raw if isinstance(raw, str) else json.dumps(raw, sort_keys=True),
            }
        )
    usage = entry.get("usage") or {}
    if not isinstance(usage, dict) or not all(
        usage.get(k) is None or (isinstance(usage[k], int) and not isinstance(usage[k], bool))
        for k in _USAGE_KEYS
    ):
        raise unreadable("has a usage that is not whole numbers")
    finish = entry.get("finish_reason") or ("tool_calls" if calls else "stop")
    if finish not in _FINISH_REASONS:
        raise unreadable(f"has an unknown finish_reason {finish!r}")
    return ModelResponse(
        text=text,
        tool_calls=calls,
        finish_reason=cast(FinishReason, finish),
        usage=Usage(**{k: usage.get(k) for k in _USAGE_KEYS}),
    )
