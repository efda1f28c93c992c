"""Sessions, their sequence allocators and the pruning watermark (the statements they use:
``session_statements.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import case, delete, func, inspect, select, update
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.orm.util import identity_key
from sqlalchemy.sql.dml import ReturningUpdate

from app.core.errors import NotFound
from app.storage.base import utc_now
from app.storage.models import AgentSession, Message, SessionEvent
from app.storage.models.session import new_world_state_version
from app.storage.repositories.base import Repository
from app.storage.repositories.session_statements import (
    ADD_MAILBOX_PENDING,
    ADD_OPEN_TOOL_CALLS,
    ALLOCATE_EVENTS,
    ALLOCATE_MESSAGES,
    CURRENT,
    DEFERRED,
    GET,
    GET_FOR_UPDATE,
    LOCK,
    LOCKED,
    SESSIONS,
    SET_LATEST_COMPACTION,
    SET_PIN_COUNT,
    SET_WORLD_STATE_VERSION,
)
from app.storage.repositories.turn_usage import proxied_increments

__all__ = ["SessionRepository", "session_not_found"]


def session_not_found(session_id: str) -> NotFound:
    return NotFound("session_not_found", f"no session with id {session_id!r}; create it first")


class SessionRepository(Repository):
    async def add(self, row: AgentSession) -> AgentSession:
        self.session.add(row)
        await self.session.flush()
        return row

    def adopt(self, row: AgentSession) -> None:
        """``row``, inserted by this transaction (``add``), as ``get(for_update=True)`` leaves a
        row: nobody else sees it before the commit, and its object holds what was stored."""
        if self.loaded(row.id) is row and not inspect(row).modified:
            self._locked().add(row.id)
            self._current().add(row.id)

    async def get(self, session_id: str, *, for_update: bool = False) -> AgentSession | None:
        """The session, or ``None``. ``for_update`` row-locks it on PostgreSQL until commit
        (SQLite needs no lock: its write transactions begin IMMEDIATE and are exclusive)."""
        stmt = GET_FOR_UPDATE if for_update else GET
        # An object already in the identity map keeps the values it was loaded with.
        known = self.loaded(session_id) is not None
        row = (await self.session.execute(stmt, {"k_id": session_id})).scalar_one_or_none()
        if for_update and row is not None:
            self._locked().add(session_id)
            if not known:
                self._current().add(session_id)
        return row

    def is_current(self, row: AgentSession) -> bool:
        """True when ``row`` is this transaction's object for its session and was built by
        ``get(for_update=True)``: nobody else can change the row before this transaction ends,
        and this transaction's own updates of the summary columns are copied onto it, so every
        column it shows is the stored value. ``False`` says only "not known"."""
        return row.id in self._current() and self.loaded(row.id) is row

    def loaded(self, session_id: str) -> AgentSession | None:
        """This transaction's object for the session, if one is loaded."""
        key = identity_key(AgentSession, session_id)
        loaded: AgentSession | None = self.session.sync_session.identity_map.get(key)
        return loaded

    async def require(self, session_id: str, *, for_update: bool = False) -> AgentSession:
        """Like ``get`` but raises ``NotFound`` (``session_not_found``)."""
        row = await self.get(session_id, for_update=for_update)
        if row is None:
            raise session_not_found(session_id)
        return row

    async def lock(self, session_id: str) -> None:
        """Serialize writers of one session for the rest of the transaction.

        A row this transaction already locked (``lock``, ``get(for_update=True)``, a sequence
        allocation) is not locked again: a turn step takes the lock once, not once per repository
        that needs it."""
        locked = self._locked()
        if session_id in locked:
            return
        if (await self.session.execute(LOCK, {"k_id": session_id})).scalar_one_or_none() is None:
            raise session_not_found(session_id)
        locked.add(session_id)

    def _locked(self) -> set[str]:
        ids: set[str] = self._per_transaction(LOCKED, set)
        return ids

    def _current(self) -> set[str]:
        ids: set[str] = self._per_transaction(CURRENT, set)
        return ids

    def _deferred(self) -> dict[str, AgentSession]:
        # The rows themselves: the identity map holds objects only weakly, and a row whose
        # object was collected would lose the counts kept on it.
        rows: dict[str, AgentSession] = self._per_transaction(DEFERRED, dict)
        return rows

    def _counts_on(self, row: AgentSession) -> bool:
        return row.id in self._deferred() and self.is_current(row)

    def defer_counters(self, row: AgentSession) -> None:
        """For a transaction that appends and announces several times (a turn step) and
        changes the row in no other way: from now on, while ``row`` is current, sequences are
        allocated on the object and written with one UPDATE just before the transaction commits
        (``_write_kept_counts``; or by the ORM's flush before a statement that needs the row),
        instead of one UPDATE per allocation."""
        if self.is_current(row):
            self._deferred()[row.id] = row

    async def list_page(
        self, tenant_id: str, *, limit: int, before: tuple[datetime, str] | None = None
    ) -> Sequence[AgentSession]:
        """The tenant's sessions, newest first. ``before`` is the ``(created_at, id)`` of the
        last row of the previous page (a keyset cursor: stable while sessions are being
        created)."""
        stmt = (
            select(AgentSession)
            .where(AgentSession.tenant_id == tenant_id)
            .order_by(AgentSession.created_at.desc(), AgentSession.id.desc())
        )
        if before is not None:
            created_at, session_id = before
            stmt = stmt.where(
                (AgentSession.created_at < created_at)
                | ((AgentSession.created_at == created_at) & (AgentSession.id < session_id))
            )
        return (await self.session.execute(stmt.limit(limit))).scalars().all()

    async def count_using_model(self, model_id: str, tenant_id: str | None) -> int:
        """How many sessions (of ``tenant_id``; ``None``: of every tenant) name ``model_id`` as
        their model or their summary model."""
        stmt = select(func.count()).where(
            (AgentSession.model_id == model_id) | (AgentSession.summary_model_id == model_id)
        )
        if tenant_id is not None:
            stmt = stmt.where(AgentSession.tenant_id == tenant_id)
        return int((await self.session.execute(stmt)).scalar_one())

    async def tenant_of(self, session_id: str) -> str | None:
        """The tenant that owns the session, or ``None`` when there is no such session."""
        stmt = select(AgentSession.tenant_id).where(AgentSession.id == session_id)
        tenant: str | None = (await self.session.execute(stmt)).scalar_one_or_none()
        return tenant

    async def delete(self, session_id: str) -> bool:
        """Delete a session and (by cascade) everything it owns."""
        result = await self.session.execute(
            delete(AgentSession).where(AgentSession.id == session_id).returning(AgentSession.id)
        )
        return result.scalar_one_or_none() is not None

    async def allocate_message_sequences(self, session_id: str, count: int) -> int:
        """Reserve ``count`` message sequences; returns the last one (the first is
        ``last - count + 1``). The UPDATE row-locks the session on PostgreSQL, so concurrent
        appenders on any replica queue up and sequences never collide or leave a gap; a rollback
        gives the numbers back."""
        if count < 1:
            raise ValueError("count must be at least 1")
        return await self._allocate(ALLOCATE_MESSAGES, "last_message_sequence", session_id, count)

    async def _allocate(
        self, stmt: ReturningUpdate[int], column: str, session_id: str, count: int
    ) -> int:
        # Every append and every durable update comes here: a prebuilt Core statement (no ORM
        # update machinery); a session row already loaded in this transaction is brought up to
        # date as the ORM UPDATE kept it.
        now = utc_now()
        loaded = self.loaded(session_id)
        if loaded is not None and self._counts_on(loaded):
            # Locked and current: count on the object (defer_counters).
            allocated = int(getattr(loaded, column)) + count
            setattr(loaded, column, allocated)
            loaded.updated_at = now
            return allocated
        await self._flush_kept_counts(loaded, column)
        params = {"k_id": session_id, "v_count": count, "v_updated_at": now}
        value = (await self.session.execute(stmt, params)).scalar_one_or_none()
        if value is None:
            raise session_not_found(session_id)
        # The UPDATE row-locks the session (PostgreSQL) like ``lock`` does.
        self._locked().add(session_id)
        if loaded is not None:
            set_committed_value(loaded, column, int(value))
            set_committed_value(loaded, "updated_at", now)
        return int(value)

    async def _flush_kept_counts(self, loaded: AgentSession | None, column: str = "") -> None:
        """Counts kept on the object (``defer_counters``) must reach the row before a statement
        counts on the row (``column``) or refreshes the whole object from it (no column)."""
        if loaded is None:
            return
        state = inspect(loaded)
        kept = state.modified if not column else state.attrs[column].history.has_changes()
        if kept:
            await self.session.flush()

    async def add_mailbox_pending(self, session_id: str, delta: int) -> int:
        """Add ``delta`` to ``mailbox_pending`` in one UPDATE; returns the new count."""
        value = await self._set_summary(ADD_MAILBOX_PENDING, "mailbox_pending", session_id, delta)
        return int(value)

    async def add_open_tool_calls(self, session_id: str, delta: int) -> None:
        """Add ``delta`` to ``open_tool_calls``: on the row when its counters are deferred
        (``defer_counters``), else in one UPDATE."""
        loaded = self.loaded(session_id)
        if loaded is not None and self._counts_on(loaded):
            loaded.open_tool_calls += delta
            return
        await self._set_summary(ADD_OPEN_TOOL_CALLS, "open_tool_calls", session_id, delta)

    def add_usage(self, row: AgentSession, usage: dict[str, int]) -> None:
        """Count one proxied call (spec §21) and add what its provider reported (``usage``:
        ``input_tokens``, ``output_tokens``, ``cached_tokens``, ``cache_creation_tokens``,
        ``reasoning_tokens``; absent = 0) on ``row``, which must be current (``is_current``:
        its figures are the stored ones). Written at the commit: with the deferred counts in
        their one UPDATE (``defer_counters``), else by the ORM's flush."""
        if not self.is_current(row):
            raise ValueError(f"session {row.id}: add_usage needs the row read under its lock")
        for column, value in proxied_increments(usage).items():
            setattr(row, column, getattr(row, column) + value)

    async def set_latest_compaction_id(self, session_id: str, compaction_id: str) -> None:
        """Record the checkpoint just stored as the one in force."""
        await self._set_summary(
            SET_LATEST_COMPACTION, "latest_compaction_id", session_id, compaction_id
        )

    async def renew_world_state_version(self, session_id: str) -> str:
        """Give ``world_state_version`` a fresh random token (the baselines changed); returns it."""
        value = await self._set_summary(
            SET_WORLD_STATE_VERSION, "world_state_version", session_id, new_world_state_version()
        )
        return str(value)

    async def set_pin_count(self, session_id: str, count: int) -> None:
        """Record how many pins the session has (``PinRepository`` keeps it)."""
        await self._set_summary(SET_PIN_COUNT, "pin_count", session_id, count)

    async def _set_summary(
        self,
        stmt: ReturningUpdate[Any],
        column: str,
        session_id: str,
        value: object,
    ) -> Any:
        await self._flush_kept_counts(self.loaded(session_id), column)
        params = {"k_id": session_id, "v_value": value}
        row = (await self.session.execute(stmt, params)).first()
        if row is None:
            raise session_not_found(session_id)
        # Like ``_allocate``: the UPDATE row-locks the session, and a row already loaded in this
        # transaction shows the new value to the code that reads it next.
        self._locked().add(session_id)
        loaded = self.loaded(session_id)
        if loaded is not None:
            set_committed_value(loaded, column, row[0])
        return row[0]

    async def allocate_event_sequences(self, session_id: str, count: int) -> int:
        """Same as ``allocate_message_sequences``, for the live-update log."""
        if count < 1:
            raise ValueError("count must be at least 1")
        return await self._allocate(ALLOCATE_EVENTS, "last_event_sequence", session_id, count)

    async def advance_pruning_watermark(self, session_id: str, through_sequence: int) -> int:
        """Move the watermark to ``through_sequence`` unless it already is further (it only ever
        increases: spec §5). The comparison sits inside one UPDATE (a portable GREATEST), so two
        concurrent advances cannot move it back. Returns the watermark now in force."""
        await self._flush_kept_counts(self.loaded(session_id))
        column = AgentSession.tool_result_pruned_through_sequence
        greatest = case(
            (column.is_(None) | (column < through_sequence), through_sequence), else_=column
        )
        stmt = (
            update(AgentSession)
            .where(AgentSession.id == session_id)
            .values({column: greatest})
            .returning(AgentSession)
            # The CASE cannot be evaluated in Python: refresh a loaded object from RETURNING
            # (an expired attribute would need a lazy load, which async sessions cannot do).
            .execution_options(synchronize_session=False, populate_existing=True)
        )
        row = (await self.session.execute(stmt)).scalar_one_or_none()
        if row is None or row.tool_result_pruned_through_sequence is None:
            raise session_not_found(session_id)
        return row.tool_result_pruned_through_sequence

    async def resync_sequences(self, session_id: str) -> None:
        """Raise the message and event counters to the highest stored sequences (they never go
        down): what repairs a session whose counters fell behind its rows
        (``app.storage.collisions``)."""
        values = {}
        for column, table in (
            (SESSIONS.c.last_message_sequence, Message.__table__),
            (SESSIONS.c.last_event_sequence, SessionEvent.__table__),
        ):
            stored = (
                select(func.coalesce(func.max(table.c.sequence), 0))
                .where(table.c.session_id == session_id)
                .scalar_subquery()
            )
            values[column.key] = case((stored > column, stored), else_=column)
        await self.session.execute(
            update(SESSIONS).where(SESSIONS.c.id == session_id).values(values)
        )

    async def set_reload_required(self, session_id: str, value: bool) -> None:
        stmt = (
            update(AgentSession)
            .where(AgentSession.id == session_id)
            .values(reload_required=value, updated_at=utc_now())
            .returning(AgentSession.id)
        )
        if (await self.session.execute(stmt)).scalar_one_or_none() is None:
            raise session_not_found(session_id)
