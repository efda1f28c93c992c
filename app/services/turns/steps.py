"""The state of a turn's runner and the steps every part of the loop takes (spec §6).

``RunnerSteps`` holds what a runner knows between steps (model, counter, phase, the last
Conversation read, the last request sent) and the transactions it is made of: a step with its
live updates, the phase change, storing a model response with its round's results, and the
step that ends the turn. ``TurnRunner`` (``runner``) is the loop built on them.
"""

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.caching.breakpoints import plan_for
from app.core.caching.prefix_record import RecordBasis
from app.core.counting import TokenCounter
from app.core.errors import Conflict, ServiceError
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import PreparedModelCall
from app.providers.base import ModelClient, ModelResponse
from app.services.calibration import record_calibration
from app.services.conversation import system_context_of, tool_surface_of, watermark_of
from app.services.conversation_cache import ConversationCache
from app.services.events import EventBatch
from app.services.messages import exact_counts
from app.services.model_types import ModelEntry
from app.services.request_prefix import prefixed_extending, remember, rewind_of
from app.services.tokens import CountedConversation
from app.services.turns.calls import CallEntry, result_messages
from app.services.turns.control import cancel_waiting_or_flag
from app.services.turns.deps import TurnDeps
from app.services.turns.loading import Loaded, shared
from app.services.turns.model_call import CallAbandoned, LiveSink, call_model
from app.services.turns.outcomes import Ready, TurnEnded, TurnLost, failed, internal_failure
from app.services.turns.overlap import PendingStep, overlapped
from app.services.turns.start import Started
from app.services.turns.tools import DoomRecord
from app.services.turns.usage import model_call_finished, usage_columns
from app.storage.database import unit_of_work
from app.storage.deferred import defer
from app.storage.models import AgentSession, Turn
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.records import NewMessage
from app.storage.repositories.sessions import SessionRepository
from app.storage.repositories.turns import TurnRepository

__all__ = ["RunnerSteps"]

logger = logging.getLogger(__name__)


