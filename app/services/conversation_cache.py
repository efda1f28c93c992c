"""The active Conversation this process last read, per session: the stored path's memory.

Every prepare of a stored session (a turn's model calls, context inspection, session prepare)
reads its Conversation. Stored messages never change, so extending an earlier committed read
with the messages stored since (``load_counted``'s ``previous``; everything is read again when
another checkpoint is in force) equals a full read, whichever replica stored them: a prepare
then decodes only what is new, and hands ``prepare()`` the very same items as last time, so the
walk of its unchanged beginning is reused too (``app/core/pipeline/one_pass/continuation.py``).
Only a recreated
session with the same id could fool that, so an entry also names the row's ``created_at``.

Bounded by bytes: the stored JSON of the messages held (their ``content_bytes``, the estimate's
measure), at most ``max_bytes`` in all (``CTXSVC_CONVERSATION_CACHE_BYTES``); the decoded
objects take about two to three times that in memory. The least recently used sessions go
first; a Conversation larger than the whole bound is not kept. Calibrated counters are not
cached (their figures follow a ratio that moves): ``shared``.
"""

from __future__ import annotations

from datetime import datetime

from app.core.counting import TokenCounter
from app.services.calibration import base_counter
from app.services.lru import BytesLRU
from app.services.tokens import CountedConversation
from app.storage.models import AgentSession

__all__ = ["ConversationCache", "shared"]

_Key = tuple[str, datetime, str]  # session id, its created_at, counter name


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


class ConversationCache:
    def __init__(self, max_bytes: int) -> None:
        self._entries: BytesLRU[str, tuple[_Key, CountedConversation, int]] = BytesLRU(max_bytes)

    @property
    def held_bytes(self) -> int:
        return self._entries.held_bytes

    def get(self, session: AgentSession, counter: str) -> CountedConversation | None:
        entry = self._entries.get(session.id)
        if entry is None or entry[0] != (session.id, session.created_at, counter):
            return None
        return entry[1]

    def put(self, session: AgentSession, counter: str, conversation: CountedConversation) -> None:
        """Keep ``conversation``, read in a transaction that committed (or read nothing)."""
        key = (session.id, session.created_at, counter)
        entry = self._entries.get(session.id)
        earlier = (entry[1], entry[2]) if entry is not None and entry[0] == key else None
        size = _size(conversation, earlier)
        self._entries.put(session.id, (key, conversation, size), size)

    def discard(self, session_id: str) -> None:
        self._entries.discard(session_id)
