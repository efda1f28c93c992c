"""The agent loop of one turn (spec §6).

A runner lives in the process that holds the turn's lease, as an asyncio task. It runs model
calls until the turn ends or waits for the caller's tool results; waiting ends the task (and
releases the lease), and the process that receives the last result starts a new runner that
continues with the next model call. Every state change is one transaction with the live
update it announces.

The loop is the state machine of ``app.services.turns.step``: the runner loads the turn, picks
the first state and applies transitions until the turn waits (``ToolsPending``) or ends
(``Ended``, written by ``TurnWrites.finish``).
"""

from __future__ import annotations

import asyncio
import logging

from app.core.errors import Conflict, ServiceError
from app.services.conversation_cache import ConversationCache
from app.services.models import resolve_model
from app.services.session_config import agent_int
from app.services.turns.control import cancel_waiting_or_flag
from app.services.turns.deps import TurnDeps
from app.services.turns.loading import turn_counter
from app.services.turns.memory import CallMemory
from app.services.turns.model_call import LiveSink
from app.services.turns.outcomes import TurnEnded, TurnLost, failed, internal_failure
from app.services.turns.overlap import PendingStep, signals_sent
from app.services.turns.start import Started
from app.services.turns.step import Calling, Ended, Preparing, State, Steps, ToolsPending
from app.services.turns.tools import DoomRecord
from app.services.turns.transactions import TurnWrites
from app.storage.database import unit_of_work
from app.storage.models import Turn
from app.storage.repositories.sessions import SessionRepository
from app.storage.repositories.turns import TurnRepository

__all__ = ["TurnEnded", "TurnLost", "TurnRunner"]

logger = logging.getLogger(__name__)


class TurnRunner:
    def __init__(
        self,
        deps: TurnDeps,
        session_id: str,
        turn_id: str,
        *,
        doom: DoomRecord | None = None,
        started: Started | None = None,
        conversations: ConversationCache | None = None,
    ) -> None:
        self.session_id = session_id
        self.turn_id = turn_id
        self._deps = deps
        self._doom = doom
        # The start that created the turn in this process: what it read need not be read again.
        self._started = started
        self._memory = CallMemory(
            deps, session_id, turn_id, conversations or ConversationCache(max_bytes=0)
        )
        self._writes = TurnWrites(deps, session_id, turn_id, self._memory)
        # The terminal row this runner wrote (a waiter in this process need not read it back).
        self.final: Turn | None = None

    # ----- what the supervisor and the observer see ------------------------------------------

    @property
    def cancel(self) -> asyncio.Event:
        return self._writes.cancel

    @property
    def sink(self) -> LiveSink:
        return self._writes.sink

    @property
    def phase(self) -> str | None:
        return self._writes.phase

    @property
    def pending(self) -> PendingStep | None:
        """A new turn's start, left open for this runner to commit while it sends the first
        call (``Started.pending``); ``done`` once it committed."""
        return self._started.pending if self._started is not None else None

    async def settle(self) -> None:
        """Commit the start still pending (``overlap``), if any."""
        if self.pending is not None:
            await self.pending.settle()

    # ----- entry point -----------------------------------------------------------------------

    async def run(self) -> None:
        try:
            state = await self._loop()
            if isinstance(state, ToolsPending):
                await self._cancel_if_requested()
                return
            end = state.end
        except TurnLost:
            logger.info("turn %s ended elsewhere; runner stops", self.turn_id)
            return
        except Exception:  # never leave a turn running because of a bug or a dead DB
            logger.exception("turn %s runner failed", self.turn_id)
            end = failed("persistence_error", internal_failure(self.turn_id))
        await self._finish(end)

    async def _loop(self) -> ToolsPending | Ended:
        state: State | None = None
        try:
            try:
                steps, state = await self._load()
                while not isinstance(state, (ToolsPending, Ended)):
                    state = await steps.advance(state)
                return state
            except BaseException:
                # A step still to commit (``overlap``) comes first: all that ended the loop
                # (the process stopping too) happened after it.
                if isinstance(state, Calling) and state.pending is not None:
                    await state.pending.settle()
                await self.settle()
                raise
        except TurnEnded as end:  # the turn's settings, or a commit that failed meanwhile
            return Ended(end)

    async def _load(self) -> tuple[Steps, State]:
        """The turn's transitions and its first state (``Calling`` when the start prepared
        the first call); the model, counter, phase and cancel flag from the stored turn (or
        from the start that created it)."""
        deps, memory, writes = self._deps, self._memory, self._writes
        started = self._started
        first: State | None = None
        if started is not None and started.model is not None:
            # A new turn: running, no model call yet; a cancel posted since is seen by the
            # first phase update (or, when the start prepared the first call, by the runner's
            # cancel flag, which is set directly in this process).
            session, entry, prepared_first = started.session, started.model, started.first
            writes.phase = started.turn.phase
            index = 0
            if prepared_first is not None:
                memory.use(entry, prepared_first.counter, prepared_first.context)
                memory.knows_sent(prepared_first.previous_request)
                # The start's transaction, when left open (committed as the first call is
                # sent).
                prepared, session = memory.ready(prepared_first.loaded, session, started.pending)
                first = Calling(session, 1, self._doom, prepared, started.pending)
            else:
                counter = deps.counter(entry.capabilities.token_counter)
                if deps.settings.apply_calibration:
                    async with unit_of_work(deps.db, read_only=True) as db:
                        counter = await turn_counter(deps, db, entry)
                memory.use(entry, counter)
        else:
            async with unit_of_work(deps.db, read_only=True) as db:
                turn = await TurnRepository(db).get(self.session_id, self.turn_id)
                if turn is None or turn.status != "running":
                    raise TurnLost
                session = await SessionRepository(db).require(self.session_id)
                entry = await resolve_model(db, session.model_id, session.tenant_id)
                memory.use(entry, await turn_counter(deps, db, entry))
            writes.phase, index = turn.phase, turn.model_call_index
            if turn.cancel_requested:
                writes.cancel.set()
        client = deps.model_clients.for_model(entry, session_id=self.session_id)
        try:
            max_calls = agent_int(session, "max_model_calls", 20)
            threshold = agent_int(session, "doom_loop_threshold", 3)
        except ServiceError as exc:  # a stored row this version never writes
            raise failed(exc.code, exc.detail) from exc
        steps = Steps(
            writes,
            memory,
            client,
            overlap=signals_sent(client),
            max_calls=max_calls,
            doom_threshold=threshold,
        )
        return steps, first or Preparing(session, index + 1, self._doom)

    # ----- the end ---------------------------------------------------------------------------

    async def _finish(self, end: TurnEnded) -> None:
        try:
            self.final = await self._writes.finish(end)
        except TurnEnded as failure:  # storing the last response failed: its step rolled back
            await self._finish(failure)
        except TurnLost:
            logger.info("turn %s was already terminal", self.turn_id)
        except Exception:
            # The lease runs out and the reaper interrupts the turn: nothing is left running.
            logger.exception("turn %s could not be finished", self.turn_id)

    async def _cancel_if_requested(self) -> None:
        """After the step that parked the turn: a cancel that step saw (posted meanwhile, maybe
        to another replica, which only flagged it for this runner) ends the turn here, as a
        cancel of a waiting turn does; no runner would look at the flag again."""
        if not self.cancel.is_set():
            return
        try:
            await cancel_waiting_or_flag(self._deps, self.session_id, self.turn_id)
        except Conflict:  # ended elsewhere meanwhile
            logger.info("turn %s was already terminal", self.turn_id)
