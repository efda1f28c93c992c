"""The active Conversation the last turn of this process read, per session.

A turn reads its session's Conversation once and then extends it with what each step stores
(``load_counted``'s ``previous``). The next turn of the same session starts from that read too:
stored messages never change, so extending an earlier committed read with the messages stored
since (or reading everything again when another checkpoint is in force) equals a full read,
whichever replica stored them. Only a recreated session with the same id could fool that, so an
entry also names the session row's ``created_at``.

Bounded by the number of stored messages held (least recently used sessions go first); calibrated
counters are not cached (their figures depend on a ratio that moves).
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime

from app.services.tokens import CountedConversation
from app.storage.models import AgentSession

__all__ = ["ConversationCache"]

_Key = tuple[str, datetime, str]  # session id, its created_at, counter name


class ConversationCache:
    def __init__(self, max_messages: int) -> None:
        self._entries: OrderedDict[str, tuple[_Key, CountedConversation]] = OrderedDict()
        self._max_messages = max_messages
        self._held = 0

    def get(self, session: AgentSession, counter: str) -> CountedConversation | None:
        entry = self._entries.get(session.id)
        if entry is None or entry[0] != (session.id, session.created_at, counter):
            return None
        self._entries.move_to_end(session.id)
        return entry[1]

    def put(self, session: AgentSession, counter: str, conversation: CountedConversation) -> None:
        self.discard(session.id)
        size = len(conversation.active.stored)
        if size > self._max_messages:
            return
        self._entries[session.id] = ((session.id, session.created_at, counter), conversation)
        self._held += size
        while self._held > self._max_messages:
            _, (_, evicted) = self._entries.popitem(last=False)
            self._held -= len(evicted.active.stored)

    def discard(self, session_id: str) -> None:
        entry = self._entries.pop(session_id, None)
        if entry is not None:
            self._held -= len(entry[1].active.stored)
