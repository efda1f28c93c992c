import pytest

from app.core.errors import InvalidInput
from app.core.world_state import (
    ProvidedSkill,
    SandboxSettings,
    SkillSnapshot,
    provided_inputs,
    provided_skill_snapshot,
    render_sections,
)


def make(**overrides: object) -> object:
    args: dict[str, object] = {
        "working_directory": "/shown",
        "repository_root": None,
        "layout": ["src/", "README.md"],
        "agents_md": "rules",
        "skills": [],
    }
    args.update(overrides)
    return provided_inputs(**args)  # type: ignore[arg-type]


def error_code(**overrides: object) -> str:
    with pytest.raises(InvalidInput) as caught:
        make(**overrides)
    return caught.value.code


def test_provided_inputs_render_like_captured_ones() -> None:
    inputs = provided_inputs(
        "/shown",
        "/shown",
        ["src/", "README.md"],
        "rules",
        [ProvidedSkill("zeta", "Z  z", "/s/zeta/SKILL.md"), ProvidedSkill("alpha", "A", "/a")],
    )
    assert [s.name for s in inputs.skills] == ["alpha", "zeta"]
    assert inputs.skills[1].description == "Z z"
    bodies = [s.body for s in render_sections(inputs, SandboxSettings("auto", True))]
    assert bodies[0] is not None
    assert "- README.md\n- src/\n" in bodies[0]
    assert bodies[1] == "<project_instructions>\nrules\n</project_instructions>"


def test_git_is_skipped_in_a_provided_layout_as_in_a_captured_one() -> None:
    inputs = make(layout=[".git/", "src/", ".git", ".github/", ".git@", ".gitignore"])
    assert inputs.layout == ("src/", ".github/", ".gitignore")  # type: ignore[attr-defined]


def test_whitespace_agents_md_is_absent() -> None:
    assert make(agents_md=" \n").agents_md is None  # type: ignore[attr-defined]


def test_agents_md_size_limit() -> None:
    assert make(agents_md="x" * 65_536).agents_md is not None  # type: ignore[attr-defined]
    assert error_code(agents_md="x" * 65_537) == "project_instruction_error"
    assert error_code(agents_md="é" * 32_769) == "project_instruction_error"  # 65 538 bytes


@pytest.mark.parametrize(
    "skill",
    [
        ProvidedSkill("Bad", "d", "/p"),
        ProvidedSkill("../etc", "d", "/p"),
        ProvidedSkill("a" * 65, "d", "/p"),
        ProvidedSkill("ok", "  ", "/p"),
        ProvidedSkill("ok", "d", ""),
        ProvidedSkill("ok", "d", "/p\n- injected: line"),
        ProvidedSkill("ok", "d", "/p", body="x" * 65_537),
    ],
)
def test_invalid_skills_are_refused(skill: ProvidedSkill) -> None:
    assert error_code(skills=[skill]) == "skill_catalog_error"


def test_duplicate_and_too_many_skills_are_refused() -> None:
    twice = [ProvidedSkill("a", "d", "/p"), ProvidedSkill("a", "e", "/q")]
    assert error_code(skills=twice) == "skill_catalog_error"
    many = [ProvidedSkill(f"s{i}", "d", "/p") for i in range(101)]
    assert error_code(skills=many) == "skill_catalog_error"
    assert len(make(skills=many[:100]).skills) == 100  # type: ignore[attr-defined]


def test_oversized_project_context_is_refused_up_front() -> None:
    assert error_code(layout=["x" * 20_000]) == "user_project_context_error"
    assert error_code(layout=[""]) == "user_project_context_error"
    assert error_code(working_directory="/\ud800") == "user_project_context_error"


def test_provided_skill_snapshot() -> None:
    inputs = provided_inputs(
        "/w",
        None,
        [],
        None,
        [
            ProvidedSkill("with-body", "d", "/s/w/SKILL.md", "---\nname: x\n---\n\nDo it.\n"),
            ProvidedSkill("no-body", "d", "/s/n/SKILL.md"),
        ],
    )
    assert provided_skill_snapshot(inputs, "with-body") == SkillSnapshot(
        "with-body", "/s/w/SKILL.md", "Do it."
    )
    for name, disabled in (("no-body", ()), ("with-body", ("with-body",)), ("missing", ())):
        with pytest.raises(InvalidInput) as caught:
            provided_skill_snapshot(inputs, name, disabled)
        assert caught.value.code == "skill_unavailable"
