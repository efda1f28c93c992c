"""Sessions: create, list, read, patch (spec §15.1)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

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
from app.services.session_config import system_prompt_of
from app.services.tool_schemas import unresolvable_reference
from app.settings import Settings
from app.storage.base import utc_now
from app.storage.database import SessionFactory, unit_of_work
from app.storage.models import AgentSession
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.sessions import SessionRepository
from app.storage.repositories.turn_usage import NO_USAGE, TurnUsage, usage_by_session
from app.workspace.paths import validate_directory, validate_working_directory

__all__ = ["SessionService", "session_to_json"]


def session_to_json(
    row: AgentSession, usage: TurnUsage = NO_USAGE, active_bytes: int = 0
) -> dict[str, Any]:
    return {
        "id": row.id,
        "title": row.title,
        "model_id": row.model_id,
        "summary_model_id": row.summary_model_id,
        "agent": _shown_agent(row.agent),
        "workspace": row.workspace,
        "sandbox": row.sandbox,
        "disabled_skills": row.disabled_skills,
        "tool_result_pruned_through_sequence": row.tool_result_pruned_through_sequence,
        "message_count": row.last_message_sequence,
        # The id of the session's last update: follow only what comes after it with
        # ``Last-Event-ID`` (or ``?after=``) on ``GET .../events``.
        "last_event_sequence": row.last_event_sequence,
        "reload_required": row.reload_required,
        # The estimate of the active history as stored (before pruning and projection):
        # which sessions are heavy, without preparing each one.
        "active_history_tokens": estimate_tokens(active_bytes),
        # What the session's turns cost so far, as the providers reported it.
        "usage": {
            "turns": usage.turns,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cached_tokens": usage.cached_tokens,
            "cache_creation_tokens": usage.cache_creation_tokens,
            "reasoning_tokens": usage.reasoning_tokens,
        },
        "created_at": row.created_at.isoformat().replace("+00:00", "Z"),
        "updated_at": row.updated_at.isoformat().replace("+00:00", "Z"),
    }


async def _with_figures(db: AsyncSession, rows: Sequence[AgentSession]) -> list[dict[str, Any]]:
    """The JSON of ``rows`` with their usage and active history (two queries for all)."""
    ids = [r.id for r in rows]
    usage = await usage_by_session(db, ids)
    # A view this version cannot read hides nothing here: a list never refuses a row (the
    # session's own requests refuse it, with the reason).
    views = {r.id: view_from_json(r.conversation_view) or EMPTY_VIEW for r in rows}
    history = await MessageRepository(db).active_bytes(views)
    return [session_to_json(r, usage.get(r.id, NO_USAGE), history.get(r.id, 0)) for r in rows]


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


def _with_profile(agent: dict[str, Any]) -> dict[str, Any]:
    """The agent as stored: its preset and choices resolved once (``app.core.agent_profile``),
    so what a session's requests hold never depends on a later version's defaults."""
    profile = resolve_profile(
        agent.get("preset", "general"),
        agent.get("context_sections") or {},
        agent.get("control_tools"),
        runs_commands=any(t.get("runs_commands") for t in agent.get("tools", [])),
    )
    return _profile_json(agent, profile)


class SessionService:
    def __init__(
        self, db: SessionFactory, settings: Settings, counters: Callable[[str], TokenCounter]
    ) -> None:
        self._db = db
        self._settings = settings
        self._counters = counters

    def _check_agent(self, agent: dict[str, Any]) -> None:
        if is_blank(agent["system_prompt"]):
            # Every prepare and turn of the session would refuse it (an empty System Context
            # part): the session is refused instead.
            raise InvalidInput(
                "empty_system_context_part",
                "the agent's system_prompt is blank; give the agent a prompt",
                key=AGENT_SYSTEM_KEY,
                field="agent.system_prompt",
            )
        names = [t["name"] for t in agent.get("tools", [])]
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
        for tool in agent.get("tools", []):
            unresolvable = unresolvable_reference(tool["input_schema"])
            if unresolvable is not None:
                reference, why = unresolvable
                raise InvalidInput(
                    "unresolvable_schema_ref",
                    f"the input_schema of tool '{tool['name']}' has a $ref {reference!r} that "
                    f"cannot be resolved ({why}); no call of that tool could be checked. Define "
                    "the referenced subschema inside the schema (e.g. under $defs) and point "
                    "the $ref at it",
                    tool=tool["name"],
                    ref=reference,
                )

    def _check_workspace(self, workspace: dict[str, Any] | None) -> dict[str, Any] | None:
        """Validate and canonicalize a workspace; a 4xx before anything is stored."""
        if workspace is None:
            return None
        provided = workspace.get("provided")
        if provided is not None:
            provided_inputs_of(provided)
            return {"provided": provided}
        roots = self._settings.workspace_roots
        result: dict[str, Any] = {
            "working_directory": validate_working_directory(workspace["working_directory"], roots)
        }
        for key, what in (("skills_root", "skills root"), ("spill_directory", "spill directory")):
            if workspace.get(key):
                result[key] = validate_directory(workspace[key], roots, what=what)
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

    async def create(self, spec: dict[str, Any], tenant_id: str) -> dict[str, Any]:
        """A new session of ``tenant_id`` (the tenant of the calling key)."""
        self._check_agent(spec["agent"])
        spec["agent"] = _with_profile(spec["agent"])
        workspace = self._check_workspace(spec.get("workspace"))
        summary_model_id = spec.get("summary_model_id") or spec["model_id"]
        now = utc_now()
        async with unit_of_work(self._db) as db:
            model, _ = await self._check_models(
                db, tenant_id, model_id=spec["model_id"], summary_model_id=summary_model_id
            )
            self._check_system_prompt(spec["agent"]["system_prompt"], model)
            row = AgentSession(
                id=f"ses-{uuid.uuid4().hex}",
                tenant_id=tenant_id,
                title=spec.get("title"),
                model_id=spec["model_id"],
                summary_model_id=summary_model_id,
                agent=spec["agent"],
                workspace=workspace,
                sandbox=spec["sandbox"],
                disabled_skills=sorted(set(spec.get("disabled_skills", []))),
                tool_result_pruned_through_sequence=None,
                last_message_sequence=0,
                last_event_sequence=0,
                reload_required=False,
                created_at=now,
                updated_at=now,
            )
            await SessionRepository(db).add(row)
            return session_to_json(row)

    async def get(self, session_id: str) -> dict[str, Any]:
        async with unit_of_work(self._db, read_only=True) as db:
            row = await SessionRepository(db).require(session_id)
            return (await _with_figures(db, [row]))[0]

    async def list(self, tenant_id: str, *, limit: int, cursor: str | None) -> dict[str, Any]:
        before = decode_cursor(cursor, SESSION_CURSOR) if cursor else None
        async with unit_of_work(self._db, read_only=True) as db:
            rows = list(
                await SessionRepository(db).list_page(tenant_id, limit=limit + 1, before=before)
            )
            page = rows[:limit]
            sessions = await _with_figures(db, page)
        last = page[-1] if len(rows) > limit else None
        return {
            "sessions": sessions,
            "next_cursor": None if last is None else encode_cursor(last.created_at, last.id),
        }

    async def patch(self, session_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        workspace = self._check_workspace(changes["workspace"]) if "workspace" in changes else None
        async with unit_of_work(self._db) as db:
            row = await SessionRepository(db).require(session_id, for_update=True)
            models = {k: changes[k] for k in ("model_id", "summary_model_id") if changes.get(k)}
            entries = await self._check_models(db, row.tenant_id, **models)
            if changes.get("model_id"):
                self._check_system_prompt(system_prompt_of(row), entries[0])
            for key in ("title", "model_id", "summary_model_id"):
                if key in changes and (changes[key] is not None or key == "title"):
                    setattr(row, key, changes[key])
            if changes.get("sandbox") is not None:  # the settings given, over the stored ones
                # (over nothing when the stored ones are not an object: this repairs them)
                stored = row.sandbox if isinstance(row.sandbox, dict) else {}
                row.sandbox = {**stored, **changes["sandbox"]}
            if changes.get("disabled_skills") is not None:
                row.disabled_skills = sorted(set(changes["disabled_skills"]))
            if "workspace" in changes:
                row.workspace = workspace
            row.updated_at = utc_now()
            await db.flush()
            return (await _with_figures(db, [row]))[0]
