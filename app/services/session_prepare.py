"""Session prepare (``POST /v1/sessions/{id}/prepare``): the next request for a caller that runs
its own model.

Unlike context inspection this *does* what a turn's model call would do before calling the
model: it samples World State into the session (stored), then prepares the active Conversation.
The sampling ids use a request id ``prepare-<uuid32>`` in the place of a turn id, with model
call index 1 and sample index 1 (2 for the re-sampling after a compaction): every request is its
own "model call", there is no turn row, and a retried request (a new id) still sends nothing
twice because the baselines make an unchanged world silent. A compaction it triggers names that
request id (``trigger_prepare_id``), never as a turn.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.compaction.shrink import CompactionNotSmaller, not_installed_detail
from app.core.content import Item, RealOrigin
from app.core.counting import TokenCounter
from app.core.errors import TooLarge
from app.core.pipeline.prepared_call import PreparedModelCall
from app.core.world_state import WorkspaceInputs
from app.services.budget import TurnCallEvidence
from app.services.calibration import calibrated_counter
from app.services.compaction.source import require_idle
from app.services.conversation_cache import ConversationCache
from app.services.events import EventEmitter, messages_appended
from app.services.model_types import ModelEntry
from app.services.models import resolve_model
from app.services.ports import TurnCompactor
from app.services.request_prefix import remember, stored_previous
from app.services.session_config import workspace_of
from app.services.session_context import SessionContext, fit
from app.services.tokens import CountedConversation
from app.services.world_state import WorldStateSampler
from app.storage.database import SessionFactory, on_commit, unit_of_work
from app.storage.models import AgentSession
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.sessions import SessionRepository

__all__ = ["FirstPrepare", "PreparedSessionCall", "SessionPrepareService"]


@dataclass(frozen=True, slots=True)
class PreparedSessionCall:
    """A session's next request as ``SessionPrepareService.prepare_call`` left it."""

    prepared: PreparedModelCall
    model: ModelEntry
    # World State messages this prepare stored (in order).
    world_state_message_ids: list[str]
    # A compaction was installed on the way (the trigger line was reached).
    compacted: bool


@dataclass(frozen=True, slots=True)
class Preread:
    """What the first step of a prepare reads of the session besides its messages (no turn
    running; the record of the session's previous request), read by a caller before it writes
    (``SessionPrepareService.preread``), so that its transaction's writes, queued
    (``app.storage.deferred``), go out together at its commit instead of before these reads."""

    previous: bytes | None


# A session made in the caller's very transaction: no turn, no previous request.
NEW_SESSION = Preread(None)


@dataclass(frozen=True, slots=True)
class _Sampled:
    prepared: PreparedModelCall
    message_ids: list[str]
    # The record of the session's previous request, as the first step of this one read it:
    # every re-preparation (after a pruning or a compaction) is measured against it.
    previous: bytes | None


@dataclass(frozen=True, slots=True)
class FirstPrepare:
    """A request's first step (sampled and prepared, its record kept), for ``finish``."""

    request_id: str
    sampled: _Sampled


