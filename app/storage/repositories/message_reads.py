"""The reads of the append-only message store (spec §5): stored messages by id, sequence or
range, pages, counts, and the ``tool_calls`` index. Core statements on the session's
connection: plain tuples into ``StoredMessage``, no ORM row processing. The appends are
``MessageRepository``'s (``app.storage.repositories.messages``), which extends this class.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterable
from typing import Any, cast

from sqlalchemy import Row, Select, Table, bindparam, func, select

from app.core.content import Kind, Role
from app.storage.models import Message, ToolCall
from app.storage.repositories.base import Repository
from app.storage.repositories.records import MessagePage, StoredMessage, ToolCallRecord

__all__ = ["MessageReads", "messages_table", "tool_calls_table"]

# Typed as Table (``__table__`` is declared as a FromClause) for Core statements.
_messages = messages_table = cast(Table, Message.__table__)
_tool_calls = tool_calls_table = cast(Table, ToolCall.__table__)

# Only the columns a StoredMessage needs, in its field order (session_id is known by the caller).
_COLUMNS = (
    _messages.c.sequence,
    _messages.c.message_id,
    _messages.c.role,
    _messages.c.kind,
    _messages.c.content,
    _messages.c.tool_call_id,
    _messages.c.tool_name,
    _messages.c.turn_id,
    _messages.c.world_state_section,
    _messages.c.content_bytes,
    _messages.c.token_counts,
    _messages.c.created_at,
)

# Built once: building a statement costs more than running it.
_LOAD_AFTER = (
    select(*_COLUMNS)
    .where(
        _messages.c.session_id == bindparam("k_session_id"),
        _messages.c.sequence > bindparam("k_after"),
    )
    .order_by(_messages.c.sequence)
)


class MessageReads(Repository):
    async def get_by_message_id(self, session_id: str, message_id: str) -> StoredMessage | None:
        stmt = select(*_COLUMNS).where(
            _messages.c.session_id == session_id, _messages.c.message_id == message_id
        )
        rows = await self._rows(session_id, stmt)
        return rows[0] if rows else None

    async def get_by_sequence(self, session_id: str, sequence: int) -> StoredMessage | None:
        stmt = select(*_COLUMNS).where(
            _messages.c.session_id == session_id, _messages.c.sequence == sequence
        )
        rows = await self._rows(session_id, stmt)
        return rows[0] if rows else None

    async def load(
        self,
        session_id: str,
        *,
        after_sequence: int = 0,
        through_sequence: int | None = None,
        roles: Collection[Role] | None = None,
        kinds: Collection[Kind] | None = None,
    ) -> list[StoredMessage]:
        """Messages with ``after_sequence < sequence <= through_sequence``, in order.

        The active Conversation is ``load(s, after_sequence=<install boundary>)`` after the
        latest checkpoint's three items, or ``load(s)`` without one (spec §5).
        """
        if through_sequence is None and roles is None and kinds is None:
            # The common read (a Conversation, or what was stored since): a prebuilt statement.
            params = {"k_session_id": session_id, "k_after": after_sequence}
            return await self._rows(session_id, _LOAD_AFTER, params)
        stmt = self._range(session_id, after_sequence, through_sequence)
        if roles is not None:
            stmt = stmt.where(_messages.c.role.in_(list(roles)))
        if kinds is not None:
            stmt = stmt.where(_messages.c.kind.in_(list(kinds)))
        return await self._rows(session_id, stmt.order_by(_messages.c.sequence))

    async def page(
        self,
        session_id: str,
        *,
        after_sequence: int = 0,
        limit: int = 20,
        through_sequence: int | None = None,
    ) -> MessagePage:
        """At most ``limit`` raw messages after ``after_sequence`` (up to ``through_sequence``)."""
        stmt = self._range(session_id, after_sequence, through_sequence)
        rows = await self._rows(session_id, stmt.order_by(_messages.c.sequence).limit(limit + 1))
        return MessagePage(messages=rows[:limit], has_more=len(rows) > limit)

    async def count(
        self, session_id: str, *, after_sequence: int = 0, through_sequence: int | None = None
    ) -> int:
        stmt = (
            select(func.count())
            .select_from(_messages)
            .where(_messages.c.session_id == session_id, _messages.c.sequence > after_sequence)
        )
        if through_sequence is not None:
            stmt = stmt.where(_messages.c.sequence <= through_sequence)
        return int((await self.session.execute(stmt)).scalar_one())

    async def last_sequence(
        self, session_id: str, *, role: Role | None = None, kind: Kind | None = None
    ) -> int | None:
        """Highest stored sequence (of ``role``/``kind`` when given); ``None`` when there is none.
        E.g. the latest assistant message for pruning (spec §7.2)."""
        stmt = select(func.max(_messages.c.sequence)).where(_messages.c.session_id == session_id)
        if role is not None:
            stmt = stmt.where(_messages.c.role == role)
        if kind is not None:
            stmt = stmt.where(_messages.c.kind == kind)
        value = (await self.session.execute(stmt)).scalar_one_or_none()
        return None if value is None else int(value)

    async def last_user_request(
        self, session_id: str, *, through_sequence: int | None = None
    ) -> StoredMessage | None:
        """The latest real user request (role user, kind normal: spec §1) up to a boundary."""
        stmt = self._range(session_id, 0, through_sequence).where(
            _messages.c.role == "user", _messages.c.kind == "normal"
        )
        rows = await self._rows(session_id, stmt.order_by(_messages.c.sequence.desc()).limit(1))
        return rows[0] if rows else None

    def _range(
        self, session_id: str, after_sequence: int, through_sequence: int | None
    ) -> Select[Any]:
        stmt = select(*_COLUMNS).where(
            _messages.c.session_id == session_id, _messages.c.sequence > after_sequence
        )
        if through_sequence is not None:
            stmt = stmt.where(_messages.c.sequence <= through_sequence)
        return stmt

    async def _rows(
        self, session_id: str, stmt: Select[Any], params: dict[str, Any] | None = None
    ) -> list[StoredMessage]:
        # Core execution on the session's connection: plain tuples, no ORM row processing.
        connection = await self.session.connection()
        result = await connection.execute(stmt, params)
        return [_stored(session_id, row) for row in result]

    # ----- tool calls ------------------------------------------------------------------------

    async def find_unresolved_tool_calls(
        self, session_id: str, call_ids: Iterable[str]
    ) -> list[ToolCallRecord]:
        ids = list(set(call_ids))
        if not ids:
            return []
        stmt = self._tool_call_query(session_id).where(
            _tool_calls.c.call_id.in_(ids), _tool_calls.c.result_sequence.is_(None)
        )
        return await self._tool_call_rows(stmt)

    async def list_unresolved_tool_calls(self, session_id: str) -> list[ToolCallRecord]:
        stmt = self._tool_call_query(session_id).where(_tool_calls.c.result_sequence.is_(None))
        return await self._tool_call_rows(stmt)

    async def list_tool_calls(self, session_id: str, message_sequence: int) -> list[ToolCallRecord]:
        """The calls of one assistant message, resolved or not, in call order."""
        stmt = self._tool_call_query(session_id).where(
            _tool_calls.c.message_sequence == message_sequence
        )
        return await self._tool_call_rows(stmt)

    def _tool_call_query(self, session_id: str) -> Select[Any]:
        return (
            select(
                _tool_calls.c.session_id,
                _tool_calls.c.call_id,
                _tool_calls.c.name,
                _tool_calls.c.message_sequence,
                _tool_calls.c.call_index,
                _tool_calls.c.result_sequence,
            )
            .where(_tool_calls.c.session_id == session_id)
            .order_by(_tool_calls.c.message_sequence, _tool_calls.c.call_index)
        )

    async def _tool_call_rows(self, stmt: Select[Any]) -> list[ToolCallRecord]:
        result = await self.session.execute(stmt)
        return [ToolCallRecord(*row) for row in result]


def _stored(session_id: str, row: Row[Any]) -> StoredMessage:
    # The selected columns are in StoredMessage's field order after session_id. A driver
    # returns each row's strings as new objects; the few values many rows repeat (role, kind,
    # tool name, turn id) are interned, one object for all: a session's context keeps its rows
    # (``services/conversation_cache.py``), and ~250 bytes a row of copies added up.
    (seq, message_id, role, kind, content, call_id, tool, turn, section, size, counts, at) = cast(
        "tuple[Any, ...]", row
    )
    return StoredMessage(
        session_id,
        seq,
        message_id,
        cast(Role, sys.intern(role)),
        cast(Kind, sys.intern(kind)),
        content,
        call_id,
        None if tool is None else sys.intern(tool),
        None if turn is None else sys.intern(turn),
        section,
        size,
        counts,
        at,
    )
