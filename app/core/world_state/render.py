"""Rendering of the four World State section bodies (spec §4), byte for byte.

Every section is rendered in full on every sampling; ``diff`` decides what is sent. A body of
``None`` means the section is absent this time.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from app.core.errors import InvalidInput
from app.core.world_state.escape import escape_text
from app.core.world_state.inputs import SandboxSettings, SkillEntry, WorkspaceInputs
from app.core.world_state.sections import (
    AGENTS_MD,
    PROJECT_CONTEXT,
    SANDBOX_POLICY,
    SECTION_IDS,
    SKILLS_CATALOG,
)

__all__ = [
    "CATALOG_FOOTER",
    "CATALOG_HEADER",
    "MAX_CATALOG_CHARS",
    "MAX_LAYOUT_ENTRIES",
    "MAX_PROJECT_CONTEXT_CHARS",
    "NO_WORKSPACE_DISPLAY",
    "RenderedSection",
    "render_agents_md",
    "render_project_context",
    "render_sandbox_policy",
    "render_sections",
    "render_skills_catalog",
]

MAX_LAYOUT_ENTRIES = 64
MAX_PROJECT_CONTEXT_CHARS = 16 * 1024
MAX_CATALOG_CHARS = 8000
# What the sandbox line shows as its workspace when the session has none.
NO_WORKSPACE_DISPLAY = "None"

CATALOG_HEADER = (
    "A skill is an instruction file named SKILL.md. "
    "These are all the skills available in this session."
)
CATALOG_FOOTER = (
    "When a task matches a description, read that file in full before acting; "
    "do not guess its content from the description.\n"
    "Relative paths inside a SKILL.md resolve against its own directory. "
    "If it has scripts/, run them instead of rewriting equivalent code.\n"
    "Read a chosen instruction file to the end; do not read unrelated references/."
)
# A blank line separates the header from the lines and the lines from the footer (the original
# runtime's HEADER ends and its FOOTER starts with a line break).
_CATALOG_OPEN = f"<available_skills>\n{CATALOG_HEADER}\n\n"
_CATALOG_CLOSE = f"\n{CATALOG_FOOTER}\n</available_skills>"

_BASH_WORKSPACE = "bash: runs in the sandbox and can write the workspace and temporary directories."
_BASH_TEMP_ONLY = (
    "bash: runs in the sandbox and can write temporary directories; "
    "writes to the workspace need sandboxPermissions."
)
_BASH_UNAVAILABLE = (
    "bash: unavailable, because the sandbox failed its self-check. Use read / grep / glob / "
    "edit for file work, and tell the user which command you need them to run."
)


@dataclass(frozen=True, slots=True)
class RenderedSection:
    """One section as rendered now. ``dropped``: catalog lines cut by the 8000-character limit,
    to be logged by the caller and never sent to the model."""

    section_id: str
    body: str | None
    dropped: tuple[str, ...] = ()


def render_project_context(inputs: WorkspaceInputs) -> str | None:
    """``runtime/user-project-context``; ``None`` without a workspace.

    Raises ``InvalidInput`` ``user_project_context_error`` when the body exceeds 16 384 chars.
    """
    if inputs.working_directory is None:
        return None
    root = inputs.repository_root
    lines = [
        '<user_project_context format_version="1">',
        f"Working directory: {escape_text(inputs.working_directory)}",
        f"Repository root: {escape_text(root) if root is not None else 'None detected'}",
        "Project layout:",
    ]
    # Code-point order is UTF-8 byte order for any string that can be encoded at all.
    entries = sorted(inputs.layout)
    if not entries:
        lines.append("- None")
    lines.extend(f"- {escape_text(entry)}" for entry in entries[:MAX_LAYOUT_ENTRIES])
    omitted = len(entries) - MAX_LAYOUT_ENTRIES
    if omitted > 0:
        lines.append(f"- ... {omitted} additional entries omitted")
    lines.append("</user_project_context>")
    body = "\n".join(lines)
    if len(body) > MAX_PROJECT_CONTEXT_CHARS:
        raise InvalidInput(
            "user_project_context_error",
            f"The project context is {len(body)} characters, over the limit of "
            f"{MAX_PROJECT_CONTEXT_CHARS}; use a shorter working directory path or shorter "
            "top-level entry names.",
            characters=len(body),
            limit=MAX_PROJECT_CONTEXT_CHARS,
        )
    return body


def render_agents_md(inputs: WorkspaceInputs) -> str | None:
    """``project/AGENTS.md``: the content verbatim; absent when missing or whitespace-only."""
    text = inputs.agents_md
    if inputs.working_directory is None or text is None or not text.strip():
        return None
    return f"<project_instructions>\n{text}\n</project_instructions>"


def render_skills_catalog(
    skills: Sequence[SkillEntry], disabled_skills: Iterable[str] = ()
) -> tuple[str | None, tuple[str, ...]]:
    """``skills/catalog``: (body or ``None``, lines dropped to stay within 8000 characters)."""
    disabled = frozenset(disabled_skills)
    lines = [
        f"- {s.name}: {s.description} (file: {s.path})" for s in skills if s.name not in disabled
    ]
    size = len(_CATALOG_OPEN) + len(_CATALOG_CLOSE) + sum(len(line) + 1 for line in lines)
    kept = len(lines)
    while size > MAX_CATALOG_CHARS and kept:
        kept -= 1
        size -= len(lines[kept]) + 1
    dropped = tuple(lines[kept:])
    if not kept:
        # No enabled skill, or not even one line fits: a catalog without lines says nothing.
        return None, dropped
    return _CATALOG_OPEN + "".join(f"{line}\n" for line in lines[:kept]) + _CATALOG_CLOSE, dropped


def render_sandbox_policy(sandbox: SandboxSettings, working_directory: str | None) -> str:
    """``runtime/sandbox-policy``, present when the agent has it: four lines inside the tags.

    The workspace is escaped like the project context so it cannot add a line, and shows
    ``None`` when the session has no workspace.
    """
    if not sandbox.available:
        bash = _BASH_UNAVAILABLE
    elif sandbox.mode == "auto":
        bash = _BASH_WORKSPACE
    else:
        bash = _BASH_TEMP_ONLY
    mode = "auto" if sandbox.mode == "auto" else "accept-edits"
    workspace = (
        escape_text(working_directory) if working_directory is not None else NO_WORKSPACE_DISPLAY
    )
    return (
        f"<sandbox_policy>\nmode: {mode}\nworkspace: {workspace}\n"
        f"write / edit: can change files in the workspace.\n{bash}\n</sandbox_policy>"
    )


def render_sections(
    inputs: WorkspaceInputs,
    sandbox: SandboxSettings,
    disabled_skills: Iterable[str] = (),
    sections: Collection[str] = SECTION_IDS,
) -> list[RenderedSection]:
    """All four sections in the fixed order; an absent one has ``body=None``.

    ``sections``: the ids the agent has (``app.core.agent_profile``); any other is absent and
    not rendered at all, so its own limits cannot refuse a request that would not show it.
    """
    catalog, dropped = (
        render_skills_catalog(inputs.skills, disabled_skills)
        if SKILLS_CATALOG in sections
        else (None, ())
    )
    wd = inputs.working_directory
    return [
        RenderedSection(
            PROJECT_CONTEXT,
            render_project_context(inputs) if PROJECT_CONTEXT in sections else None,
        ),
        RenderedSection(AGENTS_MD, render_agents_md(inputs) if AGENTS_MD in sections else None),
        RenderedSection(SKILLS_CATALOG, catalog, dropped),
        RenderedSection(
            SANDBOX_POLICY,
            render_sandbox_policy(sandbox, wd) if SANDBOX_POLICY in sections else None,
        ),
    ]
