"""Appending to and paging a session's stored messages (spec §5)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.content import Block
from app.core.counting import TokenCounter
from app.core.limits.messages import check_message_bytes, check_message_tokens
from app.fastjson import ESTIMATE
from app.services.events import EventEmitter, messages_appended
from app.services.model_types import ModelEntry
from app.services.models import resolve_model
from app.services.pins import propose_pins
from app.storage.database import SessionFactory, unit_of_work
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.records import MessagePage, NewMessage, StoredMessage
from app.storage.repositories.sessions import SessionRepository

__all__ = ["MessageService", "checked_message", "exact_counts"]


def exact_counts(counter: TokenCounter, role: str, content: list[Block]) -> dict[str, int]:
    """The per-message figure of an exact counter, computed once at append time (spec §3.4).

    The estimate's figure (bytes) is stored by the repository for every message anyway.
    """
    if counter.name == "estimate":
        return {}
    return {counter.name: counter.measure_message(role, content)}


def checked_message(
    role: str,
    content: list[Block],
    counter: TokenCounter,
    model: ModelEntry | None,
    *,
    where: str,
    **extra: Any,
) -> dict[str, int]:
    """``exact_counts`` of a message a caller sends, after the limits of one stored message
    (``app.core.limits.messages``): its bytes, and for a user or assistant message (sent as it
    is, unlike a tool result, which is projected) its tokens against the room of ``model``."""
    content_bytes = ESTIMATE.measure_message(role, content)
    check_message_bytes(where, content_bytes, **extra)
    counts = exact_counts(counter, role, content)
    if model is not None and role in ("user", "assistant"):
        # The estimate's measure is the bytes just taken; an exact counter's is in ``counts``.
        tokens = counter.tokens(counts.get(counter.name, content_bytes))
        room = model.capabilities.limits().effective_input_tokens
        check_message_tokens(where, tokens, room, **extra)
    return counts


class MessageService:
    def __init__(
        self, db: SessionFactory, counters: Callable[[str], TokenCounter], events: EventEmitter
    ) -> None:
        self._db = db
        self._counters = counters
        self._events = events

    async def append(
        self, session_id: str, batch: Sequence[tuple[str, str, list[Block]]]
    ) -> list[StoredMessage]:
        """All-or-nothing: a refused message rolls the whole batch back."""
        async with unit_of_work(self._db) as db:
            return await self.append_in(db, session_id, batch)

    async def append_in(
        self,
        db: AsyncSession,
        session_id: str,
        batch: Sequence[tuple[str, str, list[Block]]],
        *,
        model: ModelEntry | None = None,
    ) -> list[StoredMessage]:
        """``append`` in the caller's transaction; ``model``: the session's model, when the
        caller has already resolved it in this transaction or call (not read again)."""
        if model is None:
            session = await SessionRepository(db).require(session_id)
            model = await resolve_model(db, session.model_id, session.tenant_id)
        counter = self._counters(model.capabilities.token_counter)
        # The repository checks the spec §5 rules (app.core.chat_rules) under the session
        # lock, so concurrent appenders on any replica are judged one after the other.
        stored = await MessageRepository(db).append(
            session_id,
            [
                NewMessage(
                    role=role,  # type: ignore[arg-type]
                    kind=kind,  # type: ignore[arg-type]
                    content=content,
                    token_counts=checked_message(
                        role, content, counter, model, where=f"message {i}", index=i
                    ),
                )
                for i, (role, kind, content) in enumerate(batch)
            ],
        )
        if stored:
            # In the same transaction: a listener (the context map) learns of the append.
            sequences = [s.sequence for s in stored]
            await self._events.emit(
                db, session_id, "messages_appended", messages_appended(sequences)
            )
            await propose_pins(db, session_id, stored, self._events)
        return stored

    async def page(self, session_id: str, *, after_sequence: int, limit: int) -> MessagePage:
        async with unit_of_work(self._db, read_only=True) as db:
            await SessionRepository(db).require(session_id)
            return await MessageRepository(db).page(
                session_id, after_sequence=after_sequence, limit=limit
            )
