"""The World State sections: ids, fixed order, open tags and notices (spec §4).

The open tag is what the retained-section scan looks for at the start of a ``world_state``
message, so it is declared next to the notices that may precede it. The four sections of
spec §4 come first; the session's pins (``app.core.pins``) are a fifth, last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "AGENTS_MD",
    "PINNED_CONTEXT",
    "PROJECT_CONTEXT",
    "SANDBOX_POLICY",
    "SECTIONS",
    "SECTION_IDS",
    "SKILLS_CATALOG",
    "SectionSpec",
    "section_spec",
]

PROJECT_CONTEXT = "runtime/user-project-context"
AGENTS_MD = "project/AGENTS.md"
SKILLS_CATALOG = "skills/catalog"
SANDBOX_POLICY = "runtime/sandbox-policy"
PINNED_CONTEXT = "session/pins"


@dataclass(frozen=True, slots=True)
class SectionSpec:
    section_id: str
    open_tag: str
    replacement_notice: str
    removal_notice: str


# Fixed order: project context, AGENTS.md, skills catalog, sandbox policy, pins.
SECTIONS: tuple[SectionSpec, ...] = (
    SectionSpec(
        PROJECT_CONTEXT,
        # A prefix, not the whole tag: the tag carries a format_version attribute.
        "<user_project_context",
        "The project context below replaces the previously provided project context.",
        "The previously provided project context no longer applies.",
    ),
    SectionSpec(
        AGENTS_MD,
        "<project_instructions>",
        "The AGENTS.md instructions below replace all previously provided AGENTS.md instructions.",
        "The previously provided AGENTS.md instructions no longer apply.",
    ),
    SectionSpec(
        SKILLS_CATALOG,
        "<available_skills>",
        "The skill catalog below replaces the previous one.",
        "The previous skill catalog no longer applies; no skills are available now.",
    ),
    SectionSpec(
        SANDBOX_POLICY,
        "<sandbox_policy>",
        "The sandbox policy below replaces the previous one.",
        "The previous sandbox policy no longer applies.",
    ),
    SectionSpec(
        PINNED_CONTEXT,
        "<pinned_context",
        "The pinned items below replace all previously pinned items.",
        "The previously pinned items no longer apply; nothing is pinned now.",
    ),
)

SECTION_IDS: tuple[str, ...] = tuple(s.section_id for s in SECTIONS)

_BY_ID: Final = {s.section_id: s for s in SECTIONS}


def section_spec(section_id: str) -> SectionSpec:
    """The spec of a known section id (``KeyError`` for anything else: a programming error)."""
    return _BY_ID[section_id]
