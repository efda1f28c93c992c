"""Writing a checkpoint, installing it, and rebuilding a session whose install failed
(spec §7.6).

Write: one transaction that locks the session, re-checks the preconditions (manual and rewind:
no running turn; in-turn: the trigger turn still running; for all: no other checkpoint installed
since the source was read), adds the summary's usage to the trigger turn, stores the row with
every column and the ``compaction_finished`` update. Any failure rolls all of it back: the old
conversation is untouched.

Install: what must change outside the database once the row is committed. The service keeps no
conversation in memory (every request re-reads the projection), so installing means reading the
new projection back through the very loader every model call uses, then running the registered
install hooks (in-process views such as a running turn's conversation). When that fails the
checkpoint stays (it is durable and correct) and the session gets ``reload_required``: turns are
refused until ``rebuild`` (``POST /v1/sessions/{id}/reload``) re-reads the session from the
database, re-runs the install and clears the flag.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import Conflict, Unavailable
from app.providers.base import Usage
from app.services.compaction.source import require_idle
from app.services.conversation import ActiveConversation, load_active
from app.services.events import EventPublisher
from app.storage.database import SessionFactory, unit_of_work
from app.storage.models import Compaction
from app.storage.outages import describe
from app.storage.repositories.compactions import CompactionRepository
from app.storage.repositories.sessions import SessionRepository
from app.storage.repositories.turns import TurnRepository

__all__ = [
    "InstallHook",
    "emit_update",
    "install",
    "prepare_link",
    "reload_required_error",
    "store_checkpoint",
]

log = logging.getLogger(__name__)

# Called after commit with the session id and its freshly loaded active Conversation.
InstallHook = Callable[[str, ActiveConversation], Awaitable[None]]


async def _check_preconditions(
    db: AsyncSession, row: Compaction, *, base_compaction_id: str | None
) -> None:
    session_id = row.session_id
    await SessionRepository(db).require(session_id, for_update=True)
    if row.kind in ("manual", "rewind"):
        await require_idle(db, session_id, "compacted" if row.kind == "manual" else "rewound")
    elif row.trigger_turn_id is None:
        # A caller running its own model (``POST .../prepare``) compacts without a turn: then
        # no service turn may be running either.
        await require_idle(db, session_id, "compacted")
    else:
        turn = await TurnRepository(db).get(session_id, row.trigger_turn_id)
        if turn is None or turn.status != "running":
            raise Conflict(
                "turn_not_running",
                f"turn {row.trigger_turn_id} is no longer running, so its compaction was not "
                "installed",
                turn_id=row.trigger_turn_id,
            )
    latest = await CompactionRepository(db).latest(session_id)
    latest_id = latest.compaction_id if latest is not None else None
    if row.kind != "rewind" and latest_id != base_compaction_id:
        raise Conflict(
            "compaction_conflict",
            f"checkpoint {latest_id} was installed while this compaction was running; its "
            "summary would not cover the conversation in force, so it was discarded; try again",
            compaction_id=latest_id,
        )


async def store_checkpoint(
    db: AsyncSession,
    events: EventPublisher,
    row: Compaction,
    *,
    base_compaction_id: str | None,
    usage: Usage | None = None,
) -> Compaction:
    """Check, store and announce ``row`` in ``db``'s transaction (the caller commits)."""
    await _check_preconditions(db, row, base_compaction_id=base_compaction_id)
    if row.trigger_turn_id is not None and usage is not None:
        # The summary call is part of the turn's cost (spec §7.4).
        await TurnRepository(db).add_usage(
            row.session_id,
            row.trigger_turn_id,
            input_tokens=usage.input_tokens or 0,
            output_tokens=usage.output_tokens or 0,
        )
    try:
        stored = await CompactionRepository(db).add(row)
    except SQLAlchemyError as exc:
        # Its class and SQLSTATE only: the driver's text quotes the row (summary, messages).
        log.error("checkpoint write failed: %s", describe(exc))
        raise Unavailable(
            "persistence_error",
            "the checkpoint could not be stored; nothing was changed, try again",
        ) from exc
    await events.emit(
        db,
        row.session_id,
        "compaction_finished",
        {
            "status": "completed",
            "compaction_id": stored.compaction_id,
            "kind": stored.kind,
            "through_message_sequence": stored.through_message_sequence,
            "conversation_tokens_before": stored.conversation_tokens_before,
            "conversation_tokens_after": stored.conversation_tokens_after,
            **prepare_link(row.trigger_prepare_id),
        },
        turn_id=row.trigger_turn_id,
    )
    return stored


def prepare_link(prepare_id: str | None) -> dict[str, str]:
    """What a live update of a session prepare's compaction adds to its payload (it has no
    turn to name)."""
    return {} if prepare_id is None else {"prepare_id": prepare_id}


async def emit_update(
    factory: SessionFactory,
    events: EventPublisher,
    session_id: str,
    type: str,
    payload: Mapping[str, object],
    *,
    turn_id: str | None,
    prepare_id: str | None,
) -> None:
    """A triggered compaction's ``compaction_started``/failed update, in a transaction of its
    own; best effort: a failure to announce is logged, never the compaction's outcome."""
    try:
        async with unit_of_work(factory) as db:
            payload = {**payload, **prepare_link(prepare_id)}
            await events.emit(db, session_id, type, payload, turn_id=turn_id)
    except Exception:
        log.warning("could not emit %s", type, exc_info=True)


def reload_required_error(session_id: str, compaction_id: str | None, cause: str) -> Conflict:
    return Conflict(
        "reload_required",
        f"checkpoint {compaction_id} was stored but could not be installed ({cause}); the "
        "durable checkpoint was preserved and this session must be reloaded: "
        f"POST /v1/sessions/{session_id}/reload",
        compaction_id=compaction_id,
    )


async def install(
    factory: SessionFactory,
    session_id: str,
    hooks: Sequence[InstallHook],
    *,
    counter: str = "estimate",
) -> ActiveConversation:
    """Read the active Conversation back from the database and run the install hooks."""
    async with unit_of_work(factory, read_only=True) as db:
        session = await SessionRepository(db).require(session_id)
        active = await load_active(db, session, counter)
    for hook in hooks:
        await hook(session_id, active)
    return active
