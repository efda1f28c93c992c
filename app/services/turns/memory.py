"""What a turn's runner remembers from one model call to the next (spec §6, §7.1).

A step extends what the step before it read and built instead of building it again: the active
Conversation as of the last committed step, the request last prepared (the next ``prepare``
takes what it shares with it), what that request's prefix record was built from, and the record
of the session's last request sent (what the next request is measured against; read once, by
the first step that loads a call, then kept: no other request of the session is sent meanwhile).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.caching.prefix_record import RecordBasis
from app.core.counting import TokenCounter
from app.core.errors import ServiceError
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import PreparedModelCall
from app.services.conversation import system_context_of, tool_surface_of, watermark_of
from app.services.conversation_cache import ConversationCache
from app.services.model_types import ModelEntry
from app.services.request_prefix import prefixed_extending, rewind_of, stored_previous
from app.services.tokens import CountedConversation
from app.services.turns.deps import TurnDeps
from app.services.turns.loading import Loaded, load_call, shared
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
        # Earlier turns' reads of the Conversation, shared by the runners of this process.
        self._conversations = conversations
        # Replaced by the session model's counter once the turn is loaded.
        self.counter: TokenCounter = deps.counter("estimate")
        self._model: ModelEntry | None = None
        self._conversation: CountedConversation | None = None
        # The record of the last request sent (written by the step that stores its response,
        # or ends the turn: no transaction of its own), and whether it was read yet.
        self.sent_record: bytes | None = None
        self._sent_record_known = False
        self._last_prepared: PreparedModelCall | None = None
        self._record_basis: RecordBasis | None = None

    @property
    def model(self) -> ModelEntry:
        assert self._model is not None, "the turn is not loaded yet"
        return self._model

    def use(self, model: ModelEntry, counter: TokenCounter) -> None:
        """The turn's model and the counter of its requests."""
        self._model, self.counter = model, counter

    def knows_sent(self, record: bytes | None) -> None:
        """The session's previous request, as the start of the turn read it."""
        self.sent_record, self._sent_record_known = record, True

    def sent(self, prepared: PreparedModelCall) -> None:
        """``prepared`` is sent from now on: the next request is measured against it."""
        self.sent_record = prepared.prefix_record

    async def load(
        self,
        db: AsyncSession,
        session: AgentSession,
        index: int,
        sample_index: int | None,
        captured: Captured | None,
    ) -> Loaded:
        """Inside a step: ``load_call`` from this runner's (or this process's) last read."""
        previous = self._conversation
        if previous is None and shared(self.counter):
            previous = self._conversations.get(session, self.counter.name)
        if not self._sent_record_known:
            self.sent_record = await stored_previous(db, self._session_id)
            self._sent_record_known = True
        return await load_call(
            self._deps,
            db,
            session,
            self.counter,
            turn_id=self._turn_id,
            index=index,
            sample_index=sample_index,
            captured=captured,
            previous=previous,
        )

    def ready(
        self, loaded: Loaded, session: AgentSession, pending: PendingStep | None = None
    ) -> Ready:
        """Keep the Conversation the step read (in this process's cache once the step has
        committed: now, or when ``pending`` commits), and build the request."""
        counted, items = loaded
        self._conversation = counted
        if shared(self.counter):
            name, cache = self.counter.name, self._conversations
            if pending is None:
                cache.put(session, name, counted)
            else:
                pending.after.append(lambda: cache.put(session, name, counted))
        return self._prepared(session, items, counted), session

    def _prepared(
        self, session: AgentSession, items: list[Any], counted: CountedConversation
    ) -> PreparedModelCall:
        try:
            with self._deps.observability.prepare("turn") as timed:
                prepared = prepare(
                    system_context_of(session),
                    items,
                    tool_surface_of(session),
                    self.model.capabilities,
                    watermark_of(session),
                    self.counter,
                    extends=self._last_prepared,
                )
                # Against the last request sent (a re-preparation too: it replaces one that
                # was never sent).
                prepared, self._record_basis = prefixed_extending(
                    prepared,
                    items,
                    self.sent_record,
                    self._record_basis,
                    identify_stored=True,
                    rewind_compaction_id=rewind_of(counted.active),
                )
                timed.budget(prepared.budget)
            self._last_prepared = prepared
            return prepared
        except ServiceError as exc:  # e.g. data_blocks_not_accepted: the request cannot be built
            raise failed(exc.code, exc.detail) from exc
