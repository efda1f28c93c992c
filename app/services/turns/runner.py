"""The agent loop of one turn (spec §6).

A runner lives in the process that holds the turn's lease, as an asyncio task. It runs model
calls until the turn ends or waits for the caller's tool results; waiting ends the task (and
releases the lease), and the process that receives the last result starts a new runner that
continues with the next model call. Every state change is one transaction with the live
update it announces. Terminal outcomes are raised as ``TurnEnded`` and written by ``finish``.
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from typing import Any, Literal

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.compaction.shrink import CompactionNotSmaller, not_installed_detail
from app.core.counting import TokenCounter
from app.core.errors import ServiceError
from app.core.pipeline.prepared_call import PreparedModelCall
from app.providers.base import ModelClient, ModelResponse, ProviderError
from app.services.conversation import tool_surface_of
from app.services.model_types import ModelEntry
from app.services.models import resolve_model
from app.services.request_prefix import stored_previous
from app.services.session_config import agent_int
from app.services.turns.answers import bounded_answer
from app.services.turns.calls import CallEntry, entries_of
from app.services.turns.deps import compactor_of
from app.services.turns.loading import Loaded, load_call, shared, turn_counter
from app.services.turns.model_call import provider_failure
from app.services.turns.outcomes import (
    Ready,
    Stored,
    TurnEnded,
    TurnLost,
    failed,
    internal_failure,
)
from app.services.turns.overlap import PendingStep, signals_sent
from app.services.turns.sampling import Captured, capture
from app.services.turns.steps import RunnerSteps
from app.services.turns.tools import handle_calls
from app.services.turns.waiting import start_waiting
from app.storage.database import unit_of_work
from app.storage.models import AgentSession
from app.storage.repositories.sessions import SessionRepository
from app.storage.repositories.turns import TurnRepository

__all__ = ["TurnEnded", "TurnLost", "TurnRunner"]

logger = logging.getLogger(__name__)


class TurnRunner(RunnerSteps):
    # ----- entry point -----------------------------------------------------------------------

    async def run(self) -> None:
        try:
            try:
                await self._loop()
            except BaseException:
                # A step still to commit (``overlap``) comes first: all that ended the loop
                # (the process stopping too) happened after it.
                await self.settle()
                raise
        except TurnEnded as end:
            await self._finish(end)
        except TurnLost:
            logger.info("turn %s ended elsewhere; runner stops", self.turn_id)
        except Exception:  # never leave a turn running because of a bug or a dead DB
            logger.exception("turn %s runner failed", self.turn_id)
            await self._finish(failed("persistence_error", internal_failure(self.turn_id)))

    # ----- the loop --------------------------------------------------------------------------

    async def _load_turn(self) -> tuple[AgentSession, int, Ready | None]:
        """The session, the index of the last model call and the first call when the start
        prepared it; sets the model, counter, phase and cancel flag from the stored turn (or
        from the start that created it)."""
        started = self.started
        if started is not None and started.model is not None:
            # A new turn: running, no model call yet; a cancel posted since is seen by the
            # first phase update (or, when the start prepared the first call, by the runner's
            # cancel flag, which is set directly in this process).
            session, entry, first = started.session, started.model, started.first
            self.entry = entry
            self.phase = started.turn.phase
            if first is not None:
                self.counter = first.counter
                self.sent_record, self.sent_record_known = first.previous_request, True
                # ``self.pending``: the start's transaction, when left open (committed as the
                # first call is sent).
                return session, 1, self._ready(first.loaded, session, started.pending)
            self.counter = self._base(entry)
            if self.deps.settings.apply_calibration:
                async with unit_of_work(self.deps.db, read_only=True) as db:
                    self.counter = await turn_counter(self.deps, db, entry)
            return session, 0, None
        async with unit_of_work(self.deps.db, read_only=True) as db:
            turn = await TurnRepository(db).get(self.session_id, self.turn_id)
            if turn is None or turn.status != "running":
                raise TurnLost
            session = await SessionRepository(db).require(self.session_id)
            entry = await resolve_model(db, session.model_id, session.tenant_id)
            self.counter = await turn_counter(self.deps, db, entry)
        self.phase, index = turn.phase, turn.model_call_index
        if turn.cancel_requested:
            self.cancel.set()
        self.entry = entry
        return session, index, None

    def _base(self, entry: ModelEntry) -> TokenCounter:
        return self.deps.counter(entry.capabilities.token_counter)

    async def _loop(self) -> None:
        session, index, ready = await self._load_turn()
        assert self.entry is not None
        client = self.deps.model_clients.for_model(self.entry, session_id=self.session_id)
        self.overlap = signals_sent(client)
        try:
            max_calls = agent_int(session, "max_model_calls", 20)
            threshold = agent_int(session, "doom_loop_threshold", 3)
        except ServiceError as exc:  # a stored row this version never writes
            raise failed(exc.code, exc.detail) from exc
        while True:
            if ready is None:
                if index >= max_calls:
                    raise failed("max_model_calls", f"maximum model calls exceeded: {max_calls}")
                index += 1
                self._check_cancel()
                ready = await self._prepare(session, index, sample_index=1)
            prepared, session = ready
            # A cancel posted while the step ran: no model call is started for it.
            self._check_cancel()
            response, sent = await self._sample_model(client, index, prepared, session)
            response, refused = bounded_answer(
                response, self.entry.capabilities, turn_id=self.turn_id
            )
            entries = entries_of(response.tool_calls, refused)
            stored = (response, sent, index)
            # The response is stored in the step that handles it (its tool round, or the end of
            # the turn): the assistant message comes first in that transaction, and no tool
            # runs unless it is stored — a refused message rolls the whole step back.
            if not entries:
                raise TurnEnded("completed", final_text=response.text, response=stored)
            if self.cancel.is_set():
                raise TurnEnded("cancelled", entries=entries, response=stored)
            following = index + 1 if index < max_calls else None
            outcome = await self._run_tools(session, entries, threshold, following, stored)
            if outcome == "wait":
                await self._cancel_if_requested()
                return
            ready = outcome
            if ready is not None:
                index += 1

    async def _prepare(
        self, session: AgentSession, index: int, *, sample_index: int | None
    ) -> Ready:
        """One step: the phase change, the mailbox drain and the World State sample (for
        ``sample_index`` 1; only the sample for 2; neither for ``None``), then the request."""
        try:
            captured = await capture(self.deps, session) if sample_index is not None else None
            async with self._step() as (db, events):
                session = await self._hold(db)
                if sample_index == 1:
                    await self._set_phase(db, events, "running_model", model_call_index=index)
                loaded = await self._load(db, session, index, sample_index, captured)
        except ServiceError as exc:  # World State capture failed: before any model call
            raise failed(exc.code, exc.detail) from exc
        return self._ready(loaded, session)

    async def _load(
        self,
        db: AsyncSession,
        session: AgentSession,
        index: int,
        sample_index: int | None,
        captured: Captured | None,
    ) -> Loaded:
        """Inside a step: ``load_call`` from this runner's (or this process's) last read."""
        previous = self.conversation
        if previous is None and shared(self.counter):
            previous = self.conversations.get(session, self.counter.name)
        if not self.sent_record_known:
            self.sent_record = await stored_previous(db, self.session_id)
            self.sent_record_known = True
        return await load_call(
            self.deps,
            db,
            session,
            self.counter,
            turn_id=self.turn_id,
            index=index,
            sample_index=sample_index,
            captured=captured,
            previous=previous,
        )

    async def _compact(
        self, index: int, trigger: str, prepared: PreparedModelCall
    ) -> CompactionNotSmaller | None:
        """Compact in the turn; the refusal when the summary would not shrink anything."""
        compactor = compactor_of(self.deps)
        assert compactor is not None
        # The compaction service announces compaction_started/finished itself.
        await self._phase_step("compacting")
        evidence = {
            "context_window_tokens": prepared.budget.context_window_tokens,
            "estimated_input_tokens": prepared.budget.estimated_input_tokens,
            "model_call_index": index,
        }
        try:
            await compactor.compact_in_turn(
                self.session_id,
                trigger=trigger,  # type: ignore[arg-type]
                turn_id=self.turn_id,
                evidence=evidence,
            )
        except CompactionNotSmaller as refused:
            await self._phase_step("running_model")
            return refused
        except ServiceError as exc:
            raise failed(
                "compaction_error", f"conversation compaction failed: {exc.detail}"
            ) from exc
        await self._phase_step("running_model")
        return None

    async def _fit(
        self, index: int, prepared: PreparedModelCall, session: AgentSession, trigger: str
    ) -> tuple[PreparedModelCall, bool]:
        """Prune, and if still over the line, compact and re-sample (spec §7.2); returns the
        request to send and whether a compaction ran (or was tried and not installed)."""
        compactor = compactor_of(self.deps)
        if compactor is None:
            return prepared, False
        if await compactor.prune(self.session_id):
            prepared, _ = await self._prepare(session, index, sample_index=None)
            if not prepared.budget.reaches_auto_compact_limit:
                return prepared, False
        refused = await self._compact(index, trigger, prepared)
        if refused is not None:
            # Not installed (spec §9): on with the request as it was, if the model takes it.
            budget = prepared.budget
            if trigger == "overflow" or budget.estimated_input_tokens > (
                budget.effective_input_tokens
            ):
                raise failed("compaction_error", not_installed_detail(refused, budget))
            return prepared, True
        prepared, _ = await self._prepare(session, index, sample_index=2)
        return prepared, True

    async def _sample_model(
        self,
        client: ModelClient,
        index: int,
        prepared: PreparedModelCall,
        session: AgentSession,
    ) -> tuple[ModelResponse, PreparedModelCall]:
        """The response and the request it answered (pruned or compacted when that was
        needed to fit)."""
        compacted = False
        if prepared.budget.reaches_auto_compact_limit:
            await self.settle()
            prepared, compacted = await self._fit(index, prepared, session, "threshold")
        self._check_fits(prepared)
        try:
            return await self._call(client, prepared), prepared
        except ProviderError as exc:
            safe_overflow = exc.code == "context_overflow" and not exc.semantic_output_received
            if not safe_overflow or compacted or compactor_of(self.deps) is None:
                raise failed(*provider_failure(exc)) from exc
        # One resubmission after an explicit overflow with no semantic output (spec §6).
        await self.sink.clear("context_overflow")
        prepared, _ = await self._fit(index, prepared, session, "overflow")
        self._check_fits(prepared)
        try:
            return await self._call(client, prepared), prepared
        except ProviderError as exc:
            raise failed(*provider_failure(exc)) from exc

    async def _run_tools(
        self,
        session: AgentSession,
        entries: list[CallEntry],
        threshold: int,
        following: int | None,
        stored: Stored,
    ) -> Ready | Literal["wait"] | None:
        """The step of a response with tool calls: the response is stored, the round handled,
        and when it continues and ``following`` (the next call's index) is given, the next call
        is prepared in the same step and returned (``None``: prepare it separately)."""
        failure: ServiceError | None = None
        captured = None
        if following is not None:
            try:
                captured = await capture(self.deps, session)
            except ServiceError as exc:  # reported once the round is stored, as before
                failure, following = exc, None
        doom, phase = self.doom, self.phase
        try:
            outcome = await self._tools_step(
                session, entries, threshold, following, captured, stored
            )
        except ServiceError:
            if following is None:
                raise
            # Preparing the next call failed (World State) and took the round down with it:
            # run the round as a step of its own; the separate preparation reports the error.
            for entry in entries:
                entry.update(result=None, caller=False)
                entry.pop("doom", None)
            self.doom, self.phase = doom, phase
            outcome = await self._tools_step(session, entries, threshold, None, None, stored)
        if failure is not None and outcome is None:
            self._check_cancel()
            raise failed(failure.code, failure.detail) from failure
        return outcome

    async def _tools_step(
        self,
        session: AgentSession,
        entries: list[CallEntry],
        threshold: int,
        following: int | None,
        captured: Captured | None,
        stored: Stored,
    ) -> Ready | Literal["wait"] | None:
        loaded = pending = None
        async with AsyncExitStack() as stack:
            db, events = await stack.enter_async_context(self._step())
            fresh = await self._hold(db)
            await self._draft_stored(db, events)
            await self._announce_phase(db, events, "running_tools")
            round_ = await handle_calls(
                db,
                events,
                session_id=self.session_id,
                turn_id=self.turn_id,
                entries=entries,
                tools=tool_surface_of(session),
                doom=self.doom,
                doom_threshold=threshold,
            )
            self.doom = round_.doom
            results = []
            if round_.next == "continue":
                results = await self._results(db, events, entries)
            # The response and its results are one batch, stored before anything else of the
            # round takes effect: all of it is in this transaction, which a refused message
            # rolls back (tools never take effect without their assistant message).
            usage = await self._store_response(db, events, *stored, results)
            # The turn row is written once, by the UPDATE that ends the step (with the phase the
            # round leads to, the usage and the plan); that UPDATE also checks that the turn is
            # still ours — a lost turn rolls the whole step back.
            values: dict[str, Any] = {"usage": usage}
            if round_.plan is not None:
                values["plan"] = round_.plan
            if round_.next == "wait":
                # No process works on a waiting turn: it holds no lease, and ends at its
                # deadline for the results instead (``waiting``).
                values.update(pending_tool_calls=entries, release_lease=True)
                await self._set_phase(db, events, "waiting_tool_results", **values)
                await start_waiting(self.deps, db, fresh, self.turn_id)
            elif round_.next == "continue" and following is not None:
                await self._set_phase(
                    db, events, "running_model", model_call_index=following, **values
                )
                loaded = await self._load(db, fresh, following, 1, captured)
            else:  # continued later, or a doom loop (the turn then fails): phase running_tools
                await self._set_phase(db, events, "running_tools", **values)
            if loaded is not None and self.overlap:
                # Committed while the next call is sent (``overlap``).
                pending = PendingStep(stack.pop_all())
        if pending is None:
            self.sink.dirty = False
        if round_.next == "doom_loop":
            raise failed("doom_loop", round_.message, entries)
        if round_.next == "wait":
            return "wait"
        if loaded is None:
            return None
        if pending is not None:
            sink = self.sink
            pending.after.append(lambda: setattr(sink, "dirty", False))
            self.pending = pending
        return self._ready(loaded, fresh, pending)
