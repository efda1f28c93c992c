"""What a turn's runner remembers from one model call to the next (spec §6, §7.1).

A step extends what the step before it read and built instead of building it again: the
session's context (``app.services.session_context``: the active Conversation as of the last
committed step, the request last prepared and its prefix record's basis), and the record of the
session's last request sent (what the next request is measured against; read once, by the first
step that loads a call, then kept: no other request of the session is sent meanwhile).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.counting import TokenCounter
from app.core.errors import ServiceError
from app.core.pipeline.prepared_call import PreparedModelCall
from app.services.conversation_cache import ConversationCache
from app.services.model_types import ModelEntry
from app.services.request_prefix import stored_previous
from app.services.session_context import SessionContext
from app.services.tokens import CountedConversation
from app.services.turns.deps import TurnDeps
from app.services.turns.loading import Loaded, load_call
from app.services.turns.outcomes import Ready, failed
from app.services.turns.overlap import PendingStep
from app.services.turns.sampling import Captured
from app.storage.models import AgentSession

__all__ = ["CallMemory"]


class CallMemory:
    def __init__(
        self, deps: TurnDeps, session_id: str, turn_id: str, conversations: ConversationCache
    ) -> None:
        self._deps = deps
        self._session_id = session_id
        self._turn_id = turn_id
        # This process's session contexts, shared by its runners (and inspection, prepare).
        self._conversations = conversations
        # Replaced by the session model's counter once the turn is loaded.
        self.counter: TokenCounter = deps.counter("estimate")
        self._model: ModelEntry | None = None
        self._context: SessionContext | None = None
        # The record of the last request sent (written by the step that stores its response,
        # or ends the turn: no transaction of its own), and whether it was read yet.
        self.sent_record: bytes | None = None
        self._sent_record_known = False

    @property
    def model(self) -> ModelEntry:
        assert self._model is not None, "the turn is not loaded yet"
        return self._model

    def use(
        self, model: ModelEntry, counter: TokenCounter, context: SessionContext | None = None
    ) -> None:
        """The turn's model, the counter of its requests and (when the start read it) the
        session's context."""
        self._model, self.counter = model, counter
        if context is not None:
            self._context = context

    def knows_sent(self, record: bytes | None) -> None:
        """The session's previous request, as the start of the turn read it."""
        self.sent_record, self._sent_record_known = record, True

    def sent(self, prepared: PreparedModelCall) -> None:
        """``prepared`` is sent from now on: the next request is measured against it."""
        self.sent_record = prepared.prefix_record

    def _context_of(self, session: AgentSession) -> SessionContext:
        """The session's context for this turn's counter (this process's, when it keeps one)."""
        if self._context is None:
            self._context = self._conversations.context_for(session, self.counter)
        return self._context

    async def load(
        self,
        db: AsyncSession,
        session: AgentSession,
        index: int,
        sample_index: int | None,
        captured: Captured | None,
    ) -> Loaded:
        """Inside a step: ``load_call`` in the session's context."""
        if not self._sent_record_known:
            self.sent_record = await stored_previous(db, self._session_id)
            self._sent_record_known = True
        return await load_call(
            self._deps,
            db,
            session,
            self._context_of(session),
            turn_id=self._turn_id,
            index=index,
            sample_index=sample_index,
            captured=captured,
        )

    def ready(
        self, loaded: Loaded, session: AgentSession, pending: PendingStep | None = None
    ) -> Ready:
        """Remember the Conversation the step read once the step has committed (now, or when
        ``pending`` commits), and build the request."""
        counted, items = loaded
        context = self._context_of(session)
        if pending is None:
            context.remember(counted)
        else:
            pending.after.append(lambda: context.remember(counted))
        return self._prepared(session, items, counted), session

    def _prepared(
        self, session: AgentSession, items: list[Any], counted: CountedConversation
    ) -> PreparedModelCall:
        try:
            with self._deps.observability.prepare("turn") as timed:
                # Against the last request sent (a re-preparation too: it replaces one that
                # was never sent).
                prepared = self._context_of(session).prepare(
                    session, items, self.model.capabilities, counted, self.sent_record
                )
                timed.budget(prepared.budget)
            return prepared
        except ServiceError as exc:  # e.g. data_blocks_not_accepted: the request cannot be built
            raise failed(exc.code, exc.detail) from exc
