"""World State (spec §4): render the sections, diff them against the baselines.

Pure: the inputs come from ``app.workspace`` (a server directory) or from ``provided_inputs``
(values a caller supplies); the service samples, stores and advances the baselines. Typical use::

    sections = render_sections(inputs, sandbox, disabled_skills)
    messages = diff_sections(sections, baselines, conversation_items)
    for m in messages:  # store each as world_state_item(m.text) with world_state_message_id(...)
        ...
    baselines = advance_baselines(baselines, messages)  # only after every write succeeded
"""

from app.core.world_state.diff import (
    SectionMessage,
    advance_baselines,
    diff_sections,
    retained_sections,
    world_state_item,
    world_state_message_id,
)
from app.core.world_state.escape import escape_text
from app.core.world_state.inputs import (
    NO_WORKSPACE,
    SandboxMode,
    SandboxSettings,
    SkillEntry,
    SkillSnapshot,
    WorkspaceInputs,
)
from app.core.world_state.provided import (
    MAX_AGENTS_MD_BYTES,
    MAX_SKILL_FILE_BYTES,
    MAX_SKILLS,
    ProvidedSkill,
    provided_inputs,
    provided_skill_snapshot,
)
from app.core.world_state.render import (
    RenderedSection,
    render_agents_md,
    render_project_context,
    render_sandbox_policy,
    render_sections,
    render_skills_catalog,
)
from app.core.world_state.sections import (
    AGENTS_MD,
    PINNED_CONTEXT,
    PROJECT_CONTEXT,
    SANDBOX_POLICY,
    SECTION_IDS,
    SKILLS_CATALOG,
)
from app.core.world_state.skill_file import (
    SkillFileError,
    SkillText,
    is_valid_skill_name,
    normalize_description,
    parse_skill_file,
    skill_instruction_item,
    skill_instruction_text,
    strip_front_matter,
)

__all__ = [
    "AGENTS_MD",
    "MAX_AGENTS_MD_BYTES",
    "MAX_SKILLS",
    "MAX_SKILL_FILE_BYTES",
    "NO_WORKSPACE",
    "PINNED_CONTEXT",
    "PROJECT_CONTEXT",
    "SANDBOX_POLICY",
    "SECTION_IDS",
    "SKILLS_CATALOG",
    "ProvidedSkill",
    "RenderedSection",
    "SandboxMode",
    "SandboxSettings",
    "SectionMessage",
    "SkillEntry",
    "SkillFileError",
    "SkillSnapshot",
    "SkillText",
    "WorkspaceInputs",
    "advance_baselines",
    "diff_sections",
    "escape_text",
    "is_valid_skill_name",
    "normalize_description",
    "parse_skill_file",
    "provided_inputs",
    "provided_skill_snapshot",
    "render_agents_md",
    "render_project_context",
    "render_sandbox_policy",
    "render_sections",
    "render_skills_catalog",
    "retained_sections",
    "skill_instruction_item",
    "skill_instruction_text",
    "strip_front_matter",
    "world_state_item",
    "world_state_message_id",
]
