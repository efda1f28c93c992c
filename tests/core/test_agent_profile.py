"""The agent's sections and control tools from its preset and choices (spec §4, §6)."""

from __future__ import annotations

import pytest

from app.core.agent_profile import CODING, resolve_profile
from app.core.world_state import (
    AGENTS_MD,
    PROJECT_CONTEXT,
    SANDBOX_POLICY,
    SKILLS_CATALOG,
    SandboxSettings,
    WorkspaceInputs,
    render_sections,
)


def test_a_general_agent_has_instructions_and_skills_only() -> None:
    profile = resolve_profile("general", {}, None, runs_commands=False)
    assert profile.sections.section_ids() == {AGENTS_MD, SKILLS_CATALOG}
    assert profile.control_tools == ()


@pytest.mark.parametrize(("chosen", "has_policy"), [(None, True), (False, False), (True, True)])
def test_a_tool_that_runs_commands_brings_the_policy_unless_the_agent_chose(
    chosen: bool | None, has_policy: bool
) -> None:
    profile = resolve_profile("general", {"sandbox_policy": chosen}, None, runs_commands=True)
    assert (SANDBOX_POLICY in profile.sections.section_ids()) is has_policy


def test_control_tools_keep_the_services_order_and_the_preset_is_the_default() -> None:
    named = resolve_profile(
        "general", {}, ["conversation_history", "update_plan"], runs_commands=False
    )
    assert named.control_tools == ("update_plan", "conversation_history")
    assert resolve_profile("coding", {}, None, runs_commands=False) == CODING
    none = resolve_profile("coding", {"project_layout": False}, [], runs_commands=False)
    assert none.control_tools == ()
    assert PROJECT_CONTEXT not in none.sections.section_ids()


def test_a_section_the_agent_does_not_have_is_not_rendered_nor_checked() -> None:
    # A project context over its 16 384-character limit refuses only an agent that shows it.
    inputs = WorkspaceInputs(working_directory="/w" + "x" * 20_000, layout=("a",))
    sandbox = SandboxSettings(mode="auto", available=False)
    general = resolve_profile("general", {}, None, runs_commands=False).sections.section_ids()
    sections = render_sections(inputs, sandbox, (), general)
    assert [s.body for s in sections] == [None, None, None, None]
