"""A session's stored configuration as the pipeline reads it, checked where it is read.

The API stores only what its schemas allow (``app.api.schemas.sessions``), but a row is kept for
ever: one written by another version or edited by hand must not turn a read into an internal
error. Each accessor checks the shape of what it reads — type checks only, as they run on every
turn step — and raises 409 ``session_config_invalid`` naming the field, so the caller learns
which session cannot be used and what to do (the agent cannot be changed: a new session; the
workspace, sandbox and disabled skills can be replaced with ``PATCH``).
"""

from __future__ import annotations

import weakref
from typing import Any, TypedDict, cast

from app.core.agent_profile import (
    CODING,
    CONTROL_TOOL_NAMES,
    PRESETS,
    SECTION_FIELDS,
    AgentProfile,
    ContextSections,
)
from app.core.content import is_blank
from app.core.conversation_view import ConversationView, view_from_json
from app.core.errors import Conflict
from app.core.pipeline.prepared_call import ToolDefinition
from app.core.world_state.inputs import SandboxSettings
from app.storage.models import AgentSession

__all__ = [
    "agent_int",
    "agent_of",
    "agent_profile_of",
    "conversation_view_of",
    "disabled_skills_of",
    "sandbox_of",
    "spill_directory_of",
    "system_prompt_of",
    "tools_of",
    "workspace_of",
]


def _invalid(session: AgentSession, field: str, what: str) -> Conflict:
    return Conflict(
        "session_config_invalid",
        f"session {session.id} cannot be used: its stored {field} {what} (this version's API "
        "never stores that: another version or a hand edit wrote it); the agent cannot be "
        f"changed, so start a new session for it; workspace, sandbox and disabled_skills can "
        f"be replaced with PATCH /v1/sessions/{session.id}",
        field=field,
    )


def agent_of(session: AgentSession) -> dict[str, Any]:
    agent = session.agent
    if not isinstance(agent, dict):
        raise _invalid(session, "agent", "is not an object")
    return agent


def system_prompt_of(session: AgentSession) -> str:
    prompt = agent_of(session).get("system_prompt")
    if not isinstance(prompt, str):
        raise _invalid(session, "agent.system_prompt", "is not a string")
    if is_blank(prompt):  # stored before creation refused it
        raise _invalid(session, "agent.system_prompt", "is blank")
    return prompt


def tools_of(session: AgentSession) -> list[ToolDefinition]:
    """The agent's tools, each with a string name and description and an ``input_schema``
    (passed on as stored: a hostile schema is the provider's to refuse, not a read's)."""
    tools = agent_of(session).get("tools", [])
    if not isinstance(tools, list):
        raise _invalid(session, "agent.tools", "is not a list")
    for index, tool in enumerate(tools):
        if not (
            isinstance(tool, dict)
            and isinstance(tool.get("name"), str)
            and isinstance(tool.get("description"), str)
            and "input_schema" in tool
        ):
            raise _invalid(
                session,
                f"agent.tools[{index}]",
                "is not a tool (a string name and description, an input_schema)",
            )
    # Checked above: each has the keys a ToolDefinition has (and maybe ``runs_commands``).
    return cast(list[ToolDefinition], tools)


def agent_profile_of(session: AgentSession) -> AgentProfile:
    """The agent's World State sections and control tools as stored resolved at creation
    (``app.core.agent_profile``). A row without them was written before agents could choose,
    when every session was a coding agent: it stays one, so its requests do not change."""
    agent = agent_of(session)
    if not any(k in agent for k in ("preset", "context_sections", "control_tools")):
        return CODING
    preset = agent.get("preset")
    base = PRESETS.get(preset) if isinstance(preset, str) else None
    if base is None:
        raise _invalid(session, "agent.preset", "is not a preset")
    sections = agent.get("context_sections")
    if not (
        isinstance(sections, dict)
        and sections.keys() == set(SECTION_FIELDS.values())
        and all(isinstance(v, bool) for v in sections.values())
    ):
        raise _invalid(session, "agent.context_sections", "is not a choice of the four sections")
    tools = agent.get("control_tools")
    if not isinstance(tools, list) or not set(tools) <= set(CONTROL_TOOL_NAMES):
        raise _invalid(session, "agent.control_tools", "is not a list of control tools")
    chosen = tuple(t for t in CONTROL_TOOL_NAMES if t in tools)
    return AgentProfile(base.preset, ContextSections(**sections), chosen)


