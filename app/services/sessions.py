"""Sessions: create, list, read, patch (spec §15.1)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.api.schemas.sessions import (
    AgentIn,
    ProvidedWorkspaceRootIn,
    SessionCreate,
    SessionPatch,
    WorkspaceIn,
)
from app.core.agent_profile import CODING, SECTION_FIELDS, AgentProfile, resolve_profile
from app.core.content import is_blank, text_block
from app.core.conversation_view import EMPTY_VIEW, view_from_json
from app.core.counting import TokenCounter, estimate_tokens
from app.core.errors import InvalidInput
from app.core.pipeline.item_caps import check_system_part
from app.core.world_state.provided import provided_inputs_of
from app.services.conversation import AGENT_SYSTEM_KEY, SERVER_TOOL_NAMES
from app.services.cursors import SESSION_CURSOR, decode_cursor, encode_cursor
from app.services.model_types import ModelEntry
from app.services.models import resolve_named_model
from app.services.session_config import StoredWorkspace, system_prompt_of
from app.services.tool_schemas import unresolvable_reference
from app.settings import Settings
from app.storage.base import utc_now
from app.storage.database import SessionFactory, unit_of_work
from app.storage.models import AgentSession
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.sessions import SessionRepository
from app.storage.repositories.turn_usage import (
    NO_USAGE,
    TurnUsage,
    usage_by_session,
    with_proxied,
)
from app.workspace.paths import validate_directory, validate_working_directory

__all__ = ["SessionPage", "SessionService", "SessionView"]


@dataclass(frozen=True, slots=True)
class SessionView:
    """A session as read, with its figures (``SessionOut`` on the wire, rendered by
    ``app.api.render.sessions``). ``agent``, ``workspace`` and ``sandbox`` are the stored JSON,
    shown as stored: a read never refuses a row."""

    id: str
    title: str | None
    model_id: str
    summary_model_id: str
    agent: Any
    workspace: Any
    sandbox: Any
    disabled_skills: Any
    tool_result_pruned_through_sequence: int | None
    message_count: int
    # The id of the session's last update: follow only what comes after it with
    # ``Last-Event-ID`` (or ``?after=``) on ``GET .../events``.
    last_event_sequence: int
    reload_required: bool
    # Who made it: ``None`` (the sessions API) or ``proxy:<protocol>`` (spec §21), and the
    # proxied session its history was forked from.
    origin: str | None
    forked_from: str | None
    # The estimate of the active history as stored (before pruning and projection): which
    # sessions are heavy, without preparing each one.
    active_history_tokens: int
    # What the session's turns and proxied calls cost so far, as the providers reported it.
    usage: TurnUsage
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(
        cls, row: AgentSession, usage: TurnUsage = NO_USAGE, active_bytes: int = 0
    ) -> SessionView:
        return cls(
            id=row.id,
            title=row.title,
            model_id=row.model_id,
            summary_model_id=row.summary_model_id,
            agent=_shown_agent(row.agent),
            workspace=row.workspace,
            sandbox=row.sandbox,
            disabled_skills=row.disabled_skills,
            tool_result_pruned_through_sequence=row.tool_result_pruned_through_sequence,
            message_count=row.last_message_sequence,
            last_event_sequence=row.last_event_sequence,
            reload_required=row.reload_required,
            origin=row.origin,
            forked_from=row.forked_from,
            active_history_tokens=estimate_tokens(active_bytes),
            usage=with_proxied(usage, row),
            created_at=row.created_at,
            updated_at=row.updated_at,
        )


@dataclass(frozen=True, slots=True)
class SessionPage:
    """One page of a tenant's sessions, newest first."""

    sessions: list[SessionView]
    next_cursor: str | None


async def _with_figures(db: AsyncSession, rows: Sequence[AgentSession]) -> list[SessionView]:
    """``rows`` with their usage and active history (two queries for all)."""
    ids = [r.id for r in rows]
    usage = await usage_by_session(db, ids)
    # A view this version cannot read hides nothing here: a list never refuses a row (the
    # session's own requests refuse it, with the reason).
    views = {r.id: view_from_json(r.conversation_view) or EMPTY_VIEW for r in rows}
    history = await MessageRepository(db).active_bytes(views)
    return [SessionView.of(r, usage.get(r.id, NO_USAGE), history.get(r.id, 0)) for r in rows]