class RunnerSteps:
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
        self.deps = deps
        self.session_id = session_id
        self.turn_id = turn_id
        self.doom = doom
        # The start that created the turn in this process: what it read need not be read again.
        self.started = started
        # The terminal row this runner wrote (a waiter in this process need not read it back).
        self.final: Turn | None = None
        # Earlier turns' reads of the Conversation, shared by the runners of this process.
        self.conversations = conversations or ConversationCache(max_bytes=0)
        self.cancel = asyncio.Event()
        self.phase: str | None = None
        self.sink = LiveSink(deps, session_id, turn_id)
        # Replaced by the session model's counter once the turn is loaded.
        self.counter: TokenCounter = deps.counter("estimate")
        self.entry: ModelEntry | None = None
        # The active Conversation as of the last committed step (extended, not re-read).
        self.conversation: CountedConversation | None = None
        # The prefix record of the session's last request sent (read once, by the first step
        # that loads a call, then kept: no other request of the session is sent meanwhile), and
        # whether it was read yet. Every sent request's record is written by the step that
        # stores its response (or ends the turn): no transaction of its own.
        self.sent_record: bytes | None = None
        self.sent_record_known = False
        # The last request prepared and what its record was built from: the next call's
        # prepare and record take what they share with them instead of building it again.
        self.last_prepared: PreparedModelCall | None = None
        self.record_basis: RecordBasis | None = None
        # Whether this turn's model client says when a request is written, and the step that
        # commits while the next call is sent (``app.services.turns.overlap``).
        self.overlap = False
        # A new turn's start may leave its transaction for this runner to commit (``Started``).
        self.pending: PendingStep | None = started.pending if started is not None else None

    async def _finish(self, end: TurnEnded) -> None:
        try:
            await self._finish_step(end)
        except TurnEnded as failure:  # storing the last response failed: its step rolled back
            await self._finish(failure)
        except TurnLost:
            logger.info("turn %s was already terminal", self.turn_id)
        except Exception:
            # The lease runs out and the reaper interrupts the turn: nothing is left running.
            logger.exception("turn %s could not be finished", self.turn_id)

    async def _finish_step(self, end: TurnEnded) -> None:
        """The last response (if not stored yet), the results of its remaining calls and the
        outcome, in one transaction."""
        if self.sink.dirty and end.response is None:
            await self.sink.clear("turn_ended")
        usage = None
        async with self._step() as (db, events):
            if end.response is not None:
                await self._hold(db)
                await self._draft_stored(db, events)
                # The response and the results of its calls: one batch, as in a tool step.
                results = await self._results(db, events, end.entries)
                usage = await self._store_response(db, events, *end.response, results)
            else:
                # The session's row before the turn's, as every writer of a turn (a reaper or a
                # start taking them the other way round would deadlock with this step).
                await SessionRepository(db).lock(self.session_id)
                await self._remember_sent(db)  # a request sent and not answered (or none)
                if end.entries:
                    results = await self._results(db, events, end.entries)
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
        self.final = finished

    async def _cancel_if_requested(self) -> None:
        """After the step that parked the turn: a cancel that step saw (posted meanwhile, maybe
        to another replica, which only flagged it for this runner) ends the turn here, as a
        cancel of a waiting turn does; no runner would look at the flag again."""
        if not self.cancel.is_set():
            return
        try:
            await cancel_waiting_or_flag(self.deps, self.session_id, self.turn_id)
        except Conflict:  # ended elsewhere meanwhile
            logger.info("turn %s was already terminal", self.turn_id)

    def _check_cancel(self, entries: list[CallEntry] | None = None) -> None:
        if self.cancel.is_set():
            raise TurnEnded("cancelled", entries=entries or [])

    @asynccontextmanager
    async def _step(self) -> AsyncIterator[tuple[AsyncSession, EventBatch]]:
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

    async def _hold(self, db: AsyncSession) -> AgentSession:
        """The session row, locked for the step; its sequence counters are written once."""
        sessions = SessionRepository(db)
        session = await sessions.require(self.session_id, for_update=True)
        sessions.defer_counters(session)
        return session

    async def _set_phase(
        self, db: AsyncSession, events: EventBatch, phase: str, **values: Any
    ) -> None:
        await TurnRepository(db).advance_running(
            self.session_id, self.turn_id, self._still_running, phase=phase, **values
        )
        await self._announce_phase(db, events, phase)

    def _still_running(self, cancel_requested: bool | None) -> None:
        """What the turn's UPDATE found (it may run at the step's commit: the step defers its
        writes): rolls the step back when the turn is no longer running."""
        if cancel_requested is None:
            raise TurnLost
        if cancel_requested:  # posted to another replica; the watcher may not have seen it
            self.cancel.set()

    async def _announce_phase(self, db: AsyncSession, events: EventBatch, phase: str) -> None:
        if phase != self.phase:
            await events.emit(
                db, self.session_id, "phase_changed", {"phase": phase}, turn_id=self.turn_id
            )
            self.phase = phase

    async def _phase_step(self, phase: str) -> None:
        async with self._step() as (db, events):
            await SessionRepository(db).lock(self.session_id)
            await self._set_phase(db, events, phase)

    async def _remember_sent(self, db: AsyncSession) -> None:
        """Inside a step: the last sent request's record as the session's previous request."""
        await remember(db, self.session_id, self.sent_record)

    async def _results(
        self, db: AsyncSession, events: EventBatch, entries: list[CallEntry]
    ) -> list[NewMessage]:
        """The round's tool messages, in call order (``result_messages``)."""
        return await result_messages(
            db,
            events,
            self.counter,
            session_id=self.session_id,
            turn_id=self.turn_id,
            entries=entries,
        )

    async def _draft_stored(self, db: AsyncSession, events: EventBatch) -> None:
        # Announced first in the step that stores the response (the batch keeps the order).
        await events.emit(
            db,
            self.session_id,
            "draft_cleared",
            {"reason": "assistant_message_stored"},
            turn_id=self.turn_id,
        )

    async def _store_response(
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
        assert self.entry is not None
        await self._remember_sent(db)
        content = response.assistant_content()
        usage = response.usage
        assistant = NewMessage(
            role="assistant",
            kind="normal",
            content=content,
            turn_id=self.turn_id,
            token_counts=exact_counts(self.counter, "assistant", content),
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
            model_id=self.entry.id,
            provider_kind=self.entry.provider.kind,
            counter=self.counter,
            estimated_input_tokens=prepared.budget.estimated_input_tokens,
            reported_input_tokens=usage.input_tokens,
        )
        if sample is not None:
            self.deps.observability.calibration_sample(self.entry.id, *sample)
        added = usage_columns(usage)
        finished = model_call_finished(
            index=index, model_id=self.entry.id, usage=added, budget=prepared.budget
        )
        await events.emit(
            db, self.session_id, "model_call_finished", finished, turn_id=self.turn_id
        )
        return added

    def _check_fits(self, prepared: PreparedModelCall) -> None:
        budget = prepared.budget
        if budget.estimated_input_tokens > budget.effective_input_tokens:
            raise failed(
                "context_budget_exceeded",
                f"the request needs {budget.estimated_input_tokens} input tokens but the model "
                f"accepts {budget.effective_input_tokens}; compact the session or use a model "
                "with a larger window",
            )

    async def _call(self, client: ModelClient, prepared: PreparedModelCall) -> ModelResponse:
        assert self.entry is not None
        caching = plan_for(
            prepared,
            prompt_caching=self.entry.capabilities.prompt_caching,
            seed=self.session_id,
            stable_messages=prepared.stable_messages,
        )
        # Sent from here on: the next request is measured against it, and the step that
        # stores this call's response (or ends the turn) writes its record.
        self.sent_record = prepared.prefix_record
        pending, self.pending = self.pending, None
        try:
            if pending is None:
                return await call_model(
                    client, prepared.request, self.sink, self.cancel, caching, prepared.items
                )
            return await overlapped(
                pending,
                self.sink,
                lambda: call_model(
                    client, prepared.request, self.sink, self.cancel, caching, prepared.items
                ),
            )
        except CallAbandoned:
            raise TurnEnded("cancelled") from None

    async def settle(self) -> None:
        """Commit the step still pending (``overlap``), if any."""
        pending, self.pending = self.pending, None
        if pending is not None:
            await pending.commit()

    def _ready(
        self, loaded: Loaded, session: AgentSession, pending: PendingStep | None = None
    ) -> Ready:
        """Keep the Conversation the step read (in this process's cache once the step has
        committed: now, or when ``pending`` commits), and build the request."""
        counted, items = loaded
        self.conversation = counted
        if shared(self.counter):
            name = self.counter.name
            if pending is None:
                self.conversations.put(session, name, counted)
            else:
                pending.after.append(lambda: self.conversations.put(session, name, counted))
        return self._prepared(session, items, counted), session

    def _prepared(
        self, session: AgentSession, items: list[Any], counted: CountedConversation
    ) -> PreparedModelCall:
        assert self.entry is not None
        try:
            with self.deps.observability.prepare("turn") as timed:
                prepared = prepare(
                    system_context_of(session),
                    items,
                    tool_surface_of(session),
                    self.entry.capabilities,
                    watermark_of(session),
                    self.counter,
                    extends=self.last_prepared,
                )
                # Against the last request sent (a re-preparation too: it replaces one that
                # was never sent).
                prepared, self.record_basis = prefixed_extending(
                    prepared,
                    items,
                    self.sent_record,
                    self.record_basis,
                    identify_stored=True,
                    rewind_compaction_id=rewind_of(counted.active),
                )
                timed.budget(prepared.budget)
            self.last_prepared = prepared
            return prepared
        except ServiceError as exc:  # e.g. data_blocks_not_accepted: the request cannot be built
            raise failed(exc.code, exc.detail) from exc
