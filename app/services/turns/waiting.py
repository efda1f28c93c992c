"""Turns waiting for the caller's tool results: their deadline, and how such a turn ends.

A waiting turn holds no lease (no process works on it), so without a deadline a caller that
disappears would leave its session ``busy`` for good. When a turn starts waiting it gets a
deadline: now + the session agent's ``tool_results_timeout_seconds``, else the setting
``CTXSVC_TOOL_RESULTS_TIMEOUT_SECONDS``. Past it the turn ends ``failed`` with the stable code
``tool_results_timeout``: results posted so far are written, every call still without one gets
the fixed not-executed result, and the session is free for the next turn.

Who ends it: every process's sweeper (with the lease reaper, every
``CTXSVC_TURN_REAPER_INTERVAL_SECONDS``), and at once whoever touches the turn after the
deadline: a read, a start in its session, a result post or a cancel (nothing is taken after the
deadline). The deadline is a timestamp of the clock of the process that parked the turn, as the
lease expiry is.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.services.models import resolve_model
from app.services.session_config import agent_of
from app.services.turns.calls import stored_entries, write_results
from app.services.turns.deps import TurnDeps
from app.services.turns.outcomes import Outcome
from app.storage.base import utc_now
from app.storage.database import unit_of_work
from app.storage.models import AgentSession, Turn
from app.storage.repositories.sessions import SessionRepository
from app.storage.repositories.turns import TurnRepository
from app.storage.repositories.waiting_turns import WAITING, WaitingTurnRepository

__all__ = [
    "TIMEOUT_CODE",
    "end_waiting",
    "expire_overdue",
    "expire_waiting",
    "start_waiting",
    "tool_results_overdue",
    "tool_results_remaining",
]

TIMEOUT_CODE = "tool_results_timeout"


def _timeout_seconds(deps: TurnDeps, session: AgentSession) -> float:
    own = agent_of(session).get("tool_results_timeout_seconds")
    # The API stores only a number in bounds; a hand-edited row must not fail the turn's step.
    if isinstance(own, int | float) and not isinstance(own, bool) and own > 0:
        return float(own)
    return deps.settings.tool_results_timeout_seconds


async def start_waiting(
    deps: TurnDeps, db: AsyncSession, session: AgentSession, turn_id: str
) -> None:
    """In the step that parks the turn: its deadline for tool results."""
    deadline = utc_now() + timedelta(seconds=_timeout_seconds(deps, session))
    await WaitingTurnRepository(db).set_deadline(session.id, turn_id, deadline)


def _waiting_deadline(turn: Turn) -> datetime | None:
    waiting = turn.status == "running" and turn.phase == WAITING
    return turn.tool_results_deadline if waiting else None


def tool_results_overdue(turn: Turn, now: datetime | None = None) -> bool:
    """The turn waits for tool results and its deadline has come (at the deadline itself no
    time is left: ``tool_results_remaining`` is 0)."""
    deadline = _waiting_deadline(turn)
    return deadline is not None and deadline <= (now or utc_now())


def tool_results_remaining(turn: Turn, now: datetime | None = None) -> float | None:
    """Seconds left to post the results (0 when overdue); ``None`` when not waiting (or
    waiting since before deadlines existed)."""
    deadline = _waiting_deadline(turn)
    if deadline is None:
        return None
    return max(round((deadline - (now or utc_now())).total_seconds(), 3), 0.0)


async def end_waiting(
    deps: TurnDeps,
    db: AsyncSession,
    session: AgentSession,
    turn: Turn,
    *,
    status: str,
    outcome: Outcome,
) -> Turn | None:
    """End a turn that waits for the caller, in ``db``'s transaction (the session row locked):
    the results posted so far and, for every call still without one, the fixed not-executed
    result; then the terminal status and its ``turn_finished`` update. The terminal row, for
    the caller to report once committed (``observability.turns.finished``)."""
    entries = stored_entries(turn.pending_tool_calls)
    model = await resolve_model(db, session.model_id, session.tenant_id)
    await write_results(
        db,
        deps.events,
        deps.counter(model.capabilities.token_counter),
        session_id=session.id,
        turn_id=turn.turn_id,
        entries=entries,
    )
    finished = await TurnRepository(db).finish(
        session.id, turn.turn_id, status=status, outcome=outcome, phase="terminal"
    )
    await deps.events.emit(
        db,
        session.id,
        "turn_finished",
        {"status": status, "outcome": outcome},
        turn_id=turn.turn_id,
    )
    return finished


def _timeout_outcome(turn: Turn) -> Outcome:
    missing = [
        c["tool_call_id"]
        for c in stored_entries(turn.pending_tool_calls)
        if c.get("result") is None
    ]
    deadline = turn.tool_results_deadline
    when = deadline.isoformat().replace("+00:00", "Z") if deadline is not None else "?"
    return {
        "code": TIMEOUT_CODE,
        "message": f"no tool results for {missing} by the deadline {when}; those calls were "
        "not executed. Start a new turn (a session's agent sets its own timeout with "
        "tool_results_timeout_seconds)",
    }


async def expire_waiting(deps: TurnDeps, session_id: str, turn_id: str) -> bool:
    """End the turn if it waits past its deadline (re-checked under the session's lock, so two
    replicas never both end it); whether this call ended it."""
    async with unit_of_work(deps.db) as db:
        session = await SessionRepository(db).require(session_id, for_update=True)
        turn = await TurnRepository(db).get(session_id, turn_id)
        if turn is None or not tool_results_overdue(turn):
            return False
        outcome = _timeout_outcome(turn)
        finished = await end_waiting(deps, db, session, turn, status="failed", outcome=outcome)
    if finished is not None:
        deps.observability.turns.finished(finished)  # its line says why (tool_results_timeout)
    return True


async def expire_overdue(deps: TurnDeps) -> list[tuple[str, str]]:
    """End every turn waiting past its deadline (the sweeper); returns those this call ended."""
    async with unit_of_work(deps.db, read_only=True) as db:
        candidates = await WaitingTurnRepository(db).overdue(now=utc_now())
    return [c for c in candidates if await expire_waiting(deps, *c)]
