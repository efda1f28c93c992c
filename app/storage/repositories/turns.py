"""Turns (SPEC §6) and their plans.

Conditional updates (``WHERE status = 'running'``) return whether a row changed: a runner that
lost its turn (finished by another replica, or interrupted after its lease expired) learns it from
``False`` instead of overwriting a terminal state.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from app.core.errors import Conflict
from app.storage.base import utc_now
from app.storage.models import Turn, TurnPlan
from app.storage.repositories.base import Repository
from app.storage.repositories.sessions import SessionRepository, session_not_found

__all__ = ["PlanRepository", "TurnRepository"]

TERMINAL_STATUSES = ("completed", "failed", "cancelled", "interrupted")

_UNSET: Any = object()


class TurnRepository(Repository):
    async def create_running(
        self,
        *,
        session_id: str,
        turn_id: str,
        client_request_id: str,
        input: list[Any],
        phase: str,
        lease_owner: str | None = None,
        lease_expires_at: datetime | None = None,
    ) -> tuple[Turn, bool]:
        """Insert a ``running`` turn; returns ``(turn, created)``.

        The same ``client_request_id`` again returns the turn already accepted with
        ``created=False`` (idempotent, across restarts and replicas). Another running turn raises
        ``Conflict("busy")`` naming it; an unknown session raises ``NotFound``. Both races are
        settled by the database (the unique constraint and the one-running-turn partial index);
        the insert runs in a SAVEPOINT so the caller's transaction survives the refusal.
        """
        existing = await self.get_by_client_request_id(session_id, client_request_id)
        if existing is not None:
            return existing, False
        turn = Turn(
            session_id=session_id,
            turn_id=turn_id,
            client_request_id=client_request_id,
            status="running",
            phase=phase,
            input=input,
            pending_tool_calls=[],
            lease_owner=lease_owner,
            lease_expires_at=lease_expires_at,
        )
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

    async def list_for_session(self, session_id: str, *, limit: int = 50) -> Sequence[Turn]:
        """Newest first."""
        stmt = (
            select(Turn)
            .where(Turn.session_id == session_id)
            .order_by(Turn.created_at.desc(), Turn.turn_id.desc())
            .limit(limit)
        )
        return (await self.session.execute(stmt)).scalars().all()

    async def update_running(
        self,
        session_id: str,
        turn_id: str,
        *,
        phase: str = _UNSET,
        model_call_index: int = _UNSET,
        pending_tool_calls: list[Any] = _UNSET,
        plan: dict[str, Any] | None = _UNSET,
    ) -> Turn | None:
        """Change the progress fields given, only while the turn is running; the updated row
        (truthy), or ``None`` when the turn is not running."""
        values: dict[str, Any] = {
            name: value
            for name, value in (
                ("phase", phase),
                ("model_call_index", model_call_index),
                ("pending_tool_calls", pending_tool_calls),
                ("plan", plan),
            )
            if value is not _UNSET
        }
        values["updated_at"] = utc_now()
        return await self._update_running_row(session_id, turn_id, values)

    async def add_usage(
        self,
        session_id: str,
        turn_id: str,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cached_tokens: int = 0,
        reasoning_tokens: int = 0,
    ) -> bool:
        """Add one model call's reported usage (atomic increments, no read-modify-write)."""
        return await self._update_running(
            session_id,
            turn_id,
            {
                Turn.input_tokens: Turn.input_tokens + input_tokens,
                Turn.output_tokens: Turn.output_tokens + output_tokens,
                Turn.cached_tokens: Turn.cached_tokens + cached_tokens,
                Turn.reasoning_tokens: Turn.reasoning_tokens + reasoning_tokens,
                Turn.updated_at: utc_now(),
            },
        )

    async def renew_lease(
        self, session_id: str, turn_id: str, *, owner: str, expires_at: datetime
    ) -> bool:
        """Extend the runner's lease; ``False`` if the turn is no longer running or owned."""
        stmt = (
            update(Turn)
            .where(
                Turn.session_id == session_id,
                Turn.turn_id == turn_id,
                Turn.status == "running",
                Turn.lease_owner == owner,
            )
            .values(lease_expires_at=expires_at)
            .returning(Turn)
            .execution_options(synchronize_session=False, populate_existing=True)
        )
        return (await self.session.execute(stmt)).scalar_one_or_none() is not None

    async def request_cancel(self, session_id: str, turn_id: str) -> bool:
        return await self._update_running(
            session_id, turn_id, {"cancel_requested": True, "updated_at": utc_now()}
        )

    async def finish(
        self,
        session_id: str,
        turn_id: str,
        *,
        status: str,
        outcome: dict[str, Any],
        now: datetime | None = None,
        phase: str | None = None,
    ) -> bool:
        """Make a running turn terminal (``completed|failed|cancelled|interrupted``), setting
        ``phase`` too when given."""
        if status not in TERMINAL_STATUSES:
            raise ValueError(f"not a terminal status: {status!r}")
        now = now or utc_now()
        values: dict[str, Any] = {
            "status": status,
            "outcome": outcome,
            "pending_tool_calls": [],
            "finished_at": now,
            "updated_at": now,
            "lease_owner": None,
            "lease_expires_at": None,
        }
        if phase is not None:
            values["phase"] = phase
        return await self._update_running(session_id, turn_id, values)

    async def interrupt_expired(
        self, *, now: datetime, outcome: dict[str, Any], limit: int = 100
    ) -> list[tuple[str, str]]:
        """Mark running turns whose lease expired before ``now`` as ``interrupted`` (their runner
        died: SPEC §6); returns their ``(session_id, turn_id)``. Turns without a lease never
        expire. Nothing is replayed."""
        expired = (
            select(Turn.session_id, Turn.turn_id)
            .where(Turn.status == "running", Turn.lease_expires_at < now)
            .limit(limit)
        )
        if self.dialect_name == "postgresql":
            # Two sweepers on two replicas never wait on, or double-process, the same rows.
            expired = expired.with_for_update(skip_locked=True)
        candidates = (await self.session.execute(expired)).all()
        done: list[tuple[str, str]] = []
        for session_id, turn_id in candidates:
            stmt = (
                update(Turn)
                .where(
                    Turn.session_id == session_id,
                    Turn.turn_id == turn_id,
                    Turn.status == "running",
                    Turn.lease_expires_at < now,
                )
                .values(
                    status="interrupted",
                    outcome=outcome,
                    pending_tool_calls=[],
                    finished_at=now,
                    updated_at=now,
                    lease_owner=None,
                    lease_expires_at=None,
                )
                .returning(Turn)
                .execution_options(synchronize_session=False, populate_existing=True)
            )
            if (await self.session.execute(stmt)).scalar_one_or_none() is not None:
                done.append((session_id, turn_id))
        return done

    async def _update_running(self, session_id: str, turn_id: str, values: dict[Any, Any]) -> bool:
        return await self._update_running_row(session_id, turn_id, values) is not None

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


class PlanRepository(Repository):
    async def get(self, session_id: str, turn_id: str) -> dict[str, Any] | None:
        row = await self.session.get(TurnPlan, (session_id, turn_id))
        return None if row is None else row.plan

    async def put(self, session_id: str, turn_id: str, plan: dict[str, Any]) -> None:
        """Upsert the turn's plan (in the same transaction as the tool result that set it)."""
        now = utc_now()
        stmt = self._insert(TurnPlan).values(
            session_id=session_id, turn_id=turn_id, plan=plan, updated_at=now
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[TurnPlan.session_id, TurnPlan.turn_id],
            set_={"plan": stmt.excluded.plan, "updated_at": now},
        )
        await self.session.execute(stmt)

    async def latest(self, session_id: str) -> dict[str, Any] | None:
        """The most recently updated plan of the session (carried over by manual compaction)."""
        stmt = (
            select(TurnPlan.plan)
            .where(TurnPlan.session_id == session_id)
            .order_by(TurnPlan.updated_at.desc())
            .limit(1)
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()
