"""The turn step as a state machine (spec §6).

A runner (``app.services.turns.runner``) starts in ``Preparing`` (or in ``Calling`` when the
start of a new turn prepared its first call) and applies ``Steps.advance`` until the state is
final::

    Preparing ──▶ Calling ──▶ Recording ──▶ Calling        (the next call, prepared in the step
        ▲            │            │                          that stored the round)
        │            │            ├───────▶ Preparing      (prepared in a step of its own)
        │            │            ├───────▶ ToolsPending   (the caller runs tools; the runner ends)
        │            ▼            ▼
        └─────────  Ended (completed | cancelled | failed: written by ``TurnWrites.finish``)

- ``Preparing``: one step (one transaction): the phase change, the mailbox drain, the
  Conversation read and the World State sample; then the request is built.
- ``Calling``: the model call (after a prune or compaction when the request reaches the
  auto-compact line, spec §7.2; one resubmission after an explicit overflow). Its ``pending``
  is the step that prepared it, still open: it commits as soon as the request is written
  (``app.services.turns.overlap``), and whatever ends the call first commits it before that.
  A response without tool calls ends the turn (stored by the step that ends it).
- ``Recording``: one step stores the response and the round's results, and prepares the next
  call in the same transaction when the round continues at once.

Terminal outcomes found deep inside a transition are raised as ``TurnEnded`` (``failed``);
``advance`` turns them into the ``Ended`` state.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from app.core.compaction.shrink import CompactionNotSmaller, not_installed_detail
from app.core.errors import ServiceError
from app.core.pipeline.prepared_call import PreparedModelCall
from app.providers.base import ModelClient, ModelResponse, ProviderError
from app.services.budget import TurnCallEvidence
from app.services.conversation import tool_surface_of
from app.services.session_context import fit
from app.services.turns.answers import bounded_answer
from app.services.turns.calls import CallEntry, entries_of
from app.services.turns.deps import compactor_of
from app.services.turns.memory import CallMemory
from app.services.turns.model_call import provider_failure
from app.services.turns.outcomes import Stored, TurnEnded, failed
from app.services.turns.overlap import PendingStep, send
from app.services.turns.sampling import Captured, capture
from app.services.turns.tools import DoomRecord, handle_calls
from app.services.turns.transactions import TurnWrites
from app.services.turns.waiting import start_waiting
from app.storage.models import AgentSession

__all__ = [
    "Calling",
    "Ended",
    "Preparing",
    "Recording",
    "State",
    "Steps",
    "ToolsPending",
]


@dataclass(frozen=True, slots=True)
class Preparing:
    """Model call ``index`` is prepared in a step of its own."""

    session: AgentSession
    index: int
    doom: DoomRecord | None


@dataclass(frozen=True, slots=True)
class Calling:
    """Model call ``index`` is ready to send; ``pending``: the step that prepared it, left open
    to commit while the request goes out (``None``: committed already)."""

    session: AgentSession
    index: int
    doom: DoomRecord | None
    prepared: PreparedModelCall
    pending: PendingStep | None = None


@dataclass(frozen=True, slots=True)
class Recording:
    """A response with tool calls (``entries``), to store with its round."""

    session: AgentSession
    index: int
    doom: DoomRecord | None
    stored: Stored
    entries: list[CallEntry]


@dataclass(frozen=True, slots=True)
class ToolsPending:
    """The turn waits for the caller's tool results (stored in phase
    ``waiting_tool_results``): this runner ends, the last result starts the next one."""


@dataclass(frozen=True, slots=True)
class Ended:
    """The turn's outcome, to write (``TurnWrites.finish``)."""

    end: TurnEnded


State = Preparing | Calling | Recording | ToolsPending | Ended


