"""A triggered compaction that would not shrink the conversation (spec §9): nothing is stored
but what happened — its ``compaction_finished`` update (``status: "not_installed"``, both token
figures) and, for a turn, the summary call's tokens on it (the call ran) — in one transaction."""

from __future__ import annotations

import logging

from app.core.compaction.shrink import CompactionNotSmaller
from app.providers.base import Usage
from app.services.compaction.persist import prepare_link
from app.services.events import EventPublisher
from app.storage.database import SessionFactory, unit_of_work
from app.storage.repositories.turns import TurnRepository

__all__ = ["record_refusal"]

log = logging.getLogger(__name__)


async def record_refusal(
    factory: SessionFactory,
    events: EventPublisher,
    session_id: str,
    refused: CompactionNotSmaller,
    usage: Usage,
    *,
    turn_id: str | None,
    prepare_id: str | None,
) -> None:
    """Best effort: the refusal itself already changed nothing, so a failure here is logged.
    ``turn_id`` or ``prepare_id`` names what triggered it (as the other live updates do)."""
    payload = {
        "status": "not_installed",
        **refused.extra,
        "code": refused.code,
        "detail": refused.detail,
        **prepare_link(prepare_id),
    }
    try:
        async with unit_of_work(factory) as db:
            if turn_id is not None:
                await TurnRepository(db).add_usage(
                    session_id,
                    turn_id,
                    input_tokens=usage.input_tokens or 0,
                    output_tokens=usage.output_tokens or 0,
                )
            await events.emit(db, session_id, "compaction_finished", payload, turn_id=turn_id)
    except Exception:
        log.warning("could not record a compaction that was not installed", exc_info=True)