def _shown_agent(agent: Any) -> Any:
    """The agent as stored; one stored before agents could choose shows the coding agent it
    is (``agent_profile_of``). Anything else is shown as it is: a read never refuses a row."""
    if isinstance(agent, dict) and not agent.keys() & _PROFILE_KEYS:
        return _profile_json(agent, CODING)
    return agent


def _profile_json(agent: dict[str, Any], profile: AgentProfile) -> dict[str, Any]:
    return {
        **agent,
        "preset": profile.preset,
        "context_sections": {
            field: sid in profile.sections.section_ids() for sid, field in SECTION_FIELDS.items()
        },
        "control_tools": list(profile.control_tools),
    }


_PROFILE_KEYS = frozenset({"preset", "context_sections", "control_tools"})


def _with_profile(agent: AgentIn) -> dict[str, Any]:
    """The agent as stored: its preset and choices resolved once (``app.core.agent_profile``),
    so what a session's requests hold never depends on a later version's defaults."""
    profile = resolve_profile(
        agent.preset,
        agent.context_sections.model_dump(),
        agent.control_tools,
        runs_commands=any(t.runs_commands for t in agent.tools),
    )
    return _profile_json(agent.model_dump(), profile)


class SessionService:
    def __init__(
        self, db: SessionFactory, settings: Settings, counters: Callable[[str], TokenCounter]
    ) -> None:
        self._db = db
        self._settings = settings
        self._counters = counters

    def _check_agent(self, agent: AgentIn) -> None:
        if is_blank(agent.system_prompt):
            # Every prepare and turn of the session would refuse it (an empty System Context
            # part): the session is refused instead.
            raise InvalidInput(
                "empty_system_context_part",
                "the agent's system_prompt is blank; give the agent a prompt",
                key=AGENT_SYSTEM_KEY,
                field="agent.system_prompt",
            )
        names = [t.name for t in agent.tools]
        clash = sorted(SERVER_TOOL_NAMES.intersection(names))
        if clash:
            raise InvalidInput(
                "tool_name_conflict",
                f"tool name(s) {clash} are server-side tools the service provides itself; "
                "rename the agent's tool",
            )
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise InvalidInput("duplicate_tool_name", f"tool name(s) {dupes} appear twice")
        for tool in agent.tools:
            unresolvable = unresolvable_reference(tool.input_schema)
            if unresolvable is not None:
                reference, why = unresolvable
                raise InvalidInput(
                    "unresolvable_schema_ref",
                    f"the input_schema of tool '{tool.name}' has a $ref {reference!r} that "
                    f"cannot be resolved ({why}); no call of that tool could be checked. Define "
                    "the referenced subschema inside the schema (e.g. under $defs) and point "
                    "the $ref at it",
                    tool=tool.name,
                    ref=reference,
                )

    def _check_workspace(self, given: WorkspaceIn | None) -> StoredWorkspace | None:
        """Validate and canonicalize a workspace (as stored); a 4xx before anything is stored."""
        if isinstance(given, ProvidedWorkspaceRootIn):
            provided = given.provided.model_dump(exclude_none=True)
            provided_inputs_of(provided)
            return {"provided": provided}
        if given is None:
            return None
        roots = self._settings.workspace_roots
        result: StoredWorkspace = {
            "working_directory": validate_working_directory(given.working_directory, roots)
        }
        # Keys in the order they always had: the stored JSON (and the answer) keeps it.
        if given.skills_root:
            result["skills_root"] = validate_directory(given.skills_root, roots, what="skills root")
        if given.spill_directory:
            result["spill_directory"] = validate_directory(
                given.spill_directory, roots, what="spill directory"
            )
        return result

    async def _check_models(
        self, db: AsyncSession, tenant_id: str, **model_ids: str
    ) -> list[ModelEntry]:
        """The models the body names, by field (``model_id``, ``summary_model_id``), as the
        session's tenant sees them."""
        return [
            await resolve_named_model(db, v, field, tenant_id) for field, v in model_ids.items()
        ]

    def _check_system_prompt(self, prompt: str, model: ModelEntry) -> None:
        """The agent prompt is the System Context of every request (spec §3.3 caps a part at
        10 000 tokens): a prompt at the cap under the session model's counter would make every
        prepare and turn of the session fail, so the session is refused instead. The agent
        cannot be patched; a change of model is checked again."""
        counter = self._counters(model.capabilities.token_counter)
        check_system_part(AGENT_SYSTEM_KEY, [text_block(prompt)], counter)

    async def create(self, spec: SessionCreate, tenant_id: str) -> SessionView:
        """A new session of ``tenant_id`` (the tenant of the calling key)."""
        async with unit_of_work(self._db) as db:
            return SessionView.of(await self.create_in(db, spec, tenant_id))

    async def create_in(
        self,
        db: AsyncSession,
        spec: SessionCreate,
        tenant_id: str,
        *,
        origin: str | None = None,
        forked_from: str | None = None,
    ) -> AgentSession:
        """``create`` in the caller's transaction; ``origin`` and ``forked_from``: a compatible
        endpoint's session (spec §21)."""
        self._check_agent(spec.agent)
        agent = _with_profile(spec.agent)
        workspace = self._check_workspace(spec.workspace)
        summary_model_id = spec.summary_model_id or spec.model_id
        now = utc_now()
        model, _ = await self._check_models(
            db, tenant_id, model_id=spec.model_id, summary_model_id=summary_model_id
        )
        self._check_system_prompt(spec.agent.system_prompt, model)
        row = AgentSession(
            id=f"ses-{uuid.uuid4().hex}",
            tenant_id=tenant_id,
            title=spec.title,
            model_id=spec.model_id,
            summary_model_id=summary_model_id,
            agent=agent,
            workspace=workspace,
            sandbox=spec.sandbox.model_dump(),
            disabled_skills=sorted(set(spec.disabled_skills)),
            tool_result_pruned_through_sequence=None,
            last_message_sequence=0,
            last_event_sequence=0,
            reload_required=False,
            origin=origin,
            forked_from=forked_from,
            created_at=now,
            updated_at=now,
        )
        await SessionRepository(db).add(row)
        return row

    async def get(self, session_id: str) -> SessionView:
        async with unit_of_work(self._db, read_only=True) as db:
            row = await SessionRepository(db).require(session_id)
            return (await _with_figures(db, [row]))[0]

    async def list(self, tenant_id: str, *, limit: int, cursor: str | None) -> SessionPage:
        before = decode_cursor(cursor, SESSION_CURSOR) if cursor else None
        async with unit_of_work(self._db, read_only=True) as db:
            rows = list(
                await SessionRepository(db).list_page(tenant_id, limit=limit + 1, before=before)
            )
            page = rows[:limit]
            sessions = await _with_figures(db, page)
        last = page[-1] if len(rows) > limit else None
        next_cursor = None if last is None else encode_cursor(last.created_at, last.id)
        return SessionPage(sessions, next_cursor)

    async def patch(self, session_id: str, changes: SessionPatch) -> SessionView:
        """The fields the body gives (``model_fields_set``) replace the stored ones; ``null``
        clears only the title and the workspace."""
        given = changes.model_fields_set
        workspace = self._check_workspace(changes.workspace) if "workspace" in given else None
        async with unit_of_work(self._db) as db:
            row = await SessionRepository(db).require(session_id, for_update=True)
            models = {k: v for k in ("model_id", "summary_model_id") if (v := getattr(changes, k))}
            entries = await self._check_models(db, row.tenant_id, **models)
            if changes.model_id:
                self._check_system_prompt(system_prompt_of(row), entries[0])
            for key in ("title", "model_id", "summary_model_id"):
                value = getattr(changes, key)
                if key in given and (value is not None or key == "title"):
                    setattr(row, key, value)
            if changes.sandbox is not None:  # the settings given, over the stored ones
                # (over nothing when the stored ones are not an object: this repairs them)
                stored = row.sandbox if isinstance(row.sandbox, dict) else {}
                row.sandbox = {**stored, **changes.sandbox.model_dump(exclude_unset=True)}
            if changes.disabled_skills is not None:
                row.disabled_skills = sorted(set(changes.disabled_skills))
            if "workspace" in given:
                row.workspace = None if workspace is None else dict(workspace)
            row.updated_at = utc_now()
            await db.flush()
            return (await _with_figures(db, [row]))[0]
