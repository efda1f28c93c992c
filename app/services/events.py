"""Live updates (spec §6): durable events in the database, and an in-process hub that wakes
listeners and carries best-effort deltas.

Every non-delta update is a ``session_events`` row written in the caller's transaction, so it
is never lost and any replica can replay it after ``Last-Event-ID``. This process's listeners are
woken right after that transaction commits; listeners on other replicas find the row by polling.
Deltas (``text_delta``, ``reasoning_delta``) are never stored: they go to this process's
listeners only and carry no SSE id (a reconnect does not replay them).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from sqlalchemy.ext.asyncio import AsyncSession

from app.storage.database import on_commit
from app.storage.repositories.records import EventRecord, NewEvent
from app.storage.repositories.state import EventRepository

__all__ = [
    "DELTA_TYPES",
    "UPDATE_TYPES",
    "Delta",
    "EventBatch",
    "EventEmitter",
    "EventHub",
    "EventPublisher",
    "Signal",
    "messages_appended",
]

UPDATE_TYPES = frozenset(
    {
        "turn_started",
        "phase_changed",
        "text_delta",
        "reasoning_delta",
        "draft_cleared",
        "tool_call_started",
        "tool_call_finished",
        # One per model call of a turn: its usage and budget (``app.services.turns.usage``).
        "model_call_finished",
        "plan_updated",
        "compaction_started",
        "compaction_finished",
        "turn_finished",
        # Messages stored outside a turn (an API append, a session prepare's World State):
        # a turn announces its own writes with the updates above.
        "messages_appended",
        # A session's pins or pin proposals changed (``app.services.pins``).
        "pins_changed",
    }
)
DELTA_TYPES = frozenset({"text_delta", "reasoning_delta"})


@dataclass(frozen=True, slots=True)
class Delta:
    type: str
    turn_id: str | None
    payload: dict[str, Any]
    # The last sequence this process had announced for the session when the delta was made
    # (``None``: none since a listener subscribed): a stream sends it after the rows up to
    # there and before any row after.
    after: int | None = None


# What a listener's queue receives: the last sequence of rows just committed, ``None`` = "new
# rows may be in the database", or a delta. In the order things happened: a listener that sends
# the rows up to the announced sequence before the next delta keeps that order.
Signal = Delta | int | None


class EventHub:
    """Fan-out to this process's listeners of a session."""

    def __init__(self) -> None:
        self._listeners: dict[str, set[asyncio.Queue[Signal]]] = defaultdict(set)
        # The last sequence announced per session with listeners (what a delta comes after).
        self._announced: dict[str, int] = {}
        # The process is stopping: listeners send what is stored and end.
        self.closed = False

    def subscribe(self, session_id: str) -> asyncio.Queue[Signal]:
        queue: asyncio.Queue[Signal] = asyncio.Queue(maxsize=1000)
        self._listeners[session_id].add(queue)
        if self.closed:
            queue.put_nowait(None)
        return queue

    def close(self) -> None:
        """Wake every listener for the last time (``closed`` tells them to end)."""
        self.closed = True
        for session_id in list(self._listeners):
            self.notify(session_id, None)

    def unsubscribe(self, session_id: str, queue: asyncio.Queue[Signal]) -> None:
        listeners = self._listeners.get(session_id)
        if listeners is not None:
            listeners.discard(queue)
            if not listeners:
                del self._listeners[session_id]
                self._announced.pop(session_id, None)

    def announced(self, session_id: str) -> int | None:
        """The last sequence announced for the session while it had listeners."""
        return self._announced.get(session_id)

    def notify(self, session_id: str, signal: Signal) -> None:
        listeners = self._listeners.get(session_id)
        if not listeners:
            return
        if isinstance(signal, int) and signal > self._announced.get(session_id, -1):
            self._announced[session_id] = signal
        for queue in list(listeners):
            # A slow listener loses deltas only; it re-reads durable events from the table.
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(signal)


class EventEmitter(Protocol):
    """What announces a change: the publisher itself, or an ``EventBatch`` of the transaction."""

    async def emit(
        self,
        db: AsyncSession,
        session_id: str,
        type: str,
        payload: Mapping[str, object],
        *,
        turn_id: str | None = None,
    ) -> object: ...


class EventPublisher:
    def __init__(self, hub: EventHub) -> None:
        self.hub = hub

    async def emit(
        self,
        db: AsyncSession,
        session_id: str,
        type: str,
        payload: Mapping[str, object],
        *,
        turn_id: str | None = None,
    ) -> EventRecord:
        """Store a durable update in ``db``'s transaction; listeners wake after it commits."""
        (record,) = await self.emit_many(db, session_id, [NewEvent(type, dict(payload), turn_id)])
        return record

    async def emit_many(
        self, db: AsyncSession, session_id: str, events: Sequence[NewEvent]
    ) -> list[EventRecord]:
        """Store several updates of one session in ``db``'s transaction, in order, with one
        sequence allocation and one INSERT (``emit`` costs the same two statements for one)."""
        for e in events:
            assert e.type in UPDATE_TYPES, e.type
            assert e.type not in DELTA_TYPES, e.type
        if not events:
            return []
        records = await EventRepository(db).append_many(session_id, events)

        last = records[-1].sequence
        on_commit(db, lambda: self.hub.notify(session_id, last))
        return records

    def batch(self, session_id: str) -> EventBatch:
        return EventBatch(self, session_id)

    def delta(
        self, session_id: str, type: str, payload: Mapping[str, object], *, turn_id: str | None
    ) -> None:
        """A best-effort live delta to this process's listeners (never stored)."""
        assert type in DELTA_TYPES, type
        self.hub.notify(
            session_id, Delta(type, turn_id, dict(payload), self.hub.announced(session_id))
        )


class MessagesAppended(TypedDict):
    first_sequence: int
    last_sequence: int
    count: int


def messages_appended(sequences: Sequence[int]) -> MessagesAppended:
    """The payload of a ``messages_appended`` update: which sequences were stored."""
    return {"first_sequence": sequences[0], "last_sequence": sequences[-1], "count": len(sequences)}


@dataclass
class EventBatch:
    """Durable updates of one session collected during a transaction and written together by
    ``flush`` (call it inside the transaction, before it commits). It has ``emit``'s signature,
    so code that announces changes one by one (tool handling, result writing) can be handed a
    batch instead of the publisher: a turn step writes all its updates in two statements."""

    publisher: EventPublisher
    session_id: str
    pending: list[NewEvent] = field(default_factory=list)

    async def emit(
        self,
        db: AsyncSession,
        session_id: str,
        type: str,
        payload: Mapping[str, object],
        *,
        turn_id: str | None = None,
    ) -> None:
        assert session_id == self.session_id, (session_id, self.session_id)
        assert type in UPDATE_TYPES, type
        assert type not in DELTA_TYPES, type
        self.pending.append(NewEvent(type, dict(payload), turn_id))

    async def flush(self, db: AsyncSession) -> None:
        events, self.pending = self.pending, []
        await self.publisher.emit_many(db, self.session_id, events)
