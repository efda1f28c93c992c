"""Live updates over Server-Sent Events (spec §6).

Durable updates are rows of ``session_events``: a stream replays every row after the client's
last id, then waits for more — woken at once by this process's ``EventHub`` after a commit, and
re-reading the table every ``events_poll_seconds`` for rows written by other replicas. Rows are
sent in sequence order and each exactly once per connection, with the sequence as the SSE
``id:``, so a reconnect with ``Last-Event-ID`` (to any replica) resumes without gaps or repeats.
Deltas come from this process's hub only and carry no id (a reconnect does not replay them).
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncIterator, Mapping

from app.core.content import compact_json
from app.services.events import Delta, Signal
from app.services.turns.deps import TurnDeps
from app.services.turns.views import iso
from app.storage.database import unit_of_work
from app.storage.repositories.records import EventRecord
from app.storage.repositories.sessions import SessionRepository
from app.storage.repositories.state import EventRepository

__all__ = ["event_frame", "open_event_stream"]

_PAGE = 500


# Characters that end a line for ``str.splitlines`` (and the many SSE clients built on it) but
# not for SSE, which splits on CR and LF only: JSON escapes every other one, so these three are
# escaped too (the same JSON value), and a stored text holding them cannot cut an event in two.
_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _data(value: Mapping[str, object]) -> str:
    return compact_json(value).translate(_LINE_BREAKS)


def event_frame(record: EventRecord) -> bytes:
    data = {
        "sequence": record.sequence,
        "type": record.type,
        "turn_id": record.turn_id,
        "occurred_at": iso(record.created_at),
        "payload": record.payload,
    }
    return f"id: {record.sequence}\nevent: {record.type}\ndata: {_data(data)}\n\n".encode()


def _came_before(delta: Delta, sequence: int) -> bool:
    """Whether ``delta`` was made before the row ``sequence`` was committed (by this process)."""
    return delta.after is not None and delta.after < sequence


def _delta_frame(delta: Delta) -> bytes:
    data = {"type": delta.type, "turn_id": delta.turn_id, "payload": delta.payload}
    return f"event: {delta.type}\ndata: {_data(data)}\n\n".encode()


async def open_event_stream(deps: TurnDeps, session_id: str, after: int) -> AsyncIterator[bytes]:
    """Check the session exists (a 404 before any byte is sent), then return the stream."""
    async with unit_of_work(deps.db, read_only=True) as db:
        await SessionRepository(db).require(session_id)
    # Subscribe before the first read: nothing committed in between is missed.
    queue = deps.events.hub.subscribe(session_id)
    return _stream(deps, session_id, after, queue)


async def _stream(
    deps: TurnDeps, session_id: str, after: int, queue: asyncio.Queue[Signal]
) -> AsyncIterator[bytes]:
    settings = deps.settings
    last = after
    # A wake-up names the last row it announces: rows up to there go out before the deltas
    # that came after it (a turn can run several steps before this stream gets to read).
    through: int | None = None
    # Signals taken from the queue but not handled yet. A poll reads every row, also rows
    # committed after a delta still queued: the delta (which names the row it came after) goes
    # out between them, as it happened.
    held: collections.deque[Signal] = collections.deque()
    next_heartbeat = time.monotonic() + settings.events_heartbeat_seconds
    hub = deps.events.hub
    try:
        yield b": connected\n\n"
        while True:
            # Closed (the process stops, its turns already ended): everything, then the end.
            closing = hub.closed
            async with unit_of_work(deps.db, read_only=True) as db:
                records = await EventRepository(db).list_after(
                    session_id, last, limit=_PAGE, through_sequence=None if closing else through
                )
            while not queue.empty():
                held.append(queue.get_nowait())
            for record in records:
                while held:
                    head = held[0]
                    if isinstance(head, int) and head <= record.sequence:
                        held.popleft()  # a wake-up this read answers
                    elif isinstance(head, Delta) and _came_before(head, record.sequence):
                        yield _delta_frame(held.popleft())  # type: ignore[arg-type]
                    else:
                        break
                yield event_frame(record)
                last = record.sequence
            if len(records) == _PAGE:
                continue
            if closing:
                return
            deadline = min(time.monotonic() + settings.events_poll_seconds, next_heartbeat)
            while True:
                timeout = deadline - time.monotonic()
                try:
                    if held:
                        signal = held.popleft()
                    else:
                        signal = await asyncio.wait_for(queue.get(), timeout=max(timeout, 0))
                except TimeoutError:
                    signal = None
                    if time.monotonic() >= next_heartbeat:
                        yield b": heartbeat\n\n"
                        next_heartbeat = time.monotonic() + settings.events_heartbeat_seconds
                if isinstance(signal, Delta):
                    yield _delta_frame(signal)
                    continue
                if signal is not None and signal <= last:
                    continue  # already sent
                # New rows may be there: a wake-up (read up to what it announces), a poll
                # tick or a heartbeat (read everything: other replicas write too).
                through = signal
                break
    finally:
        deps.events.hub.unsubscribe(session_id, queue)
