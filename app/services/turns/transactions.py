"""The transactions a turn's steps are made of (spec §6): a step with its live updates, the
phase change, storing a model response with its round's results, and the step that ends the
turn. The state machine that strings them together is ``app.services.turns.step``.

``TurnWrites`` is what those transactions share: the turn's ids, its live sink, its cancel flag
and the phase last announced (each phase change is announced once), and the model's
``CallMemory`` (its counter, and the record of the last request sent, which the step storing
that request's response writes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import ServiceError
from app.core.pipeline.prepared_call import PreparedModelCall
from app.providers.base import ModelResponse
from app.services.calibration import record_calibration
from app.services.events import EventBatch
from app.services.messages import exact_counts
from app.services.request_prefix import remember
from app.services.turns.calls import CallEntry, result_messages
from app.services.turns.deps import TurnDeps
from app.services.turns.memory import CallMemory
from app.services.turns.model_call import LiveSink
from app.services.turns.outcomes import TurnEnded, TurnLost, failed, internal_failure
from app.services.turns.usage import model_call_finished, usage_columns
from app.storage.database import unit_of_work
from app.storage.deferred import defer
from app.storage.models import AgentSession, Turn
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.records import NewMessage
from app.storage.repositories.sessions import SessionRepository
from app.storage.repositories.turns import TurnRepository

__all__ = ["TurnWrites"]

logger = logging.getLogger(__name__)


class TurnWrites:
    def __init__(self, deps: TurnDeps, session_id: str, turn_id: str, memory: CallMemory) -> None:
        self.deps = deps
        self.session_id = session_id
        self.turn_id = turn_id
        self.memory = memory
        self.sink = LiveSink(deps, session_id, turn_id)
        self.cancel = asyncio.Event()
        # The phase last announced (``phase_changed`` is emitted when it changes).
        self.phase: str | None = None

    @asynccontextmanager
    async def step(self) -> AsyncIterator[tuple[AsyncSession, EventBatch]]:
        """One transaction whose live updates are written together just before it commits."""
        try:
            async with unit_of_work(self.deps.db) as db:
                # The step's writes go out together, at the latest at its commit
                # (``app.storage.deferred``): the database refuses them there, not where
                # they were made.
                await defer(db)
                events = self.deps.events.batch(self.session_id)
                yield db, events
                await events.flush(db)
        except DBAPIError as exc:
            # Rolled back: nothing of the step is stored (SQL and driver text stay in the log).
            logger.exception("turn %s: a step could not be stored", self.turn_id)
            raise failed("persistence_error", internal_failure(self.turn_id)) from exc

    async def hold(self, db: AsyncSession) -> AgentSession:
        """The session row, locked for the step; its sequence counters are written once."""
        sessions = SessionRepository(db)
        session = await sessions.require(self.session_id, for_update=True)
        sessions.defer_counters(session)
        return session

    async def set_phase(
        self, db: AsyncSession, events: EventBatch, phase: str, **values: Any
    ) -> None:
        await TurnRepository(db).advance_running(
            self.session_id, self.turn_id, self._still_running, phase=phase, **values
        )
        await self.announce_phase(db, events, phase)

    def _still_running(self, cancel_requested: bool | None) -> None:
        """What the turn's UPDATE found (it may run at the step's commit: the step defers its
        writes): rolls the step back when the turn is no longer running."""
        if cancel_requested is None:
            raise TurnLost
        if cancel_requested:  # posted to another replica; the watcher may not have seen it
            self.cancel.set()

    async def announce_phase(self, db: AsyncSession, events: EventBatch, phase: str) -> None:
        if phase != self.phase:
            await events.emit(
                db, self.session_id, "phase_changed", {"phase": phase}, turn_id=self.turn_id
            )
            self.phase = phase

    async def phase_step(self, phase: str) -> None:
        async with self.step() as (db, events):
            await SessionRepository(db).lock(self.session_id)
            await self.set_phase(db, events, phase)

    def check_cancel(self, entries: list[CallEntry] | None = None) -> None:
        if self.cancel.is_set():
            raise TurnEnded("cancelled", entries=entries or [])

    async def results(
        self, db: AsyncSession, events: EventBatch, entries: list[CallEntry]
    ) -> list[NewMessage]:
        """The round's tool messages, in call order (``result_messages``)."""
        return await result_messages(
            db,
            events,
            self.memory.counter,
            session_id=self.session_id,
            turn_id=self.turn_id,
            entries=entries,
        )

    async def draft_stored(self, db: AsyncSession, events: EventBatch) -> None:
        """The draft on screen is now the stored response: announced first in the step that
        stores it (the batch keeps the order). A call that streamed no text (tool calls only)
        left no draft to clear: no update, one ``session_events`` row less per such step
        (``docs/decisions.md``, "draft_cleared only for a draft on screen")."""
        if not self.sink.dirty:
            return
        await events.emit(
            db,
            self.session_id,
            "draft_cleared",
            {"reason": "assistant_message_stored"},
            turn_id=self.turn_id,
        )

    async def store_response(
        self,
        db: AsyncSession,
        events: EventBatch,
        response: ModelResponse,
        prepared: PreparedModelCall,
        index: int,
        results: Sequence[NewMessage] = (),
    ) -> dict[str, int]:
        """Inside a step: the assistant message, then ``results`` (its round's tool messages)
        in the same batch, the ``model_call_finished`` update and a calibration sample (best
        effort); returns the usage to add to the turn (with the step's turn update). The
        sample compares like with like: the provider's whole input (cache reads and writes
        included, ``Usage.input_tokens``) against the estimate of the whole request sent.
        A failure to store the messages is
        ``persistence_error``, and as the step rolls back, nothing of the round is stored."""
        memory = self.memory
        entry = memory.model
        await remember(db, self.session_id, memory.sent_record)
        content = response.assistant_content()
        usage = response.usage
        assistant = NewMessage(
            role="assistant",
            kind="normal",
            content=content,
            turn_id=self.turn_id,
            token_counts=exact_counts(memory.counter, "assistant", content),
        )
        try:
            # A refusal fails the turn: this step is rolled back.
            await MessageRepository(db).append(
                self.session_id, [assistant, *results], rollback_on_refusal=True
            )
        except ServiceError as exc:
            raise failed("persistence_error", f"persistence error: {exc.detail}") from exc
        except Exception as exc:
            logger.exception("turn %s: the model's answer could not be stored", self.turn_id)
            raise failed("persistence_error", internal_failure(self.turn_id)) from exc
        sample = await record_calibration(  # best effort: never fails the step
            db,
            model_id=entry.id,
            provider_kind=entry.provider.kind,
            counter=memory.counter,
            estimated_input_tokens=prepared.budget.estimated_input_tokens,
            reported_input_tokens=usage.input_tokens,
        )
        if sample is not None:
            self.deps.observability.calibration_sample(entry.id, *sample)
        added = usage_columns(usage)
        finished = model_call_finished(
            index=index, model_id=entry.id, usage=added, budget=prepared.budget
        )
        await events.emit(
            db, self.session_id, "model_call_finished", finished, turn_id=self.turn_id
        )
        return added

    async def finish(self, end: TurnEnded) -> Turn:
        """The step that ends the turn: the last response (if not stored yet), the results of
        its remaining calls and the outcome, in one transaction; the terminal row."""
        if self.sink.dirty and end.response is None:
            await self.sink.clear("turn_ended")
        usage = None
        async with self.step() as (db, events):
            if end.response is not None:
                await self.hold(db)
                await self.draft_stored(db, events)
                # The response and the results of its calls: one batch, as in a tool step.
                results = await self.results(db, events, end.entries)
                usage = await self.store_response(db, events, *end.response, results)
            else:
                # The session's row before the turn's, as every writer of a turn (a reaper or a
                # start taking them the other way round would deadlock with this step).
                await SessionRepository(db).lock(self.session_id)
                # A request sent and not answered (or none).
                await remember(db, self.session_id, self.memory.sent_record)
                if end.entries:
                    results = await self.results(db, events, end.entries)
                    await MessageRepository(db).append(self.session_id, results)
            finished = await TurnRepository(db).finish(
                self.session_id,
                self.turn_id,
                status=end.status,
                outcome=end.outcome(),
                phase="terminal",
                usage=usage,
            )
            if finished is None:
                raise TurnLost
            await events.emit(
                db,
                self.session_id,
                "turn_finished",
                {"status": end.status, "outcome": end.outcome()},
                turn_id=self.turn_id,
            )
        return finished