class SessionPrepareService:
    def __init__(
        self,
        db: SessionFactory,
        counters: Callable[[str], TokenCounter],
        world_state: WorldStateSampler,
        compactor: Callable[[], TurnCompactor | None],
        events: EventEmitter,
        conversations: ConversationCache | None = None,
        *,
        apply_calibration: bool = False,
    ) -> None:
        self._db = db
        self._counters = counters
        self._world_state = world_state
        # A getter: the compaction service registers itself on the container after us.
        self._compactor = compactor
        self._events = events
        self._conversations = conversations or ConversationCache(0)
        self._apply_calibration = apply_calibration

    async def prepare_call(
        self, session_id: str, model: ModelEntry | None = None
    ) -> PreparedSessionCall:
        """Sample World State (stored), prepare, and compact when the trigger line is reached:
        the prepared call itself, for the route to render (``app/api/render/prepare.py``) or a
        caller in this process to send (the compatible endpoints, ``app.services.proxy``).
        ``model``: the session's model as the caller already resolved it (one transaction
        fewer)."""
        request_id = f"prepare-{uuid.uuid4().hex}"
        if model is None:
            async with unit_of_work(self._db, read_only=True) as db:
                session = await SessionRepository(db).require(session_id)
                model = await resolve_model(db, session.model_id, session.tenant_id)
        sampled = await self._sample_and_prepare(session_id, model, request_id, 1, None)
        return await self.finish(session_id, model, FirstPrepare(request_id, sampled))

    async def preread(self, db: AsyncSession, session: AgentSession) -> Preread | None:
        """``Preread`` of ``session`` (locked in ``db``'s write transaction), for ``first_in``;
        ``None`` (nothing read) when ``first_in`` will not prepare in that transaction."""
        if not _captures_in_memory(session):
            return None
        await require_idle(db, session.id, _ACTION)
        return Preread(await stored_previous(db, session.id))

    async def first_in(
        self,
        db: AsyncSession,
        session: AgentSession,
        model: ModelEntry,
        preread: Preread | None = None,
    ) -> FirstPrepare | None:
        """The first step of ``prepare_call`` (sample, prepare, keep the request's prefix
        record) in the caller's write transaction, which holds the session's lock and loaded
        ``session`` in it; ``finish`` does the rest once it committed. ``None`` when the session's
        World State reads files (a workspace directory): that read holds no lock, so the caller
        commits first and calls ``prepare_call``."""
        if not _captures_in_memory(session):
            return None
        request_id = f"prepare-{uuid.uuid4().hex}"
        counter = await self._counter(db, model)
        inputs = await self._world_state.capture(session)
        sampled, context, counted = await self._prepare_in(
            db, session, model, counter, inputs, request_id, 1, None, preread
        )
        # Committed: the next prepare decodes only what was stored since.
        on_commit(db, lambda: context.remember(counted))
        return FirstPrepare(request_id, sampled)

    async def extend_in(
        self, db: AsyncSession, session: AgentSession, counter: TokenCounter
    ) -> None:
        """The caller appended to ``session`` (loaded under its lock in ``db``'s write
        transaction) right after the Conversation this process last read of it: that read is
        extended with the appended rows once ``db`` commits, so the session's next prepare does
        not read them back (the drop-in endpoints' answer, stored after the response, is read
        by the next call's transaction otherwise). Nothing when that would take a query."""
        context = self._conversations.context_for(session, counter)
        counted = context.conversation
        if counted is None or not counted.active.stored:
            return
        after = counted.active.stored[-1].sequence
        appended = MessageRepository(db).appended_after(
            session.id, after, session.last_message_sequence
        )
        if not appended:
            return
        extended = await context.load(db, session)
        on_commit(db, lambda: context.remember(extended))

    async def finish(
        self, session_id: str, model: ModelEntry, first: FirstPrepare
    ) -> PreparedSessionCall:
        """What ``prepare_call`` does after its first step (``first_in``, committed): prune and
        compact at the trigger line, each in transactions of its own."""
        request_id = first.request_id
        sampled = first.sampled
        compacted = False
        written = list(sampled.message_ids)

        # ----- compaction at the trigger line (spec §6 loop, for a caller's own model) --------
        # Same order as a turn's model call: prune; if still at the line, compact, re-sample
        # World State (sample index 2, so the post-compaction request carries it again) and
        # re-prepare. Without a compaction service the budget reports the line honestly.
        compactor = self._compactor()
        if sampled.prepared.budget.reaches_auto_compact_limit and compactor is not None:
            installed = compactor

            async def again(sample_index: int | None) -> PreparedModelCall:
                nonlocal sampled
                sampled = await self._sample_and_prepare(
                    session_id, model, request_id, sample_index, sampled
                )
                written.extend(sampled.message_ids)
                return sampled.prepared

            async def compact(prepared: PreparedModelCall) -> CompactionNotSmaller | None:
                nonlocal compacted
                budget = prepared.budget
                try:
                    await installed.compact_for_prepare(
                        session_id,
                        prepare_id=request_id,
                        evidence=TurnCallEvidence(budget, model_call_index=1),
                    )
                except CompactionNotSmaller as refused:
                    return refused
                compacted = True
                return None

            fitted = await fit(
                sampled.prepared,
                prune=lambda: installed.prune(session_id),
                compact=compact,
                again=again,
            )
            budget = fitted.prepared.budget
            # Not installed (spec §9): the request as it was, if the model takes it.
            if fitted.refused is not None and (
                budget.estimated_input_tokens > budget.effective_input_tokens
            ):
                refused = fitted.refused
                raise TooLarge(
                    "compaction_error", not_installed_detail(refused, budget), **refused.extra
                ) from refused
        # ---------------------------------------------------------------------------------------

        return PreparedSessionCall(sampled.prepared, model, written, compacted)

    async def _sample_and_prepare(
        self,
        session_id: str,
        model: ModelEntry,
        request_id: str,
        sample_index: int | None,
        earlier: _Sampled | None,
    ) -> _Sampled:
        """Sample (unless ``sample_index`` is ``None``) and prepare the active Conversation
        (``earlier``: this request's previous preparation, when it prepares again).

        The filesystem is read before the write transaction opens, so no lock is held while it
        is; a capture failure raises before anything is written (``_prepare_in``).
        """
        async with unit_of_work(self._db, read_only=True) as db:
            session = await SessionRepository(db).require(session_id)
            counter = await self._counter(db, model)
        inputs = await self._world_state.capture(session) if sample_index is not None else None
        async with unit_of_work(self._db) as db:
            session = await SessionRepository(db).require(session_id, for_update=True)
            sampled, context, counted = await self._prepare_in(
                db, session, model, counter, inputs, request_id, sample_index, earlier
            )
        # Committed: the next prepare decodes only what was stored since.
        context.remember(counted)
        return sampled

    async def _counter(self, db: AsyncSession, model: ModelEntry) -> TokenCounter:
        """The same counter as inspection and turns (calibrated when configured)."""
        base = self._counters(model.capabilities.token_counter)
        if not self._apply_calibration:
            # ``calibrated_counter`` hands back the base counter unless it applies: no read.
            return base
        counter, _ = await calibrated_counter(db, model.id, base, apply=True)
        return counter

    async def _prepare_in(
        self,
        db: AsyncSession,
        session: AgentSession,
        model: ModelEntry,
        counter: TokenCounter,
        inputs: WorkspaceInputs | None,
        request_id: str,
        sample_index: int | None,
        earlier: _Sampled | None,
        preread: Preread | None = None,
    ) -> tuple[_Sampled, SessionContext, CountedConversation]:
        """Sample ``inputs`` (captured) and prepare, in ``db``'s write transaction, which holds
        the session's lock and loaded ``session`` in it.

        Its prefix record replaces the session's in the same transaction: the last preparation
        of the request is the one handed to the caller, so its record is the one that stays.
        The prepare runs before the commit: a refused one rolls back the World State just
        written and its baselines (spec §8, bad input never changes stored state).
        """
        session_id = session.id
        # A running turn samples and compacts this session itself; interleaving a caller's
        # own model calls with it would mix two request streams in one Conversation.
        if preread is None:
            await require_idle(db, session_id, _ACTION)
        context = self._conversations.context_for(session, counter)
        counted = await context.load(db, session)
        written: list[Item] = []
        if inputs is not None and sample_index is not None:
            written = await self._world_state.write(
                db,
                session,
                counted.items,
                inputs,
                turn_id=request_id,
                model_call_index=1,
                sample_index=sample_index,
                record_turn=False,
            )
            sequences = [i.sequence for i in written if i.sequence is not None]
            if sequences:
                await self._events.emit(
                    db, session_id, "messages_appended", messages_appended(sequences)
                )
        if earlier is not None:
            previous_request = earlier.previous
        elif preread is not None:
            previous_request = preread.previous
        else:
            previous_request = await stored_previous(db, session_id)
        prepared = context.prepare(
            session, [*counted.items, *written], model.capabilities, counted, previous_request
        )
        await remember(db, session_id, prepared.prefix_record)
        ids = [o.message_id for o in (i.origin for i in written) if isinstance(o, RealOrigin)]
        sampled = _Sampled(prepared, [i for i in ids if i is not None], previous_request)
        return sampled, context, counted


_ACTION = "prepared for a caller's own model"


def _captures_in_memory(session: AgentSession) -> bool:
    """Whether sampling the session's World State reads no file: no workspace, or one the
    caller provides (``WorldStateSampler.capture``)."""
    workspace = workspace_of(session)
    return not workspace or workspace.get("provided") is not None
