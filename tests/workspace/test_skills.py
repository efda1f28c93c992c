from pathlib import Path

import pytest

from app.core.errors import InvalidInput
from app.core.world_state import SandboxSettings, SkillSnapshot, render_sections
from app.workspace import capture_filesystem, discover_skills, read_skill_snapshot


def write_skill(root: Path, name: str, text: str | None = None) -> Path:
    directory = root / name
    directory.mkdir()
    if text is None:
        text = f"---\nname: {name}\ndescription: Skill {name}.\n---\n\n# {name}\nSteps.\n"
    (directory / "SKILL.md").write_text(text)
    return directory


@pytest.fixture
def skills_root(root: Path) -> Path:
    path = root / "skills"
    path.mkdir()
    return path


def discover(skills_root: Path, root: Path):  # type: ignore[no-untyped-def]
    return discover_skills(str(skills_root), [str(root)])


def test_valid_skills_sorted_by_name_with_their_paths(skills_root: Path, root: Path) -> None:
    for name in ("zeta", "alpha", "mid-1"):
        write_skill(skills_root, name)
    skills, warnings = discover(skills_root, root)
    assert [(s.name, s.description, s.path) for s in skills] == [
        ("alpha", "Skill alpha.", f"{skills_root}/alpha/SKILL.md"),
        ("mid-1", "Skill mid-1.", f"{skills_root}/mid-1/SKILL.md"),
        ("zeta", "Skill zeta.", f"{skills_root}/zeta/SKILL.md"),
    ]
    assert warnings == ()


@pytest.mark.parametrize("name", ["Upper", "a" * 65, "-lead", "trail-", "dot.dot", "..x", "a_b"])
def test_hostile_directory_names_are_skipped_and_reported(
    skills_root: Path, root: Path, name: str
) -> None:
    write_skill(skills_root, name, "---\ndescription: d\n---\n")
    write_skill(skills_root, "good")
    skills, warnings = discover(skills_root, root)
    assert [s.name for s in skills] == ["good"]
    assert len(warnings) == 1
    assert "invalid name" in warnings[0]


def test_64_character_name_is_accepted(skills_root: Path, root: Path) -> None:
    write_skill(skills_root, "a" * 64)
    assert [s.name for s in discover(skills_root, root)[0]] == ["a" * 64]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("---\nname: other\ndescription: d\n---\n", "differs"),
        ("---\nname: bad\n---\n", "description"),
        ("no front matter", "front matter"),
    ],
)
def test_bad_front_matter_is_skipped(skills_root: Path, root: Path, text: str, reason: str) -> None:
    write_skill(skills_root, "bad", text)
    skills, warnings = discover(skills_root, root)
    assert skills == ()
    assert reason in warnings[0]


def test_unsafe_skill_files_are_skipped(skills_root: Path, root: Path, outside: Path) -> None:
    (outside / "SKILL.md").write_text("---\ndescription: stolen\n---\n")
    linked = skills_root / "linked-file"
    linked.mkdir()
    (linked / "SKILL.md").symlink_to(outside / "SKILL.md")
    (skills_root / "linked-dir").symlink_to(outside)
    (skills_root / "too-big").mkdir()
    (skills_root / "too-big" / "SKILL.md").write_bytes(
        b"---\ndescription: d\n---\n" + b"x" * 65_536
    )
    (skills_root / "not-utf8").mkdir()
    (skills_root / "not-utf8" / "SKILL.md").write_bytes(b"---\ndescription: \xff\n---\n")
    (skills_root / "empty-dir").mkdir()
    (skills_root / "skill-dir").mkdir()
    (skills_root / "skill-dir" / "SKILL.md").mkdir()
    (skills_root / "README.md").write_text("not a skill")
    (skills_root / ".hidden").mkdir()
    skills, warnings = discover(skills_root, root)
    assert skills == ()
    reported = {w.split("'")[1] for w in warnings}
    assert reported == {
        "linked-file",
        "linked-dir",
        "too-big",
        "not-utf8",
        "empty-dir",
        "skill-dir",
        ".hidden",
    }


