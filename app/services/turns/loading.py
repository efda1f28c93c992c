"""What a step does before a model call, inside its transaction: the mailbox drain, the
Conversation read and the World State sample (shared by the runner's steps and the start of a
turn, which prepares the first call in its own transaction: ``first_call``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.counting import TokenCounter
from app.services.calibration import calibrated_counter
from app.services.conversation_cache import shared
from app.services.model_types import ModelEntry
from app.services.session_context import SessionContext
from app.services.tokens import CountedConversation
from app.services.turns.deps import TurnDeps
from app.services.turns.mailbox import drain_mailbox
from app.services.turns.sampling import Captured, sample
from app.storage.models import AgentSession

__all__ = ["Loaded", "load_call", "shared", "turn_counter"]

# The Conversation as read (and counted), and the items of the next request (with the sample).
Loaded = tuple[CountedConversation, list[Any]]


async def turn_counter(deps: TurnDeps, db: AsyncSession, entry: ModelEntry) -> TokenCounter:
    """The counter of the model's requests: the same as inspection and session prepare
    (calibrated when configured), read in ``db``'s transaction."""
    base = deps.counter(entry.capabilities.token_counter)
    if not deps.settings.apply_calibration:
        return base
    counter, _ = await calibrated_counter(db, entry.id, base, apply=True)
    return counter


async def load_call(
    deps: TurnDeps,
    db: AsyncSession,
    session: AgentSession,
    context: SessionContext,
    *,
    turn_id: str,
    index: int,
    sample_index: int | None,
    captured: Captured | None,
) -> Loaded:
    """Drain the mailbox (``sample_index`` 1), read the Conversation (``context.load``: on the
    last committed read) and write the World State sample (``sample_index`` 1 or 2; none for
    ``None``). Remembering the read, once the step committed, is the caller's."""
    if sample_index == 1:
        counter = context.counter
        await drain_mailbox(db, session.id, turn_id, counter, pending=session.mailbox_pending)
    counted = await context.load(db, session)
    items = counted.items
    if sample_index is not None:
        sampled = await sample(
            deps,
            db,
            session,
            items,
            captured,
            turn_id=turn_id,
            model_call_index=index,
            sample_index=sample_index,
        )
        if sampled:
            items = items + sampled
            # What the sample stored belongs to the Conversation from now on: the read kept for
            # the next step includes it, so that step reads nothing back (the rows were
            # appended in this transaction: no query here either).
            counted = await context.load(db, session, since=counted)
    return counted, items
