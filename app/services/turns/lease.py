"""Leases and the expiry reaper (spec §6, "Crash or restart").

The process running a turn holds a lease on its row and renews it; a turn whose lease expired
while it was not waiting for the caller lost its runner (the process died) and is made
``interrupted`` by whichever process notices first: every process sweeps on start-up and
periodically, and reads and starts sweep lazily. Nothing is replayed. A turn waiting for tool
results holds no lease (no process works on it): it ends at its deadline for the results
instead (``waiting``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from functools import partial
from typing import Any

from app.services.turns.deps import TurnDeps
from app.services.turns.holders import host_prefix, provably_gone
from app.storage.base import utc_now
from app.storage.database import unit_of_work
from app.storage.models import Turn
from app.storage.repositories.sessions import SessionRepository
from app.storage.repositories.turns import TurnRepository

__all__ = [
    "INTERRUPTED_OUTCOME",
    "free_dead_holders",
    "interrupt_held",
    "lease_expired",
    "lease_expiry",
    "reap_expired",
    "watch_turn",
]

logger = logging.getLogger(__name__)

INTERRUPTED_OUTCOME: dict[str, Any] = {
    "code": "process_restart",
    "message": "process restarted before turn completed",
}


def lease_expiry(deps: TurnDeps) -> Any:
    return utc_now() + timedelta(seconds=deps.settings.turn_lease_seconds)


def lease_expired(turn: Turn) -> bool:
    """A running turn whose runner died: the reaper makes it ``interrupted``."""
    return (
        turn.status == "running"
        and turn.lease_expires_at is not None
        and turn.lease_expires_at < utc_now()
    )


async def reap_expired(deps: TurnDeps) -> list[tuple[str, str]]:
    """Interrupt every running turn whose lease expired; returns their ``(session, turn)``.

    One transaction per turn, each taking the session's lock before the turn's row, the order
    every writer of a turn keeps (``TurnRepository.interrupt_if_expired``); two sweepers never
    both end a turn: the second finds it ended under the lock."""
    now = utc_now()
    async with unit_of_work(deps.db, read_only=True) as db:
        candidates = await TurnRepository(db).expired_leases(now=now)
    done: list[Turn] = []
    for session_id, turn_id in candidates:
        turn = await _interrupt_locked(
            deps,
            session_id,
            turn_id,
            partial(TurnRepository.interrupt_if_expired, now=now, outcome=INTERRUPTED_OUTCOME),
        )
        if turn is None:
            continue  # deleted, renewed or ended meanwhile
        done.append(turn)
        # Its lease expired: the line says so by its code (process_restart).
        deps.observability.turns.finished(turn)
    return [(t.session_id, t.turn_id) for t in done]


async def _interrupt_locked(
    deps: TurnDeps,
    session_id: str,
    turn_id: str,
    interrupt: Callable[[TurnRepository, str, str], Awaitable[Turn | None]],
) -> Turn | None:
    """One transaction: the session's lock, then ``interrupt`` of its turn's row (the order
    every writer of a turn keeps), with the ``turn_finished`` update when it ended the turn;
    ``None`` when the session is gone or ``interrupt`` found nothing to end."""
    async with unit_of_work(deps.db) as db:
        if await SessionRepository(db).get(session_id, for_update=True) is None:
            return None  # deleted meanwhile, its turns with it
        turn = await interrupt(TurnRepository(db), session_id, turn_id)
        if turn is None:
            return None
        await deps.events.emit(
            db,
            session_id,
            "turn_finished",
            {"status": "interrupted", "outcome": INTERRUPTED_OUTCOME},
            turn_id=turn_id,
        )
    return turn


async def free_dead_holders(deps: TurnDeps) -> list[tuple[str, str]]:
    """Interrupt the running turns whose lease holder this process can prove dead (an earlier
    process on this host: ``app.services.turns.holders``) without waiting for the lease to
    expire; returns their ``(session, turn)``. Each under its session's lock, as the reaper."""
    async with unit_of_work(deps.db, read_only=True) as db:
        held = await TurnRepository(db).leases_held_from(host_prefix())
    done: list[Turn] = []
    for session_id, turn_id, owner in held:
        if not provably_gone(owner):
            continue
        turn = await _interrupt_locked(
            deps,
            session_id,
            turn_id,
            partial(TurnRepository.interrupt_held, owner=owner, outcome=INTERRUPTED_OUTCOME),
        )
        if turn is None:
            continue  # deleted, ended or taken over meanwhile
        logger.warning(
            "turn %s of session %s interrupted: its process (%s) is gone",
            turn_id,
            session_id,
            owner.partition(";")[0],
        )
        done.append(turn)
        deps.observability.turns.finished(turn)
    return [(t.session_id, t.turn_id) for t in done]


async def interrupt_held(
    deps: TurnDeps, session_id: str, turn_id: str, owner: str, *, draft_shown: bool
) -> bool:
    """Interrupt a turn this process runs and will not finish (it is stopping), releasing its
    lease, with the ``turn_finished`` update (after a ``draft_cleared`` when deltas were shown);
    ``False`` when the turn was not running under ``owner`` any more."""
    async with unit_of_work(deps.db) as db:
        # The session's lock first, as every writer of a turn (``reap_expired``).
        session = await SessionRepository(db).get(session_id, for_update=True)
        held = (
            None
            if session is None  # deleted meanwhile, the turn with it
            else await TurnRepository(db).interrupt_held(
                session_id, turn_id, owner=owner, outcome=INTERRUPTED_OUTCOME
            )
        )
        if held is not None:
            events = deps.events.batch(session_id)
            if draft_shown:
                await events.emit(
                    db, session_id, "draft_cleared", {"reason": "turn_ended"}, turn_id=turn_id
                )
            await events.emit(
                db,
                session_id,
                "turn_finished",
                {"status": "interrupted", "outcome": INTERRUPTED_OUTCOME},
                turn_id=turn_id,
            )
            await events.flush(db)
    if held is None:
        return False
    logger.warning(
        "turn %s of session %s interrupted: this process is stopping", turn_id, session_id
    )
    deps.observability.turns.finished(held)
    return True


async def watch_turn(
    deps: TurnDeps,
    session_id: str,
    turn_id: str,
    owner: str,
    *,
    on_cancel: Callable[[], None],
    on_lost: Callable[[], None],
) -> None:
    """Runs beside a runner: renews its lease at a third of the lease time, and polls the row
    for a cancel request posted to another replica. Calls ``on_lost`` (and returns) when the turn
    is no longer running under this owner (finished elsewhere, or interrupted after a stall)."""
    settings = deps.settings
    renew_every = settings.turn_lease_seconds / 3
    tick = min(settings.turn_watch_interval_seconds, renew_every)
    next_renewal = time.monotonic() + renew_every
    while True:
        await asyncio.sleep(tick)
        try:
            if time.monotonic() >= next_renewal:
                async with unit_of_work(deps.db) as db:
                    held = await TurnRepository(db).renew_lease(
                        session_id, turn_id, owner=owner, expires_at=lease_expiry(deps)
                    )
                next_renewal = time.monotonic() + renew_every
                if not held:
                    on_lost()
                    return
            async with unit_of_work(deps.db, read_only=True) as db:
                turn = await TurnRepository(db).get(session_id, turn_id)
        except Exception:  # a database hiccup: try again next tick; the lease has slack
            logger.exception("lease watch of turn %s failed", turn_id)
            continue
        if turn is None or turn.status != "running" or turn.lease_owner != owner:
            on_lost()
            return
        if turn.cancel_requested:
            on_cancel()
