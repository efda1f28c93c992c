"""Skills discovery and selection from a skills root (spec §4 section 3, §6)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from app.core.errors import InvalidInput, ServiceError
from app.core.world_state import (
    MAX_SKILL_FILE_BYTES,
    MAX_SKILLS,
    SkillEntry,
    SkillFileError,
    SkillSnapshot,
    SkillText,
    is_valid_skill_name,
    parse_skill_file,
)
from app.workspace.files import UnsafeFileError, read_small_file
from app.workspace.paths import ResolvedDirectory, open_directory_chain, resolve_under_roots

__all__ = ["discover_skills", "read_skill_snapshot"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _skill_path(root: str, name: str) -> str:
    return f"{root.rstrip('/')}/{name}/SKILL.md"


def _read_skill(root_fd: int, name: str) -> SkillText:
    """Parse ``{name}/SKILL.md``; ``SkillFileError`` says why it is not a usable skill."""
    try:
        skill_fd = os.open(name, _DIR_FLAGS, dir_fd=root_fd)
    except FileNotFoundError:
        raise SkillFileError("no skill has that name") from None
    except OSError as exc:
        raise SkillFileError(f"its directory cannot be opened ({exc.strerror})") from None
    try:
        data = read_small_file("SKILL.md", skill_fd, MAX_SKILL_FILE_BYTES)
    except UnsafeFileError as exc:
        raise SkillFileError(f"SKILL.md is unusable: {exc}") from None
    except OSError as exc:
        raise SkillFileError(f"SKILL.md cannot be read ({exc.strerror})") from None
    finally:
        os.close(skill_fd)
    if data is None:
        raise SkillFileError("it has no SKILL.md")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SkillFileError("SKILL.md is not UTF-8") from None
    return parse_skill_file(name, text)


def _resolve_root(skills_root: str, allowed_roots: Sequence[str]) -> ResolvedDirectory | None:
    """The checked skills root; ``None`` when it does not exist (no skills, not an error)."""
    try:
        return resolve_under_roots(skills_root, allowed_roots, what="skills root")
    except ServiceError as exc:
        if exc.code == "workspace_not_found" and not os.path.lexists(skills_root):
            return None
        raise InvalidInput("skill_catalog_error", exc.detail, cause=exc.code) from None


def discover_skills(
    skills_root: str, allowed_roots: Sequence[str]
) -> tuple[tuple[SkillEntry, ...], tuple[str, ...]]:
    """(skills sorted by name, at most 100; warnings about the skills that were skipped).

    A skill is ``{skills_root}/{name}/SKILL.md`` one level deep: a real directory (not a link)
    named by 1-64 of ``[a-z0-9-]``, starting and ending alphanumeric, whose SKILL.md is a
    regular UTF-8 file of at most 64 KiB with a front matter ``name`` equal to the directory
    (default) and a ``description``. Anything else is skipped with a warning for the log;
    regular files in the root are ignored silently. A missing root means no
    skills; a root outside the allowed roots, not a directory or unreadable raises
    ``InvalidInput`` ``skill_catalog_error``.
    """
    resolved = _resolve_root(skills_root, allowed_roots)
    if resolved is None:
        return (), ()
    skills: list[SkillEntry] = []
    warnings: list[str] = []
    try:
        with open_directory_chain(resolved) as chain:
            root_fd = chain[-1][1]
            with os.scandir(root_fd) as scan:
                entries = sorted(scan, key=lambda e: e.name)
            for entry in entries:
                name = entry.name
                if entry.is_file(follow_symlinks=False):
                    continue  # README.md, .DS_Store ...: not meant as skills
                if not is_valid_skill_name(name):
                    warnings.append(f"skill directory {name!r} skipped: invalid name")
                elif entry.is_symlink() or not entry.is_dir(follow_symlinks=False):
                    warnings.append(f"skill {name!r} skipped: not a real directory")
                elif len(skills) >= MAX_SKILLS:
                    warnings.append(f"skill {name!r} skipped: at most {MAX_SKILLS} skills")
                else:
                    try:
                        parsed = _read_skill(root_fd, name)
                    except SkillFileError as exc:
                        warnings.append(f"skill {name!r} skipped: {exc}")
                        continue
                    path = _skill_path(resolved.path, name)
                    skills.append(SkillEntry(name, parsed.description, path))
    except OSError as exc:
        raise InvalidInput(
            "skill_catalog_error",
            f"The skills root {skills_root!r} cannot be read ({exc.strerror}).",
        ) from None
    return tuple(skills), tuple(warnings)


def _unavailable(name: str, reason: str) -> InvalidInput:
    return InvalidInput(
        "skill_unavailable", f"Skill {name!r} cannot be selected: {reason}.", skill=name
    )


def read_skill_snapshot(
    skills_root: str | None,
    name: str,
    *,
    allowed_roots: Sequence[str],
    disabled_skills: Iterable[str] = (),
) -> SkillSnapshot:
    """The selected skill's path and body (front matter removed) as the file is right now.

    Raises ``InvalidInput`` ``skill_unavailable`` when the session has no skills root, the
    skill is disabled, unknown, or its SKILL.md is not a valid skill (same rules as discovery).
    Only this one skill is read; it is not checked against the 100-skill cap of the catalog.
    """
    if skills_root is None:
        raise _unavailable(name, "this session has no skills root")
    if name in set(disabled_skills):
        raise _unavailable(name, "it is disabled for this session")
    if not is_valid_skill_name(name):
        raise _unavailable(name, "no skill has that name")
    try:
        resolved = resolve_under_roots(skills_root, allowed_roots, what="skills root")
        with open_directory_chain(resolved) as chain:
            parsed = _read_skill(chain[-1][1], name)
    except ServiceError as exc:
        raise _unavailable(name, exc.detail.rstrip(".")) from None
    except SkillFileError as exc:
        raise _unavailable(name, str(exc)) from None
    except OSError as exc:
        raise _unavailable(name, f"the skills root cannot be read ({exc.strerror})") from None
    return SkillSnapshot(name=name, path=_skill_path(resolved.path, name), body=parsed.body)
