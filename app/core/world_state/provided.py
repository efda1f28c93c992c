"""Caller-provided workspace inputs (spec §15.2, ``workspace.provided``), checked like a real one.

The caller's values go through the same rules as a captured workspace, so a session gets its
4xx when it is created or patched instead of a failed turn later: AGENTS.md over 65 536 bytes
(``project_instruction_error``), a skill whose name, description or path could not come from a
real skills root (``skill_catalog_error``), a project context over 16 384 characters
(``user_project_context_error``).

A provided skill may carry an optional ``body`` (the SKILL.md text; front matter is stripped if
present): selecting it in a turn then snapshots that body. Without a body the server has nothing
to snapshot, so selecting it is ``skill_unavailable``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from app.core.errors import InvalidInput
from app.core.world_state.inputs import SkillEntry, SkillSnapshot, WorkspaceInputs
from app.core.world_state.render import render_project_context
from app.core.world_state.skill_file import (
    is_valid_skill_name,
    normalize_description,
    strip_front_matter,
)

__all__ = [
    "MAX_AGENTS_MD_BYTES",
    "MAX_SKILLS",
    "MAX_SKILL_FILE_BYTES",
    "MAX_SKILL_PATH_CHARS",
    "ProvidedSkill",
    "provided_inputs",
    "provided_inputs_of",
    "provided_skill_snapshot",
]

MAX_AGENTS_MD_BYTES = 64 * 1024
MAX_SKILL_FILE_BYTES = 64 * 1024
MAX_SKILLS = 100
# Long enough for any real path; short enough that one catalog line always fits in 8000 chars.
MAX_SKILL_PATH_CHARS = 4096
_GIT_ENTRIES = frozenset({".git", ".git/", ".git@"})


@dataclass(frozen=True, slots=True)
class ProvidedSkill:
    name: str
    description: str
    path: str
    body: str | None = None


def _utf8_size(text: str, code: str, what: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput(code, f"{what} is not valid Unicode text (lone surrogate).") from None


def _skill_error(detail: str, name: str) -> InvalidInput:
    return InvalidInput("skill_catalog_error", detail, skill=name)


def _check_skill(skill: ProvidedSkill) -> SkillEntry:
    name = skill.name
    if not is_valid_skill_name(name):
        raise _skill_error(
            f"Skill name {name!r} is invalid: use 1-64 characters of a-z, 0-9 and '-', "
            "starting and ending with a letter or digit.",
            name,
        )
    description = normalize_description(skill.description)
    if not description:
        raise _skill_error(f"Skill {name!r} needs a non-empty description.", name)
    path = skill.path
    if not path or len(path) > MAX_SKILL_PATH_CHARS or any(ord(c) < 0x20 for c in path):
        raise _skill_error(
            f"Skill {name!r} needs a path of 1-{MAX_SKILL_PATH_CHARS} characters without "
            "control characters.",
            name,
        )
    for text, what in ((description, "description"), (path, "path")):
        _utf8_size(text, "skill_catalog_error", f"Skill {name!r} {what}")
    body = None
    if skill.body is not None:
        if _utf8_size(skill.body, "skill_catalog_error", f"Skill {name!r} body") > (
            MAX_SKILL_FILE_BYTES
        ):
            raise _skill_error(
                f"Skill {name!r} body is over {MAX_SKILL_FILE_BYTES} bytes; split the skill.",
                name,
            )
        body = strip_front_matter(skill.body)
    return SkillEntry(name=name, description=description, path=path, body=body)


def provided_inputs(
    working_directory: str,
    repository_root: str | None,
    layout: Iterable[str],
    agents_md: str | None,
    skills: Iterable[ProvidedSkill],
) -> WorkspaceInputs:
    """A ``WorkspaceInputs`` from caller values; raises ``InvalidInput`` with spec §4's codes."""
    # "``.git`` skipped" (spec §4) holds for a caller's listing too, in any of its displayed forms.
    entries = tuple(entry for entry in layout if entry not in _GIT_ENTRIES)
    for value in (working_directory, repository_root or "", *entries):
        _utf8_size(value, "user_project_context_error", "A project context value")
    if any(not entry for entry in entries):
        raise InvalidInput("user_project_context_error", "Layout entries must be non-empty names.")
    if agents_md is not None:
        size = _utf8_size(agents_md, "project_instruction_error", "AGENTS.md")
        if size > MAX_AGENTS_MD_BYTES:
            raise InvalidInput(
                "project_instruction_error",
                f"AGENTS.md is {size} bytes, over the limit of {MAX_AGENTS_MD_BYTES}; "
                "shorten it or move details into files it points to.",
                bytes=size,
                limit=MAX_AGENTS_MD_BYTES,
            )
        if not agents_md.strip():
            agents_md = None
    checked = sorted((_check_skill(s) for s in skills), key=lambda s: s.name)
    if len(checked) > MAX_SKILLS:
        raise InvalidInput(
            "skill_catalog_error",
            f"{len(checked)} skills were provided; at most {MAX_SKILLS} are allowed.",
        )
    names = [s.name for s in checked]
    duplicates = sorted({n for i, n in enumerate(names) if i and names[i - 1] == n})
    if duplicates:
        raise InvalidInput(
            "skill_catalog_error", f"Skill names must be unique; repeated: {duplicates}."
        )
    inputs = WorkspaceInputs(
        working_directory=working_directory,
        repository_root=repository_root,
        layout=entries,
        agents_md=agents_md,
        skills=tuple(checked),
    )
    render_project_context(inputs)  # raises user_project_context_error when too long
    return inputs


def provided_inputs_of(provided: Mapping[str, Any]) -> WorkspaceInputs:
    """``provided_inputs`` of a ``workspace.provided`` object as the API stores it."""
    return provided_inputs(
        provided["working_directory"],
        provided.get("repository_root"),
        provided.get("layout", []),
        provided.get("agents_md"),
        [ProvidedSkill(**skill) for skill in provided.get("skills", [])],
    )


def provided_skill_snapshot(
    inputs: WorkspaceInputs, name: str, disabled_skills: Iterable[str] = ()
) -> SkillSnapshot:
    """The snapshot of a selected caller-provided skill.

    Raises ``InvalidInput`` ``skill_unavailable`` when the skill is unknown, disabled, or was
    provided without a ``body`` (the server has no file to read it from).
    """
    skill = inputs.skill(name, disabled_skills)
    if skill is None:
        raise InvalidInput(
            "skill_unavailable",
            f"Skill {name!r} cannot be selected: it is unknown or disabled for this session.",
            skill=name,
        )
    if skill.body is None:
        raise InvalidInput(
            "skill_unavailable",
            f"Skill {name!r} cannot be selected: it was provided without a body; provide "
            "the SKILL.md text as its body to make it selectable.",
            skill=name,
        )
    return SkillSnapshot(name=skill.name, path=skill.path, body=skill.body)
