"""The turn use cases (spec §6).

``TurnService`` starts turns, hands tool results and cancel requests to them and answers reads
(and ``?wait=true``), on top of ``RunnerSupervisor`` (this process's runners, the reaper and
stopping: ``app.services.turns.supervisor``).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

from app.api.schemas.turns import ToolResultIn, TurnStart
from app.services.cursors import TURN_CURSOR, decode_cursor, encode_cursor
from app.services.events import Delta, Signal
from app.services.model_types import ModelEntry
from app.services.turns.control import (
    DeadlinePassed,
    cancel_waiting_or_flag,
    post_tool_results,
    require_turn,
    turn_not_waiting,
)
from app.services.turns.deps import TurnDeps
from app.services.turns.first_call import FirstCallFailed, FirstCallPreparer
from app.services.turns.lease import lease_expired, reap_expired
from app.services.turns.overlap import signals_sent
from app.services.turns.start import RunningTurnExpired, Started, busy, start_turn
from app.services.turns.stream import open_event_stream
from app.services.turns.supervisor import RunnerSupervisor
from app.services.turns.waiting import expire_waiting, tool_results_overdue
from app.storage.database import unit_of_work
from app.storage.models import Turn
from app.storage.repositories.sessions import SessionRepository
from app.storage.repositories.turns import TurnRepository

__all__ = ["StartedTurn", "TurnList", "TurnService"]

# How often a waiting reader re-reads the turn for changes made on other replicas.
_WAIT_POLL_SECONDS = 0.5


@dataclass(frozen=True, slots=True)
class StartedTurn:
    turn: Turn
    created: bool  # False: the turn already accepted for this client_request_id and input


@dataclass(frozen=True, slots=True)
class TurnList:
    """A page of a session's turns, newest first."""

    turns: list[Turn]
    next_cursor: str | None


def _settled(turn: Turn) -> bool:
    return turn.status != "running" or turn.phase == "waiting_tool_results"


