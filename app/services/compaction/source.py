"""What a compaction starts from: the session's active projection and everything derived from
it before the summary model is called (spec §7.3, §7.5).

Read in one read-only transaction. Nothing here writes: a failure at this stage (empty
conversation, no user request, an undecodable artifact) changes nothing stored.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.compaction import (
    LastUserRequest,
    RuntimeState,
    derive_runtime_state,
    render_reminder,
    runtime_state_from_json,
    select_last_user_request,
    summary_capabilities,
)
from app.core.compaction.runtime_state import RuntimeStateError
from app.core.compaction.summary_view import fit_summary_request, summary_item_bytes
from app.core.content import Item
from app.core.counting import TokenCounter
from app.core.errors import Conflict
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import Budget, PreparedModelCall
from app.core.turn_plan import Plan, PlanArgumentsInvalid, parse_update_plan_arguments
from app.services.conversation import (
    load_active,
    system_context_of,
    tool_surface_of,
    watermark_of,
)
from app.services.model_types import ModelEntry
from app.services.models import resolve_model
from app.services.salient_memo import SALIENT_LINES
from app.storage.models import AgentSession
from app.storage.repositories.compactions import CompactionRepository
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.sessions import SessionRepository
from app.storage.repositories.turns import TurnRepository

__all__ = [
    "CompactionSource",
    "Coverage",
    "conversation_tokens",
    "load_source",
    "require_idle",
    "runtime_state_for",
    "trigger_evidence",
]

logger = logging.getLogger(__name__)

Counters = Callable[[str], TokenCounter]
# What a caller's summary covers, given the session and its last message (raises when unknown).
Coverage = Callable[[AsyncSession, AgentSession, int], Awaitable[int]]


@dataclass(frozen=True, slots=True)
class CompactionSource:
    session: AgentSession
    model: ModelEntry
    summary_model: ModelEntry
    # The checkpoint in force when the source was read (``None``: none yet); the write refuses
    # to install over a newer one.
    base_compaction_id: str | None
    # The last stored message when read (or what a caller's summary covers): the new fact and
    # install boundary. Messages appended after it stay after it, in the tail.
    through: int
    items: list[Item]
    last_user: LastUserRequest
    runtime_state: RuntimeState
    reminder: str
    summary_request: PreparedModelCall
    # The turn model's request for the active Conversation as it stands (tokens "before").
    before: Budget
    prepare_ms: int


async def require_idle(db: AsyncSession, session_id: str, action: str) -> None:
    """``Conflict`` ``session_active`` while a turn runs (manual compaction and rewind)."""
    running = await TurnRepository(db).get_running(session_id)
    if running is not None:
        raise Conflict(
            "session_active",
            f"turn {running.turn_id} is running in this session and it cannot be {action} now; "
            "wait for the turn to finish or cancel it, then try again",
            turn_id=running.turn_id,
        )


def _plan_of(stored: dict[str, Any] | None) -> Plan | None:
    """A stored turn plan, in either shape (``{explanation, steps}`` or the tool's own
    ``{explanation, plan}``)."""
    if stored is None:
        return None
    try:
        if "steps" in stored:
            return Plan.from_extension_value(stored)
        return parse_update_plan_arguments(stored)
    except PlanArgumentsInvalid as exc:
        raise RuntimeStateError(f"invalid stored turn plan: {exc.detail}") from exc


async def runtime_state_for(
    db: AsyncSession,
    session_id: str,
    *,
    turn_id: str | None,
    counter: str,
    through: int | None = None,
) -> tuple[RuntimeState, str]:
    """The runtime state and reminder for a new checkpoint (spec §7.5).

    ``edited_paths`` comes from every stored message (up to ``through``: what the checkpoint
    covers); the plan is the trigger turn's, or (manual, rewind, or a turn without a plan yet)
    carried from the latest checkpoint, as are unknown extension keys.
    """
    latest = await CompactionRepository(db).latest(session_id)
    plan = None
    if turn_id is not None:
        plan = _plan_of(await TurnRepository(db).plan_of(session_id, turn_id))
    rows = await MessageRepository(db).load(session_id, through_sequence=through)
    items = [r.to_item(counter) for r in rows]
    try:
        previous = runtime_state_from_json(latest.runtime_state) if latest is not None else None
        state = derive_runtime_state(items, previous, plan)
    except RuntimeStateError as unreadable:
        if latest is None:
            raise
        # What the latest checkpoint carries cannot be read or rendered (another version's
        # state, a hand edit): start afresh from the messages rather than refuse every later
        # compaction of the session. Only the carried extensions are lost.
        logger.warning(
            "session %s: the runtime state of checkpoint %s is not carried (%s)",
            session_id,
            latest.compaction_id,
            unreadable,
        )
        state = derive_runtime_state(items, None, plan)
    return state, render_reminder(state)


def conversation_tokens(
    session: AgentSession, model: ModelEntry, counter: TokenCounter, items: Sequence[Item]
) -> Budget:
    """The budget of the turn model's request for ``items`` (what "before/after" measure)."""
    return prepare(
        system_context_of(session),
        items,
        tool_surface_of(session),
        model.capabilities,
        watermark_of(session),
        counter,
        salient=SALIENT_LINES,
    ).budget