class Steps:
    """The transitions of one runner's turn, over its model ``client``."""

    def __init__(
        self,
        writes: TurnWrites,
        memory: CallMemory,
        client: ModelClient,
        *,
        overlap: bool,
        max_calls: int,
        doom_threshold: int,
    ) -> None:
        self._w = writes
        self._memory = memory
        self._client = client
        self._overlap = overlap
        self._max_calls = max_calls
        self._threshold = doom_threshold

    async def advance(self, state: Preparing | Calling | Recording) -> State:
        try:
            if isinstance(state, Preparing):
                return await self._preparing(state)
            if isinstance(state, Calling):
                return await self._calling(state)
            return await self._recording(state)
        except TurnEnded as end:
            if isinstance(state, Calling) and state.pending is not None:
                # The step that prepared the call comes first (a no-op once the call took it).
                await state.pending.settle()
            return Ended(end)

    # ----- Preparing -------------------------------------------------------------------------

    async def _preparing(self, state: Preparing) -> Calling:
        if state.index > self._max_calls:
            raise failed("max_model_calls", f"maximum model calls exceeded: {self._max_calls}")
        self._w.check_cancel()
        prepared, session = await self._prepare(state.session, state.index, sample_index=1)
        return Calling(session, state.index, state.doom, prepared)

    async def _prepare(
        self, session: AgentSession, index: int, *, sample_index: int | None
    ) -> tuple[PreparedModelCall, AgentSession]:
        """One step: the phase change, the mailbox drain and the World State sample (for
        ``sample_index`` 1; only the sample for 2; neither for ``None``), then the request."""
        w = self._w
        try:
            captured = await capture(w.deps, session) if sample_index is not None else None
            async with w.step() as (db, events):
                session = await w.hold(db)
                if sample_index == 1:
                    await w.set_phase(db, events, "running_model", model_call_index=index)
                loaded = await self._memory.load(db, session, index, sample_index, captured)
        except ServiceError as exc:  # World State capture failed: before any model call
            raise failed(exc.code, exc.detail) from exc
        return self._memory.ready(loaded, session)

    # ----- Calling ---------------------------------------------------------------------------

    async def _calling(self, state: Calling) -> Recording:
        # A cancel posted while the step ran: no model call is started for it.
        self._w.check_cancel()
        response, sent = await self._sample(state)
        response, refused = bounded_answer(
            response, self._memory.model.capabilities, turn_id=self._w.turn_id
        )
        entries = entries_of(response.tool_calls, refused)
        stored = (response, sent, state.index)
        # The response is stored in the step that handles it (its tool round, or the end of
        # the turn): the assistant message comes first in that transaction, and no tool runs
        # unless it is stored — a refused message rolls the whole step back.
        if not entries:
            raise TurnEnded("completed", final_text=response.text, response=stored)
        if self._w.cancel.is_set():
            raise TurnEnded("cancelled", entries=entries, response=stored)
        return Recording(state.session, state.index, state.doom, stored, entries)

    async def _sample(self, state: Calling) -> tuple[ModelResponse, PreparedModelCall]:
        """The response and the request it answered (pruned or compacted when that was
        needed to fit)."""
        prepared, session, index = state.prepared, state.session, state.index
        pending = state.pending
        compacted = False
        if prepared.budget.reaches_auto_compact_limit:
            # Compaction runs transactions of its own: the step before it commits first.
            if pending is not None:
                await pending.settle()
                pending = None
            prepared, compacted = await self._fit(index, prepared, session, "threshold")
        self._check_fits(prepared)
        try:
            return await self._call(prepared, pending), prepared
        except ProviderError as exc:
            safe_overflow = exc.code == "context_overflow" and not exc.semantic_output_received
            if not safe_overflow or compacted or compactor_of(self._w.deps) is None:
                raise failed(*provider_failure(exc)) from exc
        # One resubmission after an explicit overflow with no semantic output (spec §6).
        await self._w.sink.clear("context_overflow")
        prepared, _ = await self._fit(index, prepared, session, "overflow")
        self._check_fits(prepared)
        try:
            return await self._call(prepared, None), prepared
        except ProviderError as exc:
            raise failed(*provider_failure(exc)) from exc

    async def _call(
        self, prepared: PreparedModelCall, pending: PendingStep | None
    ) -> ModelResponse:
        # Sent from here on: the next request is measured against it, and the step that
        # stores this call's response (or ends the turn) writes its record.
        self._memory.sent(prepared)
        w = self._w
        return await send(
            self._client,
            prepared,
            pending,
            w.sink,
            w.cancel,
            prompt_caching=self._memory.model.capabilities.prompt_caching,
            seed=w.session_id,
        )

    def _check_fits(self, prepared: PreparedModelCall) -> None:
        budget = prepared.budget
        if budget.estimated_input_tokens > budget.effective_input_tokens:
            raise failed(
                "context_budget_exceeded",
                f"the request needs {budget.estimated_input_tokens} input tokens but the model "
                f"accepts {budget.effective_input_tokens}; compact the session or use a model "
                "with a larger window",
            )

    async def _fit(
        self, index: int, prepared: PreparedModelCall, session: AgentSession, trigger: str
    ) -> tuple[PreparedModelCall, bool]:
        """``fit`` (spec §7.2): the request to send and whether a compaction ran (or was tried
        and not installed)."""
        compactor = compactor_of(self._w.deps)
        if compactor is None:
            return prepared, False

        async def again(sample_index: int | None) -> PreparedModelCall:
            return (await self._prepare(session, index, sample_index=sample_index))[0]

        fitted = await fit(
            prepared,
            prune=lambda: compactor.prune(self._w.session_id),
            compact=lambda request: self._compact(index, trigger, request),
            again=again,
        )
        if fitted.refused is not None:
            # Not installed (spec §9): on with the request as it was, if the model takes it.
            budget = fitted.prepared.budget
            if trigger == "overflow" or budget.estimated_input_tokens > (
                budget.effective_input_tokens
            ):
                raise failed("compaction_error", not_installed_detail(fitted.refused, budget))
        return fitted.prepared, fitted.compacted

    async def _compact(
        self, index: int, trigger: str, prepared: PreparedModelCall
    ) -> CompactionNotSmaller | None:
        """Compact in the turn; the refusal when the summary would not shrink anything."""
        w = self._w
        compactor = compactor_of(w.deps)
        assert compactor is not None
        # The compaction service announces compaction_started/finished itself.
        await w.phase_step("compacting")
        evidence = TurnCallEvidence(prepared.budget, model_call_index=index)
        try:
            await compactor.compact_in_turn(
                w.session_id,
                trigger=trigger,  # type: ignore[arg-type]
                turn_id=w.turn_id,
                evidence=evidence,
            )
        except CompactionNotSmaller as refused:
            await w.phase_step("running_model")
            return refused
        except ServiceError as exc:
            raise failed(
                "compaction_error", f"conversation compaction failed: {exc.detail}"
            ) from exc
        await w.phase_step("running_model")
        return None

    # ----- Recording -------------------------------------------------------------------------

    async def _recording(self, state: Recording) -> Calling | Preparing | ToolsPending:
        """The step of a response with tool calls: the response is stored, the round handled,
        and when it continues and a next call is allowed, that call is prepared in the same
        step (``Calling``; else ``Preparing`` it separately)."""
        following = state.index + 1 if state.index < self._max_calls else None
        failure: ServiceError | None = None
        captured = None
        if following is not None:
            try:
                captured = await capture(self._w.deps, state.session)
            except ServiceError as exc:  # reported once the round is stored, as before
                failure, following = exc, None
        phase = self._w.phase
        try:
            next_state = await self._round(state, following, captured)
        except ServiceError:
            if following is None:
                raise
            # Preparing the next call failed (World State) and took the round down with it:
            # run the round as a step of its own; the separate preparation reports the error.
            for entry in state.entries:
                entry.update(result=None, caller=False)
                entry.pop("doom", None)
            self._w.phase = phase
            next_state = await self._round(state, None, None)
        if failure is not None and isinstance(next_state, Preparing):
            self._w.check_cancel()
            raise failed(failure.code, failure.detail) from failure
        return next_state

    async def _round(
        self, state: Recording, following: int | None, captured: Captured | None
    ) -> Calling | Preparing | ToolsPending:
        w, entries = self._w, state.entries
        loaded = pending = None
        async with AsyncExitStack() as stack:
            db, events = await stack.enter_async_context(w.step())
            fresh = await w.hold(db)
            await w.draft_stored(db, events)
            await w.announce_phase(db, events, "running_tools")
            round_ = await handle_calls(
                db,
                events,
                session_id=w.session_id,
                turn_id=w.turn_id,
                entries=entries,
                tools=tool_surface_of(state.session),
                doom=state.doom,
                doom_threshold=self._threshold,
            )
            results = []
            if round_.next == "continue":
                results = await w.results(db, events, entries)
            # The response and its results are one batch, stored before anything else of the
            # round takes effect: all of it is in this transaction, which a refused message
            # rolls back (tools never take effect without their assistant message).
            usage = await w.store_response(db, events, *state.stored, results)
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
                await w.set_phase(db, events, "waiting_tool_results", **values)
                await start_waiting(w.deps, db, fresh, w.turn_id)
            elif round_.next == "continue" and following is not None:
                await w.set_phase(db, events, "running_model", model_call_index=following, **values)
                loaded = await self._memory.load(db, fresh, following, 1, captured)
            else:  # continued later, or a doom loop (the turn then fails): phase running_tools
                await w.set_phase(db, events, "running_tools", **values)
            if loaded is not None and self._overlap:
                # Left open: committed while the next call is sent (``Calling.pending``).
                pending = PendingStep(stack.pop_all())
        if pending is None:
            w.sink.dirty = False
        if round_.next == "doom_loop":
            raise failed("doom_loop", round_.message, entries)
        if round_.next == "wait":
            return ToolsPending()
        if loaded is None:
            return Preparing(state.session, state.index + 1, round_.doom)
        if pending is not None:
            sink = w.sink
            pending.after.append(lambda: setattr(sink, "dirty", False))
        try:
            prepared, session = self._memory.ready(loaded, fresh, pending)
        except BaseException:
            if pending is not None:  # the step is stored all the same, then the turn ends
                await pending.settle()
            raise
        return Calling(session, state.index + 1, round_.doom, prepared, pending)