def test_skill_md_of_exactly_64_kib_is_accepted(skills_root: Path, root: Path) -> None:
    head = b"---\ndescription: d\n---\n"
    (skills_root / "big").mkdir()
    (skills_root / "big" / "SKILL.md").write_bytes(head + b"x" * (65_536 - len(head)))
    assert [s.name for s in discover(skills_root, root)[0]] == ["big"]


def test_at_most_100_skills_are_loaded(skills_root: Path, root: Path) -> None:
    for i in range(102):
        write_skill(skills_root, f"s{i:03d}")
    skills, warnings = discover(skills_root, root)
    assert len(skills) == 100
    assert skills[-1].name == "s099"
    assert len(warnings) == 2
    assert "at most 100" in warnings[0]


def test_missing_root_means_no_skills(root: Path) -> None:
    assert discover_skills(f"{root}/none", [str(root)]) == ((), ())


@pytest.mark.parametrize("kind", ["file", "outside", "symlink-out"])
def test_broken_root_is_a_catalog_error(root: Path, outside: Path, kind: str) -> None:
    path = root / "skills"
    if kind == "file":
        path.write_text("x")
    elif kind == "outside":
        path = outside
    else:
        path.symlink_to(outside)
    with pytest.raises(InvalidInput) as caught:
        discover_skills(str(path), [str(root)])
    assert caught.value.code == "skill_catalog_error"


def test_capture_includes_the_catalog_and_its_warnings(skills_root: Path, root: Path) -> None:
    write_skill(skills_root, "alpha")
    write_skill(skills_root, "Bad")
    inputs = capture_filesystem(str(root), allowed_roots=[str(root)], skills_root=str(skills_root))
    assert [s.name for s in inputs.skills] == ["alpha"]
    assert len(inputs.warnings) == 1
    catalog = render_sections(inputs, SandboxSettings("auto", True))[2].body
    assert catalog is not None
    assert f"- alpha: Skill alpha. (file: {skills_root}/alpha/SKILL.md)\n" in catalog


def snapshot(
    skills_root: Path, root: Path, name: str, disabled: tuple[str, ...] = ()
) -> SkillSnapshot:
    return read_skill_snapshot(
        str(skills_root), name, allowed_roots=[str(root)], disabled_skills=disabled
    )


def test_snapshot_has_the_body_without_front_matter(skills_root: Path, root: Path) -> None:
    directory = write_skill(skills_root, "alpha")
    taken = snapshot(skills_root, root, "alpha")
    assert taken == SkillSnapshot("alpha", f"{skills_root}/alpha/SKILL.md", "# alpha\nSteps.")
    (directory / "SKILL.md").write_text("---\ndescription: d\n---\nEdited.\n")
    assert taken.body == "# alpha\nSteps."  # a snapshot, not a live view
    assert snapshot(skills_root, root, "alpha").body == "Edited."


@pytest.mark.parametrize("name", ["missing", "../etc", "Bad", "disabled", "broken", "linked"])
def test_unavailable_skills(skills_root: Path, root: Path, outside: Path, name: str) -> None:
    write_skill(skills_root, "disabled")
    write_skill(skills_root, "broken", "---\nname: other\ndescription: d\n---\n")
    (skills_root / "linked").symlink_to(outside)
    (outside / "SKILL.md").write_text("---\ndescription: d\n---\nsecret\n")
    with pytest.raises(InvalidInput) as caught:
        snapshot(skills_root, root, name, disabled=("disabled",))
    assert caught.value.code == "skill_unavailable"


def test_snapshot_without_skills_root(root: Path) -> None:
    with pytest.raises(InvalidInput) as caught:
        read_skill_snapshot(None, "alpha", allowed_roots=[str(root)])
    assert caught.value.code == "skill_unavailable"