def summary_request_for(
    session: AgentSession, summary_model: ModelEntry, counter: TokenCounter, items: list[Item]
) -> PreparedModelCall:
    """The summary request of ``items`` (the active projection): spec §7.3's, or when that does
    not fit the summary model's input, a bounded view of it (``fit_summary_request``)."""
    capabilities = summary_capabilities(summary_model.capabilities)
    system, watermark = system_context_of(session), watermark_of(session)

    def build(conversation: list[Item]) -> PreparedModelCall:
        # No tools: the summary model must answer in text (spec §7.3).
        return prepare(
            system, conversation, [], capabilities, watermark, counter, salient=SALIENT_LINES
        )

    def fits(request: PreparedModelCall) -> bool:
        return request.budget.estimated_input_tokens <= request.budget.effective_input_tokens

    item_bytes = summary_item_bytes(capabilities.limits().effective_input_tokens)
    return fit_summary_request(items, build, fits, item_bytes=item_bytes)


def trigger_evidence(before: Budget) -> dict[str, Any]:
    """Why an in-turn compaction fired, from the budget that crossed the line."""
    line = min(before.auto_compact_token_limit, before.effective_input_tokens)
    used = before.estimated_input_tokens + before.reserved_output_tokens
    return {
        "context_window_tokens": before.context_window_tokens,
        "effective_input_tokens": before.effective_input_tokens,
        "auto_compact_token_limit": before.auto_compact_token_limit,
        "estimated_input_tokens": before.estimated_input_tokens,
        "reserved_output_tokens": before.reserved_output_tokens,
        "trigger_percent": round(used * 100 / line) if line > 0 else None,
        "counter": before.counter,
    }


async def load_source(
    db: AsyncSession,
    session_id: str,
    counters: Counters,
    *,
    turn_id: str | None,
    covered: Coverage | None = None,
) -> CompactionSource:
    """Read everything a compaction needs before its summary call.

    It covers the conversation through its last stored message, or through what ``covered``
    answers for the session and that last message (a caller's summary written earlier: the
    messages after it stay in the tail)."""
    started = time.perf_counter()
    session = await SessionRepository(db).require(session_id)
    if turn_id is None:
        await require_idle(db, session_id, "compacted")
    model = await resolve_model(db, session.model_id, session.tenant_id)
    summary_model = await resolve_model(db, session.summary_model_id, session.tenant_id)
    summary_counter = counters(summary_model.capabilities.token_counter)
    last = await MessageRepository(db).last_sequence(session_id) or 0
    if last == 0:
        raise Conflict(
            "empty_conversation",
            "the conversation is empty and cannot be compacted; append messages first",
        )
    through = last if covered is None else await covered(db, session, last)
    # Every fact of the checkpoint comes from the messages up to ``through``, read with that
    # bound: on PostgreSQL each statement of this transaction sees what others committed
    # before it, so an unbounded read could add a message appended after ``last`` was read
    # (a last user request beyond the checkpoint's own boundary).
    active = await load_active(db, session, summary_counter.name, through=through)
    last_user = select_last_user_request(active.items)
    state, reminder = await runtime_state_for(
        db, session_id, turn_id=turn_id, counter=summary_counter.name, through=through
    )
    summary_request = summary_request_for(session, summary_model, summary_counter, active.items)
    before = conversation_tokens(
        session, model, counters(model.capabilities.token_counter), active.items
    )
    return CompactionSource(
        session=session,
        model=model,
        summary_model=summary_model,
        # The latest checkpoint, also when a new epoch keeps it from projecting: another one
        # installed meanwhile is what the base check is for.
        base_compaction_id=active.latest_compaction_id,
        through=through,
        items=active.items,
        last_user=last_user,
        runtime_state=state,
        reminder=reminder,
        summary_request=summary_request,
        before=before,
        prepare_ms=round((time.perf_counter() - started) * 1000),
    )
