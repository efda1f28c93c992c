"""The append-only message store (spec §5).

Appends allocate gap-free per-session sequences inside the caller's transaction, store the
estimate's measure next to the content, and keep ``tool_calls`` in step so that "a tool result must
answer an unresolved call" and "a call id must not duplicate an unresolved one" are index look-ups.
There is deliberately no update and no delete of a message. A call of a message hidden from the
Conversation (``app.core.conversation_view``) can no longer be answered: its ``tool_calls`` row
is released (``release_open_calls``), so the same call may be stored again; the call a hidden
result answered is open again (``reopen_answered_call``), so another result may answer it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import bindparam, delete, func, insert, select, update

from app.core.chat_rules import AppendPlan, check_append
from app.core.conversation_view import ConversationView
from app.core.errors import Conflict, InvalidInput
from app.fastjson import ESTIMATE
from app.storage.base import utc_now
from app.storage.deferred import write
from app.storage.models import AgentSession, Compaction, Message
from app.storage.repositories.message_reads import MessageReads
from app.storage.repositories.message_reads import messages_table as _messages
from app.storage.repositories.message_reads import tool_calls_table as _tool_calls
from app.storage.repositories.records import NewMessage, StoredMessage
from app.storage.repositories.sessions import SessionRepository

__all__ = ["MessageRepository", "new_message_id"]


# Built once: building a statement costs more than running one of these (SQLAlchemy then also
# computes its cache key only once).
_INSERT_MESSAGES = insert(_messages)
_INSERT_TOOL_CALLS = insert(_tool_calls)
_RESOLVE_TOOL_CALLS = (
    update(_tool_calls)
    .where(
        _tool_calls.c.session_id == bindparam("s"),
        _tool_calls.c.call_id == bindparam("c"),
        _tool_calls.c.result_sequence.is_(None),
    )
    .values(result_sequence=bindparam("r"))
)


# Keys in ``Session.info``, kept for the current transaction (``Repository._per_transaction``):
# the calls this transaction opened and has not resolved, ``{(session_id, call_id): name}``, and
# the messages it appended, ``{session_id: [StoredMessage, ...]}`` in sequence order. They let a
# turn step skip reading back what it has just written.
_OPENED = "ctxsvc_opened_calls"
_APPENDED = "ctxsvc_appended_messages"


def new_message_id() -> str:
    return f"msg-{uuid.uuid4().hex}"


class MessageRepository(MessageReads):
    """Appends and the one update (token counts); the reads are ``MessageReads``'s."""

    async def append(
        self,
        session_id: str,
        messages: Sequence[NewMessage],
        *,
        rollback_on_refusal: bool = False,
    ) -> list[StoredMessage]:
        """Append ``messages`` in order and return them as stored.

        Raises ``NotFound`` for an unknown session and the spec §5 errors of
        ``app.core.chat_rules.check_append`` (``unknown_tool_call``, ``tool_result_already_posted``
        for a call answered earlier, ``duplicate_tool_call_id``,
        ``invalid_tool_message``, ...) before anything is written, so a refused batch consumes
        no sequence even if the caller went on to commit.

        ``rollback_on_refusal`` is the caller's promise that a refusal rolls its transaction
        back (the turn runner): the sequences are then allocated first — the allocating UPDATE
        row-locks the session like ``lock`` — which saves the separate lock statement; the
        allocation is given back by the rollback.
        """
        if not messages:
            return []
        sessions = SessionRepository(self.session)
        if rollback_on_refusal:
            last = await sessions.allocate_message_sequences(session_id, len(messages))
            plan = await self._check(session_id, messages)
            first = last - len(messages) + 1
            return await self._write(session_id, messages, plan, first_sequence=first)
        if any(m.role in ("assistant", "tool") for m in messages):
            # Lock first, then check: a concurrent writer cannot resolve or add the same call
            # between our check and our insert.
            await sessions.lock(session_id)
        plan = await self._check(session_id, messages)
        last = await sessions.allocate_message_sequences(session_id, len(messages))
        first = last - len(messages) + 1
        return await self._write(session_id, messages, plan, first_sequence=first)

    async def active_bytes(self, views: Mapping[str, ConversationView]) -> dict[str, int]:
        """Σ ``content_bytes`` of each session's messages after its latest checkpoint's install
        boundary (all of them without one) that its ``ConversationView`` shows (taken back and
        earlier epochs' messages are not in the next request): its active history, by the
        estimate's measure. Sessions keyed by id."""
        if not views:
            return {}
        session_ids = list(views)
        boundary = (
            select(Compaction.replaced_through_message_sequence)
            .where(
                Compaction.session_id == AgentSession.id,
                Compaction.compaction_id == AgentSession.latest_compaction_id,
            )
            .scalar_subquery()
        )
        stmt = (
            select(Message.session_id, func.sum(Message.content_bytes))
            .join(AgentSession, AgentSession.id == Message.session_id)
            .where(
                Message.session_id.in_(session_ids),
                Message.sequence > func.coalesce(boundary, 0),
            )
            .group_by(Message.session_id)
        )
        rows = (await self.session.execute(stmt)).all()
        totals = {row[0]: int(row[1] or 0) for row in rows}
        # A view that hides something: those sessions' sizes one message at a time (two
        # integers a row; only sessions whose clients took back or cleared pay for it).
        hiding = [sid for sid, view in views.items() if view.hidden or view.epoch_after]
        if hiding:
            sizes = (
                await self.session.execute(
                    select(Message.session_id, Message.sequence, Message.content_bytes)
                    .join(AgentSession, AgentSession.id == Message.session_id)
                    .where(
                        Message.session_id.in_(hiding),
                        Message.sequence > func.coalesce(boundary, 0),
                    )
                )
            ).all()
            for sid in hiding:
                totals[sid] = 0
            for sid, sequence, size in sizes:
                if views[sid].shows(sequence):
                    totals[sid] += int(size or 0)
        return totals

    async def insert_if_absent(self, session_id: str, message: NewMessage) -> StoredMessage | None:
        """Append ``message`` unless a message with its ``message_id`` exists (then ``None``).

        For caller-chosen ids such as World State's ``world-state:{turn}:{call}:{sample}:{section}``
        (spec §4): a retried sampling writes nothing twice and consumes no sequence.
        """
        if message.message_id is None:
            raise ValueError("insert_if_absent needs a caller-chosen message_id")
        await SessionRepository(self.session).lock(session_id)
        if await self.get_by_message_id(session_id, message.message_id) is not None:
            return None
        (stored,) = await self.append(session_id, [message])
        return stored

    async def _check(self, session_id: str, messages: Sequence[NewMessage]) -> AppendPlan:
        # Only the calls the batch mentions are looked up; the rules themselves (spec §5) are
        # the core's, so API appends and internal writes are judged identically.
        mentioned = {
            b["id"]
            for m in messages
            for b in m.content
            if b["type"] in ("tool_call", "tool_result")
        }
        opened = self._opened()
        unresolved = {c: opened[(session_id, c)] for c in mentioned if (session_id, c) in opened}
        # A call opened in this transaction cannot have been resolved by another one (the
        # session is locked): only the others are looked up, and not even those when the
        # session row shows that every unresolved call is one of this transaction's.
        others = mentioned.difference(unresolved)
        if others and not self._only_own_calls_open(session_id, opened):
            for call in await self.find_unresolved_tool_calls(session_id, others):
                unresolved[call.call_id] = call.name
        try:
            return check_append([(m.role, m.kind, m.content) for m in messages], unresolved)
        except InvalidInput as refused:
            call_id, index = refused.extra.get("tool_call_id"), refused.extra.get("index")
            unknown = refused.code == "unknown_tool_call" and isinstance(call_id, str)
            if unknown and await self._answered(session_id, str(call_id)):
                # The call exists and has its result: a state conflict (another writer's
                # result won), not an id that names nothing.
                raise Conflict(
                    "tool_result_already_posted",
                    f"message {index}: a result for tool call {call_id!r} was already recorded; "
                    "results are final",
                    index=index,
                    tool_call_id=call_id,
                ) from None
            raise

    async def _answered(self, session_id: str, call_id: str) -> bool:
        stmt = select(_tool_calls.c.call_id).where(
            _tool_calls.c.session_id == session_id,
            _tool_calls.c.call_id == call_id,
            _tool_calls.c.result_sequence.is_not(None),
        )
        return (await self.session.execute(stmt.limit(1))).first() is not None

    async def _write(
        self,
        session_id: str,
        messages: Sequence[NewMessage],
        plan: AppendPlan,
        *,
        first_sequence: int,
    ) -> list[StoredMessage]:
        now = utc_now()
        stored: list[StoredMessage] = []
        # Tool-call bookkeeping runs in batch order, grouped into runs of the same statement
        # (a call must exist before a later message of the batch resolves it). A call both
        # opened and answered in this batch is inserted answered: no UPDATE for it.
        ops: list[tuple[str, dict[str, Any]]] = []
        opened_here: dict[str, dict[str, Any]] = {}
        for offset, (m, planned) in enumerate(zip(messages, plan.messages, strict=True)):
            sequence = first_sequence + offset
            # A tool row takes the name of the call it answers, whatever the result carried.
            tool_call_id, tool_name = planned.resolved_call, planned.tool_name
            if tool_call_id is not None:
                call = opened_here.pop(tool_call_id, None)
                if call is not None:
                    call["result_sequence"] = sequence
                else:
                    ops.append(("resolve", {"s": session_id, "c": tool_call_id, "r": sequence}))
            for index, (call_id, name) in enumerate(planned.opened_calls):
                call = {
                    "session_id": session_id,
                    "message_sequence": sequence,
                    "call_index": index,
                    "call_id": call_id,
                    "name": name,
                    "result_sequence": None,
                }
                opened_here[call_id] = call
                ops.append(("call", call))
            stored.append(
                StoredMessage(
                    session_id=session_id,
                    sequence=sequence,
                    message_id=m.message_id or new_message_id(),
                    role=m.role,
                    kind=m.kind,
                    content=m.content,
                    tool_call_id=tool_call_id,
                    tool_name=tool_name,
                    turn_id=m.turn_id,
                    world_state_section=m.world_state_section,
                    content_bytes=ESTIMATE.measure_message(m.role, m.content),
                    token_counts=dict(m.token_counts),
                    created_at=now,
                )
            )
        await write(
            self.session,
            _INSERT_MESSAGES,
            [
                {
                    "session_id": s.session_id,
                    "sequence": s.sequence,
                    "message_id": s.message_id,
                    "role": s.role,
                    "kind": s.kind,
                    "content": s.content,
                    "tool_call_id": s.tool_call_id,
                    "tool_name": s.tool_name,
                    "turn_id": s.turn_id,
                    "world_state_section": s.world_state_section,
                    "content_bytes": s.content_bytes,
                    "token_counts": s.token_counts,
                    "created_at": s.created_at,
                }
                for s in stored
            ],
        )
        await self._apply_tool_call_ops(ops)
        # The session's count of unresolved calls: + every call left open, − every earlier call
        # answered (a call opened and answered in this batch counts neither way).
        delta = sum(
            -1 if kind == "resolve" else 1 if params["result_sequence"] is None else 0
            for kind, params in ops
        )
        if delta:
            await SessionRepository(self.session).add_open_tool_calls(session_id, delta)
        opened = self._opened()
        for kind, params in ops:
            if kind == "resolve":
                opened.pop((session_id, params["c"]), None)
            elif params["result_sequence"] is None:
                opened[(session_id, params["call_id"])] = params["name"]
            else:  # answered in this batch, possibly after an earlier call of the same id
                opened.pop((session_id, params["call_id"]), None)
        self._appended().setdefault(session_id, []).extend(stored)
        return stored

    def _only_own_calls_open(self, session_id: str, opened: dict[tuple[str, str], str]) -> bool:
        sessions = SessionRepository(self.session)
        row = sessions.loaded(session_id)
        if row is None or not sessions.is_current(row):
            return False
        own = sum(1 for key in opened if key[0] == session_id)
        return row.open_tool_calls == own

    def appended_after(
        self, session_id: str, after_sequence: int, through_sequence: int
    ) -> list[StoredMessage] | None:
        """The messages ``after_sequence < sequence <= through_sequence`` when this transaction
        appended every one of them (else ``None``: read them). Sequences have no gaps, so the
        range is covered when the count matches."""
        rows = [m for m in self._appended().get(session_id, []) if m.sequence > after_sequence]
        rows = [m for m in rows if m.sequence <= through_sequence]
        if len(rows) != through_sequence - after_sequence:
            return None
        if rows and rows[0].sequence != after_sequence + 1:
            return None
        return rows

    def _opened(self) -> dict[tuple[str, str], str]:
        opened: dict[tuple[str, str], str] = self._per_transaction(_OPENED, dict)
        return opened

    def _appended(self) -> dict[str, list[StoredMessage]]:
        appended: dict[str, list[StoredMessage]] = self._per_transaction(_APPENDED, dict)
        return appended

    async def _apply_tool_call_ops(self, ops: list[tuple[str, dict[str, Any]]]) -> None:
        start = 0
        while start < len(ops):
            kind = ops[start][0]
            end = start
            while end < len(ops) and ops[end][0] == kind:
                end += 1
            params = [p for _, p in ops[start:end]]
            stmt = _INSERT_TOOL_CALLS if kind == "call" else _RESOLVE_TOOL_CALLS
            await write(self.session, stmt, params)
            start = end

    async def release_open_calls(
        self, session_id: str, through_sequence: int, *, only: bool
    ) -> int:
        """Drop the unanswered calls of the message at ``through_sequence`` (``only``) or of
        every message up to it, now hidden from the Conversation; the number released."""
        at = _tool_calls.c.message_sequence
        stmt = delete(_tool_calls).where(
            _tool_calls.c.session_id == session_id,
            _tool_calls.c.result_sequence.is_(None),
            at == through_sequence if only else at <= through_sequence,
        )
        result: Any = await self.session.execute(stmt)
        released = int(result.rowcount or 0)
        if released:
            await SessionRepository(self.session).add_open_tool_calls(session_id, -released)
            opened = self._opened()
            for key in [k for k in opened if k[0] == session_id]:
                opened.pop(key)
        return released

    async def reopen_answered_call(self, session_id: str, result_sequence: int) -> None:
        """The call the (now hidden) result at ``result_sequence`` answered is open again: a
        new result may answer it."""
        stmt = (
            update(_tool_calls)
            .where(
                _tool_calls.c.session_id == session_id,
                _tool_calls.c.result_sequence == result_sequence,
            )
            .values(result_sequence=None)
        )
        result: Any = await self.session.execute(stmt)
        if result.rowcount:
            await SessionRepository(self.session).add_open_tool_calls(session_id, result.rowcount)

    async def store_token_counts(
        self, session_id: str, counts: Mapping[int, dict[str, int]]
    ) -> None:
        """Replace ``token_counts`` of the messages at the given sequences (spec §3.4).

        The one update this store allows: a derived cache of figures computed from the immutable
        content, filled in for messages written without them (``app.services.tokens``). Racing
        writers store identical figures; a lost key is recomputed on the next read.
        """
        if not counts:
            return
        stmt = (
            update(_messages)
            .where(_messages.c.session_id == bindparam("s"), _messages.c.sequence == bindparam("q"))
            .values(token_counts=bindparam("tc"))
        )
        params = [{"s": session_id, "q": q, "tc": tc} for q, tc in counts.items()]
        await self.session.execute(stmt, params)
