"""The first model call of a new turn, prepared in the transaction that starts the turn.

A new turn's first step — phase ``running_model``, the mailbox drain, the Conversation read and
the World State sample — would otherwise be a transaction of its own right after the start's.
It joins the start when nothing in it reads files: the workspace of a filesystem session is read
before a step's transaction opens (``sampling``), and the start has no session row to read it
for before its own. If any of it fails (a World State render error, say), the start rolls back
and runs again without it: the runner's own first step then fails the turn with that error, as
it always did — a start never fails because of its first call.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.counting import TokenCounter
from app.core.errors import ServiceError
from app.services.conversation_cache import ConversationCache
from app.services.model_types import ModelEntry
from app.services.request_prefix import stored_previous
from app.services.session_context import SessionContext
from app.services.turns.deps import TurnDeps, world_state_of
from app.services.turns.loading import Loaded, load_call, turn_counter
from app.services.turns.sampling import capture, is_two_phase
from app.storage.models import AgentSession

__all__ = ["FirstCall", "FirstCallFailed", "FirstCallPreparer"]


@dataclass(frozen=True, slots=True)
class FirstCall:
    """The first model call of a turn as its start prepared it."""

    counter: TokenCounter
    # The session's context the call was read in (remembered once the start commits).
    context: SessionContext
    loaded: Loaded
    # The prefix record of the session's previous request (what the first call is measured
    # against), read in the same transaction.
    previous_request: bytes | None


class FirstCallFailed(Exception):
    """Preparing the first call failed: the start's transaction rolls back (start again
    without it)."""


class FirstCallPreparer:
    """What ``start_turn`` asks to prepare a new turn's first call (for this process's
    runners, which keep the Conversations they read in ``conversations``)."""

    def __init__(self, deps: TurnDeps, conversations: ConversationCache) -> None:
        self._deps = deps
        self._conversations = conversations

    def applies(self, session: AgentSession) -> bool:
        """Whether the first call can be prepared in the start's transaction (no file read)."""
        sampler = world_state_of(self._deps)
        return not is_two_phase(sampler) or not sampler.capture_reads_files(session)

    async def prepare(
        self, db: AsyncSession, session: AgentSession, turn_id: str, model: ModelEntry
    ) -> FirstCall:
        try:
            counter = await turn_counter(self._deps, db, model)
            context = self._conversations.context_for(session, counter)
            loaded = await load_call(
                self._deps,
                db,
                session,
                context,
                turn_id=turn_id,
                index=1,
                sample_index=1,
                captured=await capture(self._deps, session),  # reads no file (``applies``)
            )
            previous_request = await stored_previous(db, session.id)
        except ServiceError as exc:
            raise FirstCallFailed from exc
        return FirstCall(counter, context, loaded, previous_request)
