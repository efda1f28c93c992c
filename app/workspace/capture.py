"""Capturing World State inputs from a server directory (spec §4)."""

from __future__ import annotations

from collections.abc import Sequence

from app.core.errors import InvalidInput, ServiceError
from app.core.world_state import WorkspaceInputs
from app.workspace.agents_md import read_agents_md
from app.workspace.layout import find_repository_root, list_layout
from app.workspace.paths import open_directory_chain, resolve_under_roots
from app.workspace.skills import discover_skills

__all__ = ["capture_filesystem"]


def _context_error(detail: str) -> InvalidInput:
    return InvalidInput("user_project_context_error", detail)


def capture_filesystem(
    working_directory: str, *, allowed_roots: Sequence[str], skills_root: str | None
) -> WorkspaceInputs:
    """Everything the World State sections need, read now from the server's filesystem.

    The working directory is checked again (it was checked when the session was set up, but the
    filesystem or the allow-list may have changed since). Errors are the sampling failures spec §4
    names: ``user_project_context_error`` (working directory, repository root, layout),
    ``project_instruction_error`` (AGENTS.md), ``skill_catalog_error`` (skills root). Skills
    that are individually broken are skipped and listed in ``warnings``. Never reads a file
    other than AGENTS.md and each SKILL.md.
    """
    try:
        resolved = resolve_under_roots(working_directory, allowed_roots)
    except ServiceError as exc:
        raise InvalidInput("user_project_context_error", exc.detail, cause=exc.code) from None
    try:
        with open_directory_chain(resolved) as chain:
            repository = find_repository_root(chain)
            listed_fd = repository[1] if repository is not None else chain[-1][1]
            layout = list_layout(listed_fd)
            agents_md = read_agents_md(chain[-1][1], resolved.path)
    except OSError as exc:
        raise _context_error(
            f"The working directory {working_directory!r} could not be read "
            f"({exc.strerror}); check that it still exists and is readable."
        ) from None
    skills, warnings = (
        discover_skills(skills_root, allowed_roots) if skills_root is not None else ((), ())
    )
    return WorkspaceInputs(
        working_directory=resolved.path,
        repository_root=repository[0] if repository is not None else None,
        layout=tuple(layout),
        agents_md=agents_md,
        skills=skills,
        warnings=warnings,
    )
