"""Starting a turn (spec §6): checks in their fixed order, then one transaction that writes the
turn row, the selected skills' ``skill_instruction`` messages and the user message (and, when it
can, prepares the first model call: ``first_call``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass

import anyio

from app.api.schemas.turns import InputItem, SkillInput, TextInput, TurnStart
from app.core.content import Block, is_blank, text_block
from app.core.counting import TokenCounter
from app.core.errors import Conflict, InvalidInput
from app.core.pipeline.item_caps import check_skill_body
from app.core.world_state.inputs import SkillSnapshot
from app.core.world_state.provided import provided_inputs_of, provided_skill_snapshot
from app.core.world_state.skill_file import skill_instruction_item
from app.services.messages import checked_message, exact_counts
from app.services.model_types import ModelEntry
from app.services.models import resolve_model
from app.services.pins import propose_pins
from app.services.session_config import disabled_skills_of, workspace_of
from app.services.turns.deps import TurnDeps
from app.services.turns.first_call import FirstCall, FirstCallPreparer
from app.services.turns.lease import lease_expired, lease_expiry
from app.services.turns.overlap import PendingStep
from app.services.turns.waiting import tool_results_overdue
from app.storage.database import unit_of_work
from app.storage.deferred import defer
from app.storage.models import AgentSession, Turn
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.records import NewMessage
from app.storage.repositories.sessions import SessionRepository
from app.storage.repositories.turns import TurnRepository
from app.workspace import read_skill_snapshot

__all__ = ["RunningTurnExpired", "Started", "busy", "start_turn"]


class RunningTurnExpired(Exception):
    """The session's running turn has an expired lease (its runner died), or waits for tool
    results past its deadline: it has to end first."""

    def __init__(self, turn_id: str) -> None:
        super().__init__(turn_id)
        self.turn_id = turn_id


@dataclass(frozen=True, slots=True)
class Started:
    turn: Turn
    created: bool
    # What the start read, for the runner of a new turn (it need not read them again).
    session: AgentSession
    model: ModelEntry | None
    first: FirstCall | None = None
    # The start's transaction, left open for the runner to commit while it sends the first
    # call (``overlap``); ``None``: committed already.
    pending: PendingStep | None = None


def busy(turn_id: str) -> Conflict:
    return Conflict(
        "busy",
        f"turn {turn_id} is still running in this session; wait for it to finish or cancel it, "
        "then start a new turn (turns are never queued)",
        turn_id=turn_id,
    )


def reused(turn: Turn) -> InvalidInput:
    """The same ``client_request_id`` with another input: a new request under an old key (as
    the IETF Idempotency-Key draft answers a key reused with a different payload: 422)."""
    return InvalidInput(
        "client_request_id_reused",
        f"client_request_id {turn.client_request_id!r} was already used for turn {turn.turn_id} "
        "with a different input; send the same input to get that turn again, or use a new "
        "client_request_id for a new request",
        turn_id=turn.turn_id,
    )


def _texts(input_items: Sequence[InputItem]) -> list[str]:
    texts = [i.text for i in input_items if isinstance(i, TextInput) and not is_blank(i.text)]
    if not texts:
        raise InvalidInput(
            "empty_input",
            "a turn needs at least one non-blank text input; skills alone are not a request",
        )
    return texts


def _snapshot(session: AgentSession, name: str, roots: Sequence[str]) -> SkillSnapshot:
    workspace = workspace_of(session) or {}
    provided = workspace.get("provided")
    if provided is not None:
        inputs = provided_inputs_of(provided)
        return provided_skill_snapshot(inputs, name, disabled_skills_of(session))
    return read_skill_snapshot(
        workspace.get("skills_root"),
        name,
        allowed_roots=roots,
        disabled_skills=disabled_skills_of(session),
    )


async def _skill_messages(
    session: AgentSession,
    input_items: Sequence[InputItem],
    roots: Sequence[str],
    counter: TokenCounter,
) -> list[NewMessage]:
    """Snapshots of the selected skills in input order, duplicates (same path) dropped; each
    body must be under the 8000-token cap (``skill_too_large``)."""
    messages: list[NewMessage] = []
    seen: set[str] = set()
    for item in input_items:
        if not isinstance(item, SkillInput):
            continue
        snapshot = await anyio.to_thread.run_sync(_snapshot, session, item.name, roots)
        if snapshot.path in seen:
            continue
        seen.add(snapshot.path)
        check_skill_body(snapshot.name, [text_block(snapshot.body)], counter)
        rendered = skill_instruction_item(snapshot.name, snapshot.path, snapshot.body)
        messages.append(
            NewMessage(
                role="user",
                kind="skill_instruction",
                content=rendered.content,
                token_counts=exact_counts(counter, "user", rendered.content),
            )
        )
    return messages


async def start_turn(
    deps: TurnDeps,
    owner: str,
    session_id: str,
    command: TurnStart,
    *,
    first_call: FirstCallPreparer | None = None,
    overlap: Callable[[ModelEntry], bool] | None = None,
) -> Started:
    """Order of checks: ``empty_input`` → ``reload_required`` → the same ``client_request_id``
    (the accepted turn, ``created=False``, when the input is the same; else
    ``client_request_id_reused``) → ``busy``; then skills. Raises
    ``RunningTurnExpired`` (nothing written) when the session's running turn lost its runner:
    the caller reaps it and starts again. ``first_call`` prepares the first model call in the
    same transaction when it applies (the turn is then stored in phase ``running_model``); then,
    when ``overlap`` says the model's client tells when a request is written, the transaction is
    handed to the runner to commit while it sends that call (``Started.pending``).
    A running turn past its deadline for tool results raises ``RunningTurnExpired`` too."""
    client_request_id, input_items = command.client_request_id, command.input
    # The input as stored and compared with a repeated start's: its items as the caller sent them.
    stored_input = [i.model_dump() for i in input_items]
    texts = _texts(input_items)
    async with AsyncExitStack() as stack:
        db = await stack.enter_async_context(unit_of_work(deps.db))
        await defer(db)  # the messages and updates go out together (``app.storage.deferred``)
        sessions = SessionRepository(db)
        # Starts of one session queue up here (the row lock on PostgreSQL, the write lock on
        # SQLite); the partial unique index still settles any race across replicas.
        session = await sessions.require(session_id, for_update=True)
        sessions.defer_counters(session)  # the messages and the update: one counter UPDATE
        if session.reload_required:
            raise Conflict(
                "reload_required",
                "a compaction checkpoint was stored but not installed; the session refuses new "
                "turns until it is rebuilt from the database",
            )
        turns = TurnRepository(db)
        existing, running = await turns.start_candidates(session_id, client_request_id)
        if running is not None and (lease_expired(running) or tool_results_overdue(running)):
            raise RunningTurnExpired(running.turn_id)
        if existing is not None:
            if existing.input != stored_input:
                raise reused(existing)
            return Started(existing, False, session, None)
        if running is not None:
            raise busy(running.turn_id)
        model = await resolve_model(db, session.model_id, session.tenant_id)
        counter = deps.counter(model.capabilities.token_counter)
        skills = await _skill_messages(session, input_items, deps.settings.workspace_roots, counter)
        merged = first_call is not None and first_call.applies(session)
        turn, _ = await turns.create_running(
            session_id=session_id,
            turn_id=f"turn-{uuid.uuid4().hex}",
            client_request_id=client_request_id,
            input=stored_input,
            phase="running_model" if merged else "starting",
            model_call_index=1 if merged else 0,
            lease_owner=owner,
            lease_expires_at=lease_expiry(deps),
            trace_context=deps.observability.traceparent(),
            checked=True,
        )
        content: list[Block] = [text_block(t) for t in texts]
        user = NewMessage(
            role="user",
            kind="normal",
            content=content,
            token_counts=checked_message("user", content, counter, model, where="the turn's input"),
        )
        stored = await MessageRepository(db).append(
            session_id,
            [
                NewMessage(
                    m.role, m.kind, m.content, turn_id=turn.turn_id, token_counts=m.token_counts
                )
                for m in [*skills, user]
            ],
        )
        events = deps.events.batch(session_id)
        await events.emit(
            db,
            session_id,
            "turn_started",
            {"client_request_id": client_request_id, "input": turn.input},
            turn_id=turn.turn_id,
        )
        await propose_pins(db, session_id, stored, events)
        first = pending = None
        if merged:
            assert first_call is not None
            await events.emit(
                db, session_id, "phase_changed", {"phase": "running_model"}, turn_id=turn.turn_id
            )
            first = await first_call.prepare(db, session, turn.turn_id, model)
        await events.flush(db)
        if first is not None and overlap is not None and overlap(model):
            pending = PendingStep(stack.pop_all())
    return Started(turn, True, session, model, first, pending)