def agent_int(session: AgentSession, key: str, default: int) -> int:
    """A positive count of the agent's (``max_model_calls``, ``doom_loop_threshold``): missing
    or null is ``default``, a fraction is cut as it always was (``int``)."""
    value = agent_of(session).get(key)
    if value is None:
        return default
    if not isinstance(value, int | float) or isinstance(value, bool) or not 1 <= value < 2**63:
        raise _invalid(session, f"agent.{key}", "is not a positive number")
    return int(value)


class StoredWorkspace(TypedDict, total=False):
    """``workspace`` as the API stores it: a server directory (``working_directory`` and its
    optional roots) or ``provided`` inputs (``ProvidedWorkspaceIn``, checked by
    ``app.core.world_state.provided.provided_inputs_of``); empty: none."""

    working_directory: str
    skills_root: str | None
    spill_directory: str | None
    provided: dict[str, Any]


def workspace_of(session: AgentSession) -> StoredWorkspace | None:
    """The workspace (``None`` or empty: none): a server directory (its paths strings) or
    ``provided`` inputs shaped as the API stores them (``ProvidedWorkspaceIn``)."""
    workspace = session.workspace
    if workspace is None:
        return None
    if not isinstance(workspace, dict):
        raise _invalid(session, "workspace", "is not an object")
    if _checked.get(session) is workspace:
        return cast(StoredWorkspace, workspace)
    provided = workspace.get("provided")
    if provided is not None:
        _check_provided(session, provided)
    elif workspace:
        if not isinstance(workspace.get("working_directory"), str):
            raise _invalid(session, "workspace.working_directory", "is not a path")
        for key in ("skills_root", "spill_directory"):
            if not isinstance(workspace.get(key), str | None):
                raise _invalid(session, f"workspace.{key}", "is not a path")
    _checked[session] = workspace
    return cast(StoredWorkspace, workspace)


# The workspace each loaded row last passed ``workspace_of`` with: a turn step reads it several
# times (the capture, its source, the sample), and a provided layout may hold 100 000 entries
# (~2.5 ms to check). Keyed weakly by the row's object; a new value (a PATCH) is checked again.
_checked: weakref.WeakKeyDictionary[AgentSession, dict[str, Any]] = weakref.WeakKeyDictionary()


_SKILL_KEYS = frozenset({"name", "description", "path", "body"})


def _check_provided(session: AgentSession, provided: Any) -> None:
    """Types only: the values' own rules (sizes, names) are ``provided_inputs``'s, which every
    reader applies."""
    field = "workspace.provided"
    if not isinstance(provided, dict):
        raise _invalid(session, field, "is not an object")
    if not isinstance(provided.get("working_directory"), str):
        raise _invalid(session, f"{field}.working_directory", "is not a string")
    for key in ("repository_root", "agents_md"):
        if not isinstance(provided.get(key), str | None):
            raise _invalid(session, f"{field}.{key}", "is not a string")
    layout = provided.get("layout", [])
    if not isinstance(layout, list) or not all(map(str.__instancecheck__, layout)):
        raise _invalid(session, f"{field}.layout", "is not a list of strings")
    skills = provided.get("skills", [])
    if not isinstance(skills, list):
        raise _invalid(session, f"{field}.skills", "is not a list")
    for index, skill in enumerate(skills):
        if not (
            isinstance(skill, dict)
            and skill.keys() <= _SKILL_KEYS
            and all(isinstance(skill.get(key), str) for key in ("name", "description", "path"))
            and isinstance(skill.get("body"), str | None)
        ):
            raise _invalid(
                session,
                f"{field}.skills[{index}]",
                "is not a skill (string name, description and path, an optional string body)",
            )


def spill_directory_of(session: AgentSession) -> str | None:
    """Where pruned tool output is written out (``None``: nowhere)."""
    spill: str | None = (workspace_of(session) or {}).get("spill_directory")
    return spill


def sandbox_of(session: AgentSession) -> SandboxSettings:
    """The sandbox settings; a missing one is the default's (``auto``, available)."""
    sandbox = session.sandbox
    if sandbox is None:
        sandbox = {}
    if not isinstance(sandbox, dict):
        raise _invalid(session, "sandbox", "is not an object")
    return SandboxSettings(
        mode=sandbox.get("mode", "auto"), available=sandbox.get("available", True)
    )


def disabled_skills_of(session: AgentSession) -> list[str]:
    skills = session.disabled_skills
    if skills is None:
        return []
    if not isinstance(skills, list) or not all(isinstance(s, str) for s in skills):
        raise _invalid(session, "disabled_skills", "is not a list of names")
    return skills


def conversation_view_of(session: AgentSession) -> ConversationView:
    """The messages taken back and the latest epoch (``app.core.conversation_view``)."""
    view = view_from_json(session.conversation_view)
    if view is None:
        raise _invalid(session, "conversation_view", "is not a view this version writes")
    return view
