"""The turn use cases and this process's runners (SPEC §6).

``TurnService`` starts turns, hands tool results and cancel requests to them, answers reads (and
``?wait=true``), and owns the asyncio tasks of the runners whose lease this process holds, plus
the periodic reaper. ``owner`` identifies this process in the lease column.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from app.services.cursors import decode_cursor, encode_cursor
from app.services.events import Delta, Signal
from app.services.turns.control import (
    DeadlinePassed,
    cancel_waiting_or_flag,
    post_tool_results,
    require_turn,
    turn_not_waiting,
)
from app.services.turns.conversations import ConversationCache
from app.services.turns.deps import TurnDeps
from app.services.turns.first_call import FirstCallFailed, FirstCallPreparer
from app.services.turns.lease import lease_expired, reap_expired, watch_turn
from app.services.turns.runner import TurnRunner
from app.services.turns.start import RunningTurnExpired, Started, busy, start_turn
from app.services.turns.stream import open_event_stream
from app.services.turns.tools import DoomRecord
from app.services.turns.views import awaiting_calls, turn_to_json
from app.services.turns.waiting import expire_overdue, expire_waiting, tool_results_overdue
from app.storage.database import unit_of_work
from app.storage.models import Turn
from app.storage.repositories.sessions import SessionRepository
from app.storage.repositories.turns import TurnRepository

__all__ = ["TurnService"]

logger = logging.getLogger(__name__)

# How often a waiting reader re-reads the turn for changes made on other replicas.
_WAIT_POLL_SECONDS = 0.5


def _settled(turn: Turn) -> bool:
    return turn.status != "running" or turn.phase == "waiting_tool_results"


class TurnService:
    def __init__(self, deps: TurnDeps) -> None:
        self._deps = deps
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._runners: dict[tuple[str, str], tuple[TurnRunner, asyncio.Task[None]]] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._conversations = ConversationCache(deps.settings.turn_conversation_cache_messages)
        self._first_call = FirstCallPreparer(deps, self._conversations)

    # ----- lifecycle -------------------------------------------------------------------------

    async def start_background(self) -> None:
        """Sweep expired leases now (turns left by a dead process) and periodically."""
        self._stopping = asyncio.Event()
        self._reaper = asyncio.create_task(self._deps.observability.untraced(self._reap_forever()))

    async def stop_background(self) -> None:
        """Stop the reaper and this process's runners. Their turns keep their lease until it
        runs out; then any replica interrupts them (nothing is replayed)."""
        # The reaper is asked to stop, not cancelled: cancelling it inside a query would leak
        # that connection (its driver may then call back into a closed loop).
        self._stopping.set()
        if self._reaper is not None:
            with contextlib.suppress(Exception):
                await self._reaper
        tasks = [t for _, t in self._runners.values()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        self._runners.clear()
        self._reaper = None

    async def _reap_forever(self) -> None:
        interval = self._deps.settings.turn_reaper_interval_seconds
        while not self._stopping.is_set():
            try:
                await reap_expired(self._deps)
                await expire_overdue(self._deps)
            except Exception:
                logger.exception("lease reaper failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), interval)

    async def idle(self) -> None:
        """Wait until this process runs no turn (tests and benchmarks)."""
        while self._runners:
            await asyncio.gather(
                *(t for _, t in list(self._runners.values())), return_exceptions=True
            )

    # ----- runners ---------------------------------------------------------------------------

    def _spawn(
        self,
        session_id: str,
        turn_id: str,
        doom: DoomRecord | None = None,
        started: Started | None = None,
        resumed_from: str | None = None,
    ) -> None:
        """``resumed_from``: the turn's stored ``traceparent`` when the runner continues a turn
        that waited for tool results (``""`` without one); ``None`` for a new turn."""
        key = (session_id, turn_id)
        runner = TurnRunner(
            self._deps,
            session_id,
            turn_id,
            doom=doom,
            started=started,
            conversations=self._conversations,
        )
        leg = self._deps.observability.turns.leg(
            self._supervise(key, runner), runner, resumed_from=resumed_from
        )
        task = asyncio.create_task(leg)
        self._runners[key] = (runner, task)

    async def _supervise(self, key: tuple[str, str], runner: TurnRunner) -> None:
        work = asyncio.ensure_future(runner.run())
        watcher = asyncio.ensure_future(
            self._deps.observability.untraced(
                watch_turn(
                    self._deps,
                    key[0],
                    key[1],
                    self.owner,
                    on_cancel=runner.cancel.set,
                    on_lost=lambda: _cancel(work),
                )
            )
        )
        try:
            # ``wait`` (not ``await work``): the runner being cancelled because its turn ended
            # elsewhere is a normal end; only this task's own cancellation propagates.
            await asyncio.wait({work})
        finally:
            for task in (work, watcher):
                task.cancel()
            for task in (work, watcher):
                with contextlib.suppress(BaseException):
                    await task
            current = self._runners.get(key)
            if current is not None and current[0] is runner:
                del self._runners[key]

    # ----- use cases -------------------------------------------------------------------------

    async def start(
        self,
        session_id: str,
        *,
        client_request_id: str,
        input_items: Sequence[dict[str, Any]],
        wait: bool = False,
    ) -> tuple[dict[str, Any], bool]:
        try:
            started = await self._start(session_id, client_request_id, input_items)
        except RunningTurnExpired as expired:
            await reap_expired(self._deps)
            await expire_waiting(self._deps, session_id, expired.turn_id)
            try:
                started = await self._start(session_id, client_request_id, input_items)
            except RunningTurnExpired as still:  # not reaped (e.g. its lease renewed meanwhile)
                raise busy(still.turn_id) from None
        turn, created = started.turn, started.created
        if created:
            model_id = started.model.id if started.model is not None else None
            self._deps.observability.turns.accepted(
                turn, model_id=model_id, input_items=len(input_items)
            )
            self._spawn(session_id, turn.turn_id, started=started)
        if wait:
            turn = await self._wait(session_id, turn.turn_id, _settled)
        return turn_to_json(turn), created

    async def _start(
        self, session_id: str, client_request_id: str, input_items: Sequence[dict[str, Any]]
    ) -> Started:
        start = functools.partial(
            start_turn,
            self._deps,
            self.owner,
            session_id,
            client_request_id=client_request_id,
            input_items=input_items,
        )
        try:
            return await start(first_call=self._first_call)
        except FirstCallFailed:
            # Nothing was written: start without it, and the runner's first step fails the
            # turn with the error, as for any turn.
            return await start()

    async def get(self, session_id: str, turn_id: str) -> dict[str, Any]:
        return turn_to_json(await self._read(session_id, turn_id))

    async def list(self, session_id: str, *, limit: int, cursor: str | None) -> dict[str, Any]:
        """The session's turns, newest first, cursor-paginated (404 for no session)."""
        before = decode_cursor(cursor) if cursor else None
        async with unit_of_work(self._deps.db, read_only=True) as db:
            await SessionRepository(db).require(session_id)
            rows = list(
                await TurnRepository(db).list_for_session(
                    session_id, limit=limit + 1, before=before
                )
            )
        page = rows[:limit]
        last = page[-1] if len(rows) > limit else None
        return {
            "turns": [turn_to_json(t) for t in page],
            "next_cursor": None if last is None else encode_cursor(last.created_at, last.turn_id),
        }

    async def wait(self, session_id: str, turn_id: str) -> dict[str, Any]:
        return turn_to_json(await self._wait(session_id, turn_id, _settled))

    async def post_tool_results(
        self,
        session_id: str,
        turn_id: str,
        results: Sequence[dict[str, Any]],
        *,
        wait: bool = False,
    ) -> dict[str, Any]:
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
        body = turn_to_json(turn)
        body["missing_tool_call_ids"] = [c["tool_call_id"] for c in awaiting_calls(turn)]
        return body

    async def cancel(self, session_id: str, turn_id: str) -> dict[str, Any]:
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
            return turn_to_json(
                await self._wait(session_id, turn_id, lambda t: t.status != "running")
            )
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
                if done(turn) or remaining <= 0:
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


def _cancel(task: asyncio.Future[None]) -> None:
    task.cancel()
