"""Turns (spec §6) and their plans.

Conditional updates (``WHERE status = 'running'``) return whether a row changed: a runner that
lost its turn (finished by another replica, or interrupted after its lease expired) learns it from
``False`` instead of overwriting a terminal state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.orm.util import identity_key

from app.core.errors import Conflict
from app.storage.base import utc_now
from app.storage.deferred import checked_write
from app.storage.models import Turn
from app.storage.repositories.base import Repository
from app.storage.repositories.sessions import SessionRepository, session_not_found
from app.storage.repositories.turn_statements import (
    TURNS,
    UNSET,
    ended_columns,
    held_by,
    interrupted_columns,
    progress_columns,
    running_params,
    running_update,
)

__all__ = ["TurnRepository"]

TERMINAL_STATUSES = ("completed", "failed", "cancelled", "interrupted")

# Built once (see ``messages._INSERT_MESSAGES``).
_INSERT_TURN = insert(TURNS).returning(*TURNS.c)
_START_CANDIDATES = select(Turn).where(
    Turn.session_id == bindparam("k_session_id"),
    (Turn.client_request_id == bindparam("k_client_request_id")) | (Turn.status == "running"),
)


class TurnRepository(Repository):
    async def create_running(
        self,
        *,
        session_id: str,
        turn_id: str,
        client_request_id: str,
        input: list[Any],
        phase: str,
        model_call_index: int = 0,
        lease_owner: str | None = None,
        lease_expires_at: datetime | None = None,
        trace_context: str | None = None,
        checked: bool = False,
    ) -> tuple[Turn, bool]:
        """Insert a ``running`` turn; returns ``(turn, created)``.

        The same ``client_request_id`` again returns the turn already accepted with
        ``created=False`` (idempotent, across restarts and replicas). Another running turn raises
        ``Conflict("busy")`` naming it; an unknown session raises ``NotFound``. Both races are
        settled by the database (the unique constraint and the one-running-turn partial index);
        the insert runs in a SAVEPOINT so the caller's transaction survives the refusal.

        ``checked``: the caller holds the session's lock and found neither turn
        (``start_candidates``), so neither race can happen: a plain insert.
        """
        turn = Turn(
            session_id=session_id,
            turn_id=turn_id,
            client_request_id=client_request_id,
            status="running",
            phase=phase,
            model_call_index=model_call_index,
            input=input,
            pending_tool_calls=[],
            lease_owner=lease_owner,
            lease_expires_at=lease_expires_at,
            trace_context=trace_context,
        )
        if checked:
            # A Core INSERT returning the row (the ORM's unit of work costs more than the
            # statement); the turn comes back as a detached ``Turn``, like ``finish``'s.
            values = {c.key: getattr(turn, c.key) for c in TURNS.c if c.key in turn.__dict__}
            row = (await self.session.execute(_INSERT_TURN, values)).one()
            return Turn(**row._mapping), True
        existing = await self.get_by_client_request_id(session_id, client_request_id)
        if existing is not None:
            return existing, False
        try:
            async with self.session.begin_nested():
                self.session.add(turn)
                await self.session.flush()
        except IntegrityError:
            existing = await self.get_by_client_request_id(session_id, client_request_id)
            if existing is not None:
                return existing, False
            running = await self.get_running(session_id)
            if running is not None:
                raise _busy(running) from None
            if await SessionRepository(self.session).get(session_id) is None:
                raise session_not_found(session_id) from None
            raise
        return turn, True

    async def get(self, session_id: str, turn_id: str) -> Turn | None:
        return await self.session.get(Turn, (session_id, turn_id))

    async def get_by_client_request_id(
        self, session_id: str, client_request_id: str
    ) -> Turn | None:
        stmt = select(Turn).where(
            Turn.session_id == session_id, Turn.client_request_id == client_request_id
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def get_running(self, session_id: str) -> Turn | None:
        stmt = select(Turn).where(Turn.session_id == session_id, Turn.status == "running")
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def start_candidates(
        self, session_id: str, client_request_id: str
    ) -> tuple[Turn | None, Turn | None]:
        """``(the turn accepted for client_request_id, the running turn)`` in one query (the
        two checks of a start; either may be ``None``, both may be the same turn)."""
        params = {"k_session_id": session_id, "k_client_request_id": client_request_id}
        rows = (await self.session.execute(_START_CANDIDATES, params)).scalars().all()
        existing = next((t for t in rows if t.client_request_id == client_request_id), None)
        running = next((t for t in rows if t.status == "running"), None)
        return existing, running

    async def plan_of(self, session_id: str, turn_id: str) -> dict[str, Any] | None:
        """The turn's plan as its last ``update_plan`` set it (``{explanation?, plan}``), without
        the ``updated_at`` the turn view shows; ``None`` when it has none."""
        stmt = select(Turn.plan).where(Turn.session_id == session_id, Turn.turn_id == turn_id)
        plan = (await self.session.execute(stmt)).scalar_one_or_none()
        if plan is None:
            return None
        return {key: value for key, value in plan.items() if key != "updated_at"}

    async def list_for_session(
        self, session_id: str, *, limit: int = 50, before: tuple[datetime, str] | None = None
    ) -> Sequence[Turn]:
        """Newest first. ``before`` is the ``(created_at, turn_id)`` of the last row of the
        previous page (a keyset cursor, as for sessions)."""
        stmt = select(Turn).where(Turn.session_id == session_id)
        if before is not None:
            created_at, turn_id = before
            stmt = stmt.where(
                (Turn.created_at < created_at)
                | ((Turn.created_at == created_at) & (Turn.turn_id < turn_id))
            )
        stmt = stmt.order_by(Turn.created_at.desc(), Turn.turn_id.desc()).limit(limit)
        return (await self.session.execute(stmt)).scalars().all()

    async def update_running(
        self,
        session_id: str,
        turn_id: str,
        *,
        phase: str = UNSET,
        model_call_index: int = UNSET,
        pending_tool_calls: list[Any] = UNSET,
        plan: dict[str, Any] | None = UNSET,
    ) -> Turn | None:
        """Change the progress fields given, only while the turn is running; the updated row
        (truthy), or ``None`` when the turn is not running."""
        values = progress_columns(phase, model_call_index, pending_tool_calls, plan)
        values["updated_at"] = utc_now()
        return await self._update_running_row(session_id, turn_id, values)

    async def advance_running(
        self,
        session_id: str,
        turn_id: str,
        then: Callable[[bool | None], None],
        *,
        phase: str = UNSET,
        model_call_index: int = UNSET,
        pending_tool_calls: list[Any] = UNSET,
        plan: dict[str, Any] | None = UNSET,
        release_lease: bool = False,
        usage: Mapping[str, int] | None = None,
    ) -> None:
        """``update_running`` for the turn runner's hot path: one Core UPDATE that returns only
        the turn's ``cancel_requested`` flag, handed to ``then`` (``None`` when the turn is not
        running) once the UPDATE ran — later, when the transaction defers its writes
        (``app.storage.deferred``); ``then`` may raise to roll the transaction back. No ``Turn``
        object is materialised or refreshed (one already loaded in this session is left as it
        was). ``release_lease`` clears the lease owner and expiry; ``usage`` adds to the token
        columns it names (``input_tokens``, ...), as ``add_usage``."""
        values = progress_columns(phase, model_call_index, pending_tool_calls, plan)
        if release_lease:
            values.update(lease_owner=None, lease_expires_at=None)
        values["updated_at"] = utc_now()
        stmt = running_update(tuple(values), tuple(usage or ()))
        params = running_params(session_id, turn_id, values, usage)

        def checked(row: Sequence[Any] | None) -> None:
            then(None if row is None else bool(row[0]))

        await checked_write(self.session, stmt, params, checked)

    async def add_usage(
        self,
        session_id: str,
        turn_id: str,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cached_tokens: int = 0,
        reasoning_tokens: int = 0,
        cache_creation_tokens: int = 0,
    ) -> bool:
        """Add one model call's reported usage (atomic increments, no read-modify-write; a
        Core UPDATE: a ``Turn`` already loaded in this session is not refreshed)."""
        c = TURNS.c
        stmt = (
            update(TURNS)
            .where(c.session_id == session_id, c.turn_id == turn_id, c.status == "running")
            .values(
                {
                    c.input_tokens: c.input_tokens + input_tokens,
                    c.output_tokens: c.output_tokens + output_tokens,
                    c.cached_tokens: c.cached_tokens + cached_tokens,
                    c.reasoning_tokens: c.reasoning_tokens + reasoning_tokens,
                    c.cache_creation_tokens: c.cache_creation_tokens + cache_creation_tokens,
                    c.updated_at: utc_now(),
                }
            )
            .returning(c.turn_id)
        )
        return (await self.session.execute(stmt)).first() is not None

    async def renew_lease(
        self, session_id: str, turn_id: str, *, owner: str, expires_at: datetime
    ) -> bool:
        """Extend the runner's lease; ``False`` if the turn is no longer running or owned."""
        stmt = (
            update(Turn)
            .where(*held_by(session_id, turn_id, owner))
            .values(lease_expires_at=expires_at)
            .returning(Turn)
            .execution_options(synchronize_session=False, populate_existing=True)
        )
        return (await self.session.execute(stmt)).scalar_one_or_none() is not None

    async def request_cancel(self, session_id: str, turn_id: str) -> bool:
        values = {"cancel_requested": True, "updated_at": utc_now()}
        return await self._update_running_row(session_id, turn_id, values) is not None

    async def finish(
        self,
        session_id: str,
        turn_id: str,
        *,
        status: str,
        outcome: dict[str, Any],
        now: datetime | None = None,
        phase: str | None = None,
        usage: Mapping[str, int] | None = None,
    ) -> Turn | None:
        """Make a running turn terminal (``completed|failed|cancelled|interrupted``), setting
        ``phase`` too when given and adding ``usage`` as ``add_usage`` does; the terminal row
        (``None`` when the turn was not running)."""
        if status not in TERMINAL_STATUSES:
            raise ValueError(f"not a terminal status: {status!r}")
        values = ended_columns(status, outcome, now or utc_now())
        if phase is not None:
            values["phase"] = phase
        # A Core UPDATE returning the whole row (the ORM's UPDATE ... RETURNING entity costs a
        # millisecond more here); the terminal turn comes back as a detached ``Turn``, and a
        # ``Turn`` already loaded in this session is brought up to date.
        stmt = running_update(tuple(values), tuple(usage or ()), whole_row=True)
        params = running_params(session_id, turn_id, values, usage)
        row = (await self.session.execute(stmt, params)).first()
        if row is None:
            return None
        columns = dict(row._mapping)
        loaded = self.session.sync_session.identity_map.get(
            identity_key(Turn, (session_id, turn_id))
        )
        if loaded is None:
            return Turn(**columns)
        for name, value in columns.items():
            set_committed_value(loaded, name, value)
        return loaded

    async def expired_leases(self, *, now: datetime, limit: int = 100) -> list[tuple[str, str]]:
        """``(session, turn)`` of running turns whose lease expired before ``now``, by session
        (a plain read: ``interrupt_if_expired`` re-checks each under its session's lock)."""
        expired = (
            select(Turn.session_id, Turn.turn_id)
            .where(Turn.status == "running", Turn.lease_expires_at < now)
            .order_by(Turn.session_id, Turn.turn_id)
            .limit(limit)
        )
        return [(s, t) for s, t in (await self.session.execute(expired)).all()]

    async def leases_held_from(self, owner_prefix: str) -> list[tuple[str, str, str]]:
        """``(session, turn, owner)`` of running turns whose lease owner id starts with
        ``owner_prefix`` (the processes of one host), by session."""
        held = (
            select(Turn.session_id, Turn.turn_id, Turn.lease_owner)
            .where(
                Turn.status == "running",
                Turn.lease_owner.startswith(owner_prefix, autoescape=True),
            )
            .order_by(Turn.session_id, Turn.turn_id)
        )
        return [(s, t, str(o)) for s, t, o in (await self.session.execute(held)).all()]

    async def interrupt_if_expired(
        self, session_id: str, turn_id: str, *, now: datetime, outcome: dict[str, Any]
    ) -> Turn | None:
        """Mark the turn ``interrupted`` if it still runs on a lease that expired before ``now``
        (its runner died: spec §6); its terminal row, else ``None``. Nothing is replayed.

        The caller holds the session's lock (``SessionRepository.lock``) first: every writer
        of a turn takes its session's row, then the turn's, so a reaper and a runner or a start
        of the same session never wait on each other in opposite orders (a deadlock on
        PostgreSQL)."""
        stmt = (
            update(Turn)
            .where(
                Turn.session_id == session_id,
                Turn.turn_id == turn_id,
                Turn.status == "running",
                Turn.lease_expires_at < now,
            )
            .values(interrupted_columns(outcome, now))
            .returning(Turn)
            .execution_options(synchronize_session=False, populate_existing=True)
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def interrupt_expired(
        self, *, now: datetime, outcome: dict[str, Any], limit: int = 100
    ) -> list[Turn]:
        """``interrupt_if_expired`` for every expired lease, in one transaction (tests and
        tools; the reaper takes one session at a time, each under its lock)."""
        sessions = SessionRepository(self.session)
        done: list[Turn] = []
        for session_id, turn_id in await self.expired_leases(now=now, limit=limit):
            await sessions.lock(session_id)
            interrupted = await self.interrupt_if_expired(
                session_id, turn_id, now=now, outcome=outcome
            )
            if interrupted is not None:
                done.append(interrupted)
        return done

    async def interrupt_held(
        self, session_id: str, turn_id: str, *, owner: str, outcome: dict[str, Any]
    ) -> Turn | None:
        """Mark a running turn whose lease ``owner`` holds as ``interrupted`` (that process stops
        gracefully: its runner will not finish the turn) and release the lease; the terminal
        row, or ``None`` when the turn is not running under ``owner`` (ended, waiting for the
        caller, or taken over)."""
        stmt = (
            update(Turn)
            .where(*held_by(session_id, turn_id, owner))
            .values(interrupted_columns(outcome, utc_now()))
            .returning(Turn)
            .execution_options(synchronize_session=False, populate_existing=True)
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def _update_running_row(
        self, session_id: str, turn_id: str, values: dict[Any, Any]
    ) -> Turn | None:
        stmt = (
            update(Turn)
            .where(
                Turn.session_id == session_id,
                Turn.turn_id == turn_id,
                Turn.status == "running",
            )
            .values(values)
            .returning(Turn)
            # Refresh an already loaded Turn from RETURNING, so it stays in step with the row.
            .execution_options(synchronize_session=False, populate_existing=True)
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()


def _busy(running: Turn) -> Conflict:
    return Conflict(
        "busy",
        f"turn {running.turn_id} is still running in this session; wait for it to finish or "
        "cancel it, then start a new turn",
        turn_id=running.turn_id,
    )
