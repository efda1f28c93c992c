"""The turn use cases and this process's runners (SPEC §6).

``TurnService`` starts turns, hands tool results and cancel requests to them, answers reads (and
``?wait=true``), and owns the asyncio tasks of the runners whose lease this process holds, plus
the periodic reaper. ``owner`` identifies this process in the lease column.

Stopping (``drain``, from the stop signal or the lifespan's end) ends this process's turns
rather than leaving them to their leases: each is recorded ``interrupted`` with its lease
released, so another replica can start the session's next turn at once. Starts and tool results
that arrive meanwhile are refused with 503 ``shutting_down`` before anything is written: sent
again, another replica takes them (a turn waiting for tool results continues there). A process
that is killed still leaves its turns to lease expiry and the reaper of another process.
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

from app.core.errors import Unavailable
from app.services.cursors import TURN_CURSOR, decode_cursor, encode_cursor
from app.services.events import Delta, Signal
from app.services.turns.control import (
    DeadlinePassed,
    cancel_waiting_or_flag,
    post_tool_results,
    require_turn,
    turn_not_waiting,
)
from app.services.turns.deps import TurnDeps
from app.services.turns.first_call import FirstCallFailed, FirstCallPreparer
from app.services.turns.lease import interrupt_held, lease_expired, reap_expired, watch_turn
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
        self._reaper_stop = asyncio.Event()
        # Set once this process stops taking turn work (``drain``).
        self._stopping = asyncio.Event()
        self._drained: asyncio.Future[None] | None = None
        self._conversations = deps.conversations
        self._first_call = FirstCallPreparer(deps, self._conversations)

    # ----- lifecycle -------------------------------------------------------------------------

    async def start_background(self) -> None:
        """Sweep expired leases now (turns left by a dead process) and periodically."""
        self._reaper_stop = asyncio.Event()
        self._stopping = asyncio.Event()
        self._drained = None
        self._reaper = asyncio.create_task(self._deps.observability.untraced(self._reap_forever()))

    async def stop_background(self) -> None:
        """End this process's turns (``drain``) and stop the reaper, before the database
        closes."""
        await self.drain()
        await self._stop_reaper()

    def begin_drain(self) -> None:
        """Start ``drain`` without waiting for it (what the stop signal calls)."""
        if self._drained is None:
            self._drained = asyncio.ensure_future(self._drain())

    async def drain(self) -> None:
        """Stop taking turn work and end the turns this process runs (idempotent): runners are
        cancelled and their turns interrupted, then ``?wait=true`` waiters are answered and the
        event streams of this process end (clients reconnect to another replica with
        ``Last-Event-ID``)."""
        self.begin_drain()
        assert self._drained is not None
        await asyncio.shield(self._drained)

    async def _drain(self) -> None:
        self._stopping.set()
        tasks = [t for _, t in self._runners.values()]
        for task in tasks:
            task.cancel()  # ``_supervise`` interrupts the turn once its runner has stopped
        await asyncio.gather(*tasks, return_exceptions=True)
        self._deps.events.hub.close()

    async def abandon(self) -> None:
        """What a killed process leaves behind (tests of the lease path): the reaper and every
        runner stop and nothing is written, so the turns keep their leases until they expire.
        ``start_background`` starts the reaper again."""
        await self._stop_reaper()
        tasks = [t for _, t in self._runners.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._runners.clear()

    async def _stop_reaper(self) -> None:
        # The reaper is asked to stop, not cancelled: cancelling it inside a query would leak
        # that connection (its driver may then call back into a closed loop).
        self._reaper_stop.set()
        if self._reaper is not None:
            with contextlib.suppress(Exception):
                await self._reaper
        self._reaper = None

    async def _reap_forever(self) -> None:
        interval = self._deps.settings.turn_reaper_interval_seconds
        while not self._reaper_stop.is_set():
            try:
                await reap_expired(self._deps)
                await expire_overdue(self._deps)
            except Exception:
                logger.exception("lease reaper failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._reaper_stop.wait(), interval)

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
        if self._stopping.is_set():  # accepted just as the process began to stop
            await self._interrupt(key, runner)
            self._forget(key, runner)
            return
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
            if self._stopping.is_set() and runner.final is None:
                await self._interrupt(key, runner)
            self._forget(key, runner)

    def _forget(self, key: tuple[str, str], runner: TurnRunner) -> None:
        current = self._runners.get(key)
        if current is not None and current[0] is runner:
            del self._runners[key]

    async def _interrupt(self, key: tuple[str, str], runner: TurnRunner) -> None:
        """The process stops and ``runner`` will not finish its turn: interrupt it now (a
        no-op when it is not running under this process's lease: ended, or parked)."""
        try:
            await interrupt_held(self._deps, *key, self.owner, draft_shown=runner.sink.dirty)
        except Exception:  # its lease still expires, and another replica interrupts it
            logger.exception("could not interrupt turn %s while stopping", key[1])

    def _refuse_while_stopping(self) -> None:
        if self._stopping.is_set():
            raise Unavailable(
                "shutting_down",
                "this replica is shutting down and takes no more turn work; send the request "
                "again (another replica takes it)",
                retry_after_seconds=1,
            )

    # ----- use cases -------------------------------------------------------------------------

    async def start(
        self,
        session_id: str,
        *,
        client_request_id: str,
        input_items: Sequence[dict[str, Any]],
        wait: bool = False,
    ) -> tuple[dict[str, Any], bool]:
        self._refuse_while_stopping()
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


def _cancel(task: asyncio.Future[None]) -> None:
    task.cancel()
