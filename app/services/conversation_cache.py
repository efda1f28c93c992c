"""The session contexts this process holds (``app.services.session_context``), per session:
the stored path's memory.

Every prepare of a stored session (a turn's model calls, context inspection, session prepare)
goes through the session's context: it reads the Conversation on the last committed read and
prepares on the last prepared call, so a prepare decodes only what is new and walks, measures
and digests only what is new. One context per session is kept (the last counter used); a
calibrated counter's context is never kept (its figures follow a ratio that moves): ``shared``.

Bounded by process memory: at most ``max_bytes`` in all (``CTXSVC_CONVERSATION_CACHE_BYTES``)
of what the kept contexts take, each estimated from what it holds (``process_bytes``: its read's
stored JSON and messages, and the encoded JSON of its memo; ``tests/services/
test_context_memory.py`` checks the estimate against ``tracemalloc``). The least recently used
sessions go first; a context larger than the whole bound is not kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.counting import TokenCounter
from app.services.calibration import base_counter
from app.services.lru import BytesLRU
from app.services.session_context import SessionContext
from app.services.tokens import CountedConversation
from app.storage.models import AgentSession

__all__ = ["PER_JSON_BYTE", "PER_MESSAGE", "ConversationCache", "process_bytes", "shared"]

# What a kept context takes in process memory (``tracemalloc``, ``bench/memory_by_cache.py``,
# a session of 10 000 messages, 17 MB of JSON, half its results pruned): per byte of its read's
# stored JSON, the decoded content the read's rows and items share (1.5×) and the last call's
# request built from it (0.5×); per message, what is not content (the row, its item, origin and
# measure, the decoded containers, the request's message dict: ~1 400 bytes measured for
# one-line messages, where the JSON counts little). The context's memo comes on top.
PER_JSON_BYTE = 2
PER_MESSAGE = 1200


def process_bytes(json_bytes: int, messages: int, encoded_bytes: int) -> int:
    """The process memory a context is counted as: ``json_bytes`` of stored JSON in
    ``messages`` messages, and ``encoded_bytes`` of encoded JSON in its memo."""
    return PER_JSON_BYTE * json_bytes + PER_MESSAGE * messages + encoded_bytes


def shared(counter: TokenCounter) -> bool:
    """Whether reads counted with ``counter`` may be kept: a calibrated counter's figures
    follow a ratio that moves."""
    return base_counter(counter) is counter


def _size(
    conversation: CountedConversation, earlier: tuple[CountedConversation, int] | None
) -> int:
    """The bytes ``conversation`` holds; from ``earlier``'s when it extends that read (a turn
    puts its Conversation after every step: only what the step stored is added up)."""
    active = conversation.active
    stored = active.stored
    if earlier is not None:
        before, size = earlier
        held = before.active.stored
        if (
            before.active.checkpoint is active.checkpoint
            and 0 < len(held) <= len(stored)
            and held[-1] is stored[len(held) - 1]
        ):
            return size + sum(row.content_bytes for row in stored[len(held) :])
    total = sum(row.content_bytes for row in stored)
    checkpoint = active.checkpoint
    if checkpoint is not None:  # its summary and reminder are items too
        total += len(checkpoint.summary) + len(checkpoint.runtime_reminder)
    return total


@dataclass(frozen=True, slots=True)
class _Entry:
    context: SessionContext
    sized: CountedConversation  # the read its size was taken of
    json_bytes: int  # the stored JSON that read holds


class ConversationCache:
    def __init__(self, max_bytes: int) -> None:
        self._entries: BytesLRU[str, _Entry] = BytesLRU(max_bytes)

    @property
    def held_bytes(self) -> int:
        return self._entries.held_bytes

    def context_for(self, session: AgentSession, counter: TokenCounter) -> SessionContext:
        """The session's context for ``counter``: the one kept, or a new one (kept once it
        remembers a read; never for a calibrated counter)."""
        if not shared(counter):
            return SessionContext(session, counter)
        entry = self._entries.get(session.id)
        if entry is not None and entry.context.key == (
            session.id,
            session.created_at,
            counter.name,
        ):
            context = entry.context
            context.counter = counter  # the same name measures the same: the caller's object
            return context
        return SessionContext(session, counter, self._keep)

    def get(self, session: AgentSession, counter: str) -> CountedConversation | None:
        """The last committed read kept for the session and counter."""
        entry = self._entries.get(session.id)
        if entry is None or entry.context.key != (session.id, session.created_at, counter):
            return None
        return entry.context.conversation

    def _keep(self, context: SessionContext) -> None:
        counted = context.conversation
        assert counted is not None
        session_id = context.key[0]
        entry = self._entries.get(session_id)
        earlier = None
        if entry is not None and entry.context is context:
            earlier = (entry.sized, entry.json_bytes)
        json_bytes = _size(counted, earlier)
        held = process_bytes(json_bytes, len(counted.active.stored), context.encoded.held_bytes)
        self._entries.put(session_id, _Entry(context, counted, json_bytes), held)

    def discard(self, session_id: str) -> None:
        self._entries.discard(session_id)
