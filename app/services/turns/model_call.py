"""One streamed model call that a cancel request can abandon, and provider error mapping."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from app.core.caching.breakpoints import CachePlan
from app.core.content import Item
from app.providers.base import ModelClient, ModelResponse, ProviderError
from app.services.turns.deps import TurnDeps
from app.storage.database import unit_of_work

__all__ = ["CallAbandoned", "LiveSink", "call_model", "provider_failure"]


class CallAbandoned(Exception):
    """The turn was cancelled while its model call was pending."""


class LiveSink:
    """Forwards deltas as best-effort live updates; ``dirty`` while a draft is on screen.

    While ``hold`` is in force (a model call overlapping the commit of the step before it:
    ``app.services.turns.overlap``) deltas wait, so that no listener sees a delta of the new
    call before the updates of that step; ``release`` sends them in order, or drops them."""

    def __init__(self, deps: TurnDeps, session_id: str, turn_id: str) -> None:
        self._deps = deps
        self._session_id = session_id
        self._turn_id = turn_id
        self.dirty = False
        self._held: list[tuple[str, str]] | None = None

    async def on_text_delta(self, text: str) -> None:
        self._delta("text_delta", text)

    async def on_reasoning_delta(self, text: str) -> None:
        self._delta("reasoning_delta", text)

    def _delta(self, type: str, text: str) -> None:
        if self._held is not None:
            self._held.append((type, text))
            return
        self.dirty = True
        self._deps.events.delta(self._session_id, type, {"text": text}, turn_id=self._turn_id)

    def hold(self) -> None:
        self._held = []

    def release(self, *, drop: bool = False) -> None:
        held, self._held = self._held or [], None
        if not drop:
            for type, text in held:
                self._delta(type, text)

    async def on_draft_cleared(self) -> None:
        await self.clear("attempt_failed")

    async def clear(self, reason: str) -> None:
        """A durable ``draft_cleared`` in its own transaction (the draft is discarded)."""
        self.dirty = False
        async with unit_of_work(self._deps.db) as db:
            await self._deps.events.emit(
                db, self._session_id, "draft_cleared", {"reason": reason}, turn_id=self._turn_id
            )


async def call_model(
    client: ModelClient,
    request: dict[str, Any],
    sink: LiveSink,
    cancel: asyncio.Event,
    caching: CachePlan | None = None,
    conversation: Sequence[Item] | None = None,
) -> ModelResponse:
    """Run the call (with the cache breakpoints of ``caching``, and the ``conversation`` items
    it was assembled from: ``ModelClient.complete``); raises ``CallAbandoned`` as
    soon as ``cancel`` is set (the provider request is closed, its answer never used), or the
    ``ProviderError`` of the call.

    The call runs in this task; one small task waits for ``cancel`` and, when it comes first,
    cancels this one, as ``asyncio.timeout`` does (``uncancel`` tells that cancellation from
    one of this task itself). The call in a task of its own and ``asyncio.wait`` for either
    took ~10 µs per call, this ~5 µs (``docs/performance.md``, "Turns")."""
    if cancel.is_set():
        raise CallAbandoned
    task = asyncio.current_task()
    assert task is not None
    watching = True
    abandoned = False

    def abandon(_: object) -> None:
        nonlocal abandoned
        # ``watching``: the done callback may run after the call returned (both in one step).
        if watching and cancel.is_set():
            abandoned = True
            task.cancel()

    watcher = asyncio.ensure_future(cancel.wait())
    watcher.add_done_callback(abandon)
    try:
        return await client.complete(request, sink=sink, caching=caching, conversation=conversation)
    except asyncio.CancelledError:
        if abandoned:
            abandoned = False
            if task.uncancel() == 0:
                raise CallAbandoned from None
        raise  # this task itself was cancelled (the turn's runner is stopping)
    finally:
        watching = False
        watcher.cancel()
        if abandoned:
            task.uncancel()  # the call swallowed the cancellation: nothing is left pending


def provider_failure(exc: ProviderError) -> tuple[str, str]:
    """The turn outcome ``(code, message)`` of a provider error (spec §6)."""
    if exc.code == "protocol":
        return "model_protocol_error", f"model protocol error: {exc.detail}"
    return "model_error", f"model error: {exc.code}: {exc.detail}"
