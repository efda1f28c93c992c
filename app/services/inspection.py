"""Context inspection (``GET /v1/sessions/{id}/context``): the next request, read-only.

The same loader and the same ``prepare()`` as a real model call, so what a client sees is what the
model would get; no World State sampling, nothing written (the stable prefix is measured against
the session's previous request, whose record stays as it is). ``app/api/render/prepare.py`` writes
the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.core.content import Item
from app.core.counting import TokenCounter
from app.core.pipeline.prepared_call import PreparedModelCall, PruningWatermark
from app.services.calibration import Calibration, calibrated_counter
from app.services.conversation import watermark_of
from app.services.conversation_cache import ConversationCache
from app.services.model_types import ModelEntry
from app.services.models import resolve_model
from app.services.request_prefix import stored_previous
from app.services.tokens import persist_counts
from app.storage.database import SessionFactory, unit_of_work
from app.storage.repositories.sessions import SessionRepository

__all__ = ["Inspection", "InspectionService"]


@dataclass(frozen=True, slots=True)
class Inspection:
    """The next request of a session's active Conversation, and what it was built from."""

    session_id: str
    model: ModelEntry
    prepared: PreparedModelCall
    # The active Conversation as loaded (before the prepare stages): what ``prepared.items``
    # came from, e.g. to tell which messages a stage rewrote.
    loaded: list[Item]
    watermark: PruningWatermark
    calibration: Calibration | None


class InspectionService:
    def __init__(
        self,
        db: SessionFactory,
        counters: Callable[[str], TokenCounter],
        conversations: ConversationCache | None = None,
        *,
        apply_calibration: bool = False,
    ) -> None:
        self._db = db
        self._counters = counters
        self._conversations = conversations or ConversationCache(0)
        self._apply_calibration = apply_calibration

    async def inspection(self, session_id: str) -> Inspection:
        async with unit_of_work(self._db, read_only=True) as db:
            session = await SessionRepository(db).require(session_id)
            model = await resolve_model(db, session.model_id, session.tenant_id)
            counter, calibration = await calibrated_counter(
                db,
                model.id,
                self._counters(model.capabilities.token_counter),
                apply=self._apply_calibration,
            )
            context = self._conversations.context_for(session, counter)
            counted = await context.load(db, session, store=False)
            # Read, never written: an inspection is not a request anyone sends.
            previous_request = await stored_previous(db, session_id)
        # Figures of messages written without them (World State, turns): stored once, after the
        # read-only block, so the next prepare reuses them.
        await persist_counts(self._db, session_id, counted)
        context.remember(counted)  # a committed read: the next prepare decodes only what is new
        prepared = context.prepare(
            session, counted.items, model.capabilities, counted, previous_request
        )
        watermark = watermark_of(session)
        return Inspection(session_id, model, prepared, counted.items, watermark, calibration)
