"""This process's turn runners: their asyncio tasks, the lease reaper, and stopping (spec §6).

``RunnerSupervisor`` owns the tasks of the runners whose lease this process holds (``owner``
identifies this process in the lease column), watches each for a cancel posted elsewhere or a
lost lease, and runs the periodic reaper. ``TurnService`` builds its use cases on it.

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
import logging
from asyncio import FIRST_COMPLETED

from app.core.errors import Unavailable
from app.services.turns.deps import TurnDeps
from app.services.turns.holders import local_owner_id
from app.services.turns.lease import (
    free_dead_holders,
    interrupt_held,
    reap_expired,
    watch_turn,
)
from app.services.turns.runner import TurnRunner
from app.services.turns.start import Started
from app.services.turns.tools import DoomRecord
from app.services.turns.waiting import expire_overdue
from app.storage.outages import outage_of

__all__ = ["RunnerSupervisor"]

logger = logging.getLogger(__name__)


class RunnerSupervisor:
    def __init__(self, deps: TurnDeps) -> None:
        self._deps = deps
        self.owner = local_owner_id()
        self._runners: dict[tuple[str, str], tuple[TurnRunner, asyncio.Task[None]]] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._reaper_stop = asyncio.Event()
        # Set once this process stops taking turn work (``drain``).
        self._stopping = asyncio.Event()
        self._drained: asyncio.Future[None] | None = None
        self._conversations = deps.conversations

    # ----- lifecycle -------------------------------------------------------------------------

    async def start_background(self) -> None:
        """Sweep expired leases now (turns left by a dead process) and periodically."""
        self._reaper_stop = asyncio.Event()
        self._stopping = asyncio.Event()
        self._drained = None
        try:
            # Before the process is ready: a session left busy by this host's crashed process
            # takes turns again as soon as its successor answers.
            await free_dead_holders(self._deps)
        except Exception as exc:  # the periodic sweep tries again
            self._sweep_failed(exc)
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
                # Turns of a process of this host that is provably gone first (a restart
                # after a crash frees its sessions at once), then every expired lease.
                await free_dead_holders(self._deps)
                await reap_expired(self._deps)
                await expire_overdue(self._deps)
            except Exception as exc:
                self._sweep_failed(exc)
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
            await runner.settle()  # a start left open is stored first, then interrupted
            await self._interrupt(key, runner)
            self._forget(key, runner)
            return
        work = asyncio.ensure_future(runner.run())
        tasks = [work]
        try:
            if runner.pending is not None:
                # The turn is not stored until the runner commits its start: watch it from
                # then (the runner commits it before it ends, however it ends).
                await asyncio.wait({work, runner.pending.done}, return_when=FIRST_COMPLETED)
            tasks.append(asyncio.ensure_future(self._watch(key, runner, work)))
            # ``wait`` (not ``await work``): the runner being cancelled because its turn ended
            # elsewhere is a normal end; only this task's own cancellation propagates.
            await asyncio.wait({work})
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(BaseException):
                    await task
            if self._stopping.is_set() and runner.final is None:
                await self._interrupt(key, runner)
            self._forget(key, runner)

    async def _watch(
        self, key: tuple[str, str], runner: TurnRunner, work: asyncio.Future[None]
    ) -> None:
        """Tell ``runner`` of a cancel posted elsewhere; stop it when its turn was lost."""
        await self._deps.observability.untraced(
            watch_turn(
                self._deps,
                key[0],
                key[1],
                self.owner,
                on_cancel=runner.cancel.set,
                on_lost=lambda: _cancel(work),
            )
        )

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

    def _sweep_failed(self, exc: Exception) -> None:
        reason = outage_of(exc)
        if reason is None:
            logger.exception("lease reaper failed; retrying", exc_info=exc)
        else:  # an outage: one line per outage, not a traceback per sweep
            self._deps.outages.seen(reason, exc)

    def _refuse_while_stopping(self) -> None:
        if self._stopping.is_set():
            raise Unavailable(
                "shutting_down",
                "this replica is shutting down and takes no more turn work; send the request "
                "again (another replica takes it)",
                retry_after_seconds=1,
            )


def _cancel(task: asyncio.Future[None]) -> None:
    task.cancel()