class TurnService(RunnerSupervisor):
    def __init__(self, deps: TurnDeps) -> None:
        super().__init__(deps)
        self._first_call = FirstCallPreparer(deps, self._conversations)

    # ----- use cases -------------------------------------------------------------------------

    async def start(
        self, session_id: str, command: TurnStart, *, wait: bool = False
    ) -> StartedTurn:
        self._refuse_while_stopping()
        try:
            started = await self._start(session_id, command)
        except RunningTurnExpired as expired:
            await reap_expired(self._deps)
            await expire_waiting(self._deps, session_id, expired.turn_id)
            try:
                started = await self._start(session_id, command)
            except RunningTurnExpired as still:  # not reaped (e.g. its lease renewed meanwhile)
                raise busy(still.turn_id) from None
        turn, created = started.turn, started.created
        if created:
            model_id = started.model.id if started.model is not None else None
            self._deps.observability.turns.accepted(
                turn, model_id=model_id, input_items=len(command.input)
            )
            self._spawn(session_id, turn.turn_id, started=started)
            if started.pending is not None:
                # Answered once the turn is stored (its runner commits the start as the first
                # call goes out); a start that could not be stored fails this request.
                await asyncio.shield(started.pending.done)
        if wait:
            turn = await self._wait(session_id, turn.turn_id, _settled)
        return StartedTurn(turn, created)

    async def _start(self, session_id: str, command: TurnStart) -> Started:
        start = functools.partial(start_turn, self._deps, self.owner, session_id, command)
        try:
            return await start(first_call=self._first_call, overlap=self._overlaps)
        except FirstCallFailed:
            # Nothing was written: start without it, and the runner's first step fails the
            # turn with the error, as for any turn.
            return await start()

    def _overlaps(self, model: ModelEntry) -> bool:
        """Whether a new turn's start may commit while its runner sends the first call: when
        the model's client says when a request is written (``app.services.turns.overlap``)."""
        # Only asked what kind of client it is: no call is made, so no session's script moves.
        return signals_sent(self._deps.model_clients.for_model(model, session_id=""))

    async def get(self, session_id: str, turn_id: str) -> Turn:
        return await self._read(session_id, turn_id)

    async def list(self, session_id: str, *, limit: int, cursor: str | None) -> TurnList:
        """The session's turns, newest first, cursor-paginated (404 for no session)."""
        before = decode_cursor(cursor, TURN_CURSOR) if cursor else None
        async with unit_of_work(self._deps.db, read_only=True) as db:
            await SessionRepository(db).require(session_id)
            rows = list(
                await TurnRepository(db).list_for_session(
                    session_id, limit=limit + 1, before=before
                )
            )
        page = rows[:limit]
        last = page[-1] if len(rows) > limit else None
        return TurnList(
            page, None if last is None else encode_cursor(last.created_at, last.turn_id)
        )

    async def wait(self, session_id: str, turn_id: str) -> Turn:
        return await self._wait(session_id, turn_id, _settled)

    async def post_tool_results(
        self,
        session_id: str,
        turn_id: str,
        results: Sequence[ToolResultIn],
        *,
        wait: bool = False,
    ) -> Turn:
        self._refuse_while_stopping()
        try:
            outcome = await post_tool_results(self._deps, self.owner, session_id, turn_id, results)
        except DeadlinePassed:
            await expire_waiting(self._deps, session_id, turn_id)
            raise turn_not_waiting(await require_turn(self._deps, session_id, turn_id)) from None
        turn = outcome.turn
        if outcome.resume:
            self._spawn(session_id, turn_id, outcome.doom, resumed_from=turn.trace_context or "")
            if wait:
                turn = await self._wait(session_id, turn_id, _settled)
        return turn

    async def cancel(self, session_id: str, turn_id: str) -> Turn:
        """Request cancellation and answer once the turn is terminal (bounded wait)."""
        try:
            flagged = await cancel_waiting_or_flag(self._deps, session_id, turn_id)
        except DeadlinePassed:  # it ended at its deadline: a cancel now finds it terminal
            await expire_waiting(self._deps, session_id, turn_id)
            flagged = await cancel_waiting_or_flag(self._deps, session_id, turn_id)
        if flagged:
            local = self._runners.get((session_id, turn_id))
            if local is not None:
                local[0].cancel.set()  # a pending model call is abandoned at once
            return await self._wait(session_id, turn_id, lambda t: t.status != "running")
        return await self.get(session_id, turn_id)

    async def events(self, session_id: str, after: int) -> AsyncIterator[bytes]:
        """The SSE byte stream of the session's updates after ``after`` (404 if no session)."""
        return await open_event_stream(self._deps, session_id, after)

    # ----- reads -----------------------------------------------------------------------------

    async def _read(self, session_id: str, turn_id: str) -> Turn:
        turn = await require_turn(self._deps, session_id, turn_id)
        if lease_expired(turn):
            await reap_expired(self._deps)
            turn = await require_turn(self._deps, session_id, turn_id)
        elif tool_results_overdue(turn):
            await expire_waiting(self._deps, session_id, turn_id)
            turn = await require_turn(self._deps, session_id, turn_id)
        return turn

    async def _wait(self, session_id: str, turn_id: str, done: Callable[[Turn], bool]) -> Turn:
        deadline = time.monotonic() + self._deps.settings.turn_wait_timeout_seconds
        hub = self._deps.events.hub
        queue = hub.subscribe(session_id)
        try:
            while True:
                local = self._runners.get((session_id, turn_id))
                remaining = deadline - time.monotonic()
                if local is not None and remaining > 0:
                    # Our own runner: its task ends exactly when the turn waits or ends, so
                    # there is no need to read the row before, nor at every update it commits;
                    # when it ended the turn, it holds the terminal row.
                    await asyncio.wait({local[1]}, timeout=remaining)
                final = local[0].final if local is not None else None
                turn = final if final is not None else await self._read(session_id, turn_id)
                remaining = deadline - time.monotonic()
                # A stopping process answers now: the open request must not hold it up.
                if done(turn) or remaining <= 0 or self._stopping.is_set():
                    return turn
                if (session_id, turn_id) not in self._runners:
                    await _next_commit(queue, min(_WAIT_POLL_SECONDS, remaining))
        finally:
            hub.unsubscribe(session_id, queue)


async def _next_commit(queue: asyncio.Queue[Signal], seconds: float) -> None:
    """Return at the next durable update of the session (deltas skipped) or after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        try:
            signal = await asyncio.wait_for(queue.get(), timeout=remaining)
        except TimeoutError:
            return
        if not isinstance(signal, Delta):
            return
