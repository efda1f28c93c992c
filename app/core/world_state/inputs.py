"""What World State is rendered from: workspace inputs and sandbox settings (spec §4).

Both sources of a workspace end up as the same ``WorkspaceInputs``: ``app.workspace`` captures
one from a server directory, ``provided_inputs`` builds one from values a caller supplies for its
session. The renderer never knows which it got ("rendered by the same rules either way").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, TypeAlias

__all__ = [
    "NO_WORKSPACE",
    "SandboxMode",
    "SandboxSettings",
    "SkillEntry",
    "SkillSnapshot",
    "WorkspaceInputs",
]

SandboxMode: TypeAlias = Literal["auto", "accept_edits"]


@dataclass(frozen=True, slots=True)
class SkillEntry:
    """One catalog line; ``body`` only for caller-provided skills (see ``provided_inputs``).

    A filesystem skill has ``body=None``: its SKILL.md is read again when a turn selects it, so
    the snapshot is the file as it is at that moment (spec §6).
    """

    name: str
    description: str
    path: str
    body: str | None = None


@dataclass(frozen=True, slots=True)
class SkillSnapshot:
    """A selected skill as a turn stores it: its path and its body without front matter."""

    name: str
    path: str
    body: str


@dataclass(frozen=True, slots=True)
class WorkspaceInputs:
    """Everything the project-context, AGENTS.md and skills-catalog sections are made of.

    ``working_directory`` ``None`` means the session has no workspace: the project-context and
    AGENTS.md sections are then absent (spec §15.2) whatever else is set. ``layout`` holds the
    top-level entry names already suffixed (``/`` directory, ``@`` symlink) in any order: the
    renderer sorts and cuts them. ``agents_md`` is the file content verbatim, ``None`` when there
    is none. ``skills`` are sorted by name. ``warnings`` are the skills skipped during discovery,
    for the log only (never sent to the model).
    """

    working_directory: str | None = None
    repository_root: str | None = None
    layout: tuple[str, ...] = ()
    agents_md: str | None = None
    skills: tuple[SkillEntry, ...] = ()
    warnings: tuple[str, ...] = ()

    def skill(self, name: str, disabled_skills: Iterable[str] = ()) -> SkillEntry | None:
        """The enabled skill called ``name``, or ``None``."""
        if name in set(disabled_skills):
            return None
        return next((s for s in self.skills if s.name == name), None)


NO_WORKSPACE = WorkspaceInputs()


@dataclass(frozen=True, slots=True)
class SandboxSettings:
    """Session settings the caller supplies; ``available=False`` means the self-check failed."""

    mode: SandboxMode
    available: bool
