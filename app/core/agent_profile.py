"""What kind of agent a session serves: its World State sections and control tools (spec §4, §6).

A general agent (the default) sees the instructions and the skill catalogue its workspace has
(each present only when there is one), no project layout, no sandbox policy unless one of its
tools runs commands, and it is offered no control tool. A coding
agent asks for the ``coding`` preset (every section, both control tools: the request every
session got before agents could choose) or names its choices one by one. The choice is made
once, when the session is created, and stored resolved: an agent cannot be changed, so its
sections never appear or vanish mid-session.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Literal

from app.core.world_state.sections import (
    AGENTS_MD,
    PROJECT_CONTEXT,
    SANDBOX_POLICY,
    SKILLS_CATALOG,
)

__all__ = [
    "CODING",
    "CONTROL_TOOL_NAMES",
    "PRESETS",
    "SECTION_FIELDS",
    "AgentProfile",
    "ContextSections",
    "Preset",
    "resolve_profile",
]

Preset = Literal["general", "coding"]
# The service's own tools, in the order they are advertised after the agent's tools.
CONTROL_TOOL_NAMES: tuple[str, ...] = ("update_plan", "conversation_history")


@dataclass(frozen=True, slots=True)
class ContextSections:
    """Which World State sections of spec §4 the agent has (the session's pins always are)."""

    project_layout: bool
    project_instructions: bool
    skill_catalog: bool
    sandbox_policy: bool

    def section_ids(self) -> frozenset[str]:
        """The ids of spec §4's sections the agent has (what ``render_sections`` renders)."""
        return frozenset(sid for sid, field in SECTION_FIELDS.items() if getattr(self, field))


# The API's field name of each section id.
SECTION_FIELDS: Mapping[str, str] = MappingProxyType(
    {
        PROJECT_CONTEXT: "project_layout",
        AGENTS_MD: "project_instructions",
        SKILLS_CATALOG: "skill_catalog",
        SANDBOX_POLICY: "sandbox_policy",
    }
)


@dataclass(frozen=True, slots=True)
class AgentProfile:
    preset: Preset
    sections: ContextSections
    control_tools: tuple[str, ...]


CODING = AgentProfile("coding", ContextSections(True, True, True, True), CONTROL_TOOL_NAMES)
# The layout of a working directory serves an agent that works on files: a general agent asks.
_GENERAL = AgentProfile("general", ContextSections(False, True, True, False), ())
PRESETS: Mapping[str, AgentProfile] = MappingProxyType({"general": _GENERAL, "coding": CODING})


def resolve_profile(
    preset: Preset,
    sections: Mapping[str, bool | None],
    control_tools: Sequence[str] | None,
    *,
    runs_commands: bool,
) -> AgentProfile:
    """The preset with the caller's explicit choices over it (``None``: the preset's).

    ``runs_commands``: one of the agent's tools runs commands, which a general agent's sandbox
    policy follows unless the caller chose. Control tools keep the service's order whatever
    order they were named in, so the same choice gives the same request.
    """
    base = PRESETS[preset]
    chosen = {k: v for k, v in sections.items() if v is not None}
    if preset == "general" and runs_commands:
        chosen.setdefault("sandbox_policy", True)
    tools = base.control_tools
    if control_tools is not None:
        named = frozenset(control_tools)
        tools = tuple(t for t in CONTROL_TOOL_NAMES if t in named)
    return AgentProfile(preset, replace(base.sections, **chosen), tools)
