import os
import time
from pathlib import Path

import pytest

from app.core.errors import InvalidInput
from app.core.world_state import SandboxSettings, render_project_context, render_sections
from app.workspace import capture_filesystem
from app.workspace.layout import list_layout


def capture(path: Path | str, root: Path, skills_root: str | None = None):  # type: ignore[no-untyped-def]
    return capture_filesystem(str(path), allowed_roots=[str(root)], skills_root=skills_root)


def test_layout_marks_dirs_and_symlinks_and_skips_git(root: Path, outside: Path) -> None:
    (root / ".git").mkdir()
    (root / "src").mkdir()
    (root / "README.md").write_text("hello")
    (root / "to-etc").symlink_to("/etc")
    (root / "dangling").symlink_to(root / "nowhere")
    (root / "dir-link").symlink_to(root / "src")
    (root / ".env").write_text("x")
    inputs = capture(root, root)
    assert sorted(inputs.layout) == [
        ".env",
        "README.md",
        "dangling@",
        "dir-link@",
        "src/",
        "to-etc@",
    ]
    assert inputs.repository_root == str(root)
    assert inputs.working_directory == str(root)


def test_repository_root_is_the_nearest_ancestor_with_git(root: Path) -> None:
    repo = root / "repo"
    work = repo / "pkg" / "sub"
    work.mkdir(parents=True)
    (repo / ".git").write_text("gitdir: elsewhere")  # a worktree's .git is a file
    (repo / "top.txt").write_text("")
    (work / "deep.txt").write_text("")
    inputs = capture(work, root)
    assert inputs.working_directory == str(work)
    assert inputs.repository_root == str(repo)
    assert sorted(inputs.layout) == ["pkg/", "top.txt"]  # the root's entries, not the cwd's


def test_without_repository_the_working_directory_is_listed(root: Path) -> None:
    work = root / "plain"
    work.mkdir()
    (work / "a.txt").write_text("")
    inputs = capture(work, root)
    assert inputs.repository_root is None
    assert inputs.layout == ("a.txt",)
    body = render_project_context(inputs)
    assert body is not None
    assert "Repository root: None detected\n" in body


def test_repository_search_stops_at_the_allowed_root(tmp_path: Path) -> None:
    repo = (tmp_path / "repo").resolve()
    (repo / ".git").mkdir(parents=True)
    (repo / "private.key").write_text("secret")
    allowed = repo / "allowed"
    work = allowed / "proj"
    work.mkdir(parents=True)
    inputs = capture_filesystem(str(work), allowed_roots=[str(allowed)], skills_root=None)
    assert inputs.repository_root is None
    assert "private.key" not in inputs.layout


def test_git_symlink_counts_without_being_followed(root: Path, outside: Path) -> None:
    (root / ".git").symlink_to(outside)
    assert capture(root, root).repository_root == str(root)


def test_non_utf8_names_are_skipped(root: Path) -> None:
    os.mkdir(os.path.join(os.fsencode(root), b"bad-\xff"))
    (root / "good").mkdir()
    assert capture(root, root).layout == ("good/",)


def test_empty_directory_lists_none(root: Path) -> None:
    body = render_project_context(capture(root, root))
    assert body is not None
    assert body.endswith("Project layout:\n- None\n</user_project_context>")


@pytest.mark.parametrize(
    "make_path",
    [
        lambda root, outside: outside,
        lambda root, outside: f"{root}/../allowed-not",
        lambda root, outside: f"{root}/missing",
    ],
)
def test_capture_errors_are_project_context_errors(root: Path, outside: Path, make_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidInput) as caught:
        capture(make_path(root, outside), root)
    assert caught.value.code == "user_project_context_error"


def test_capture_of_a_symlink_to_etc_is_refused(root: Path) -> None:
    (root / "etc").symlink_to("/etc")
    with pytest.raises(InvalidInput) as caught:
        capture(root / "etc", root)
    assert caught.value.code == "user_project_context_error"
    assert caught.value.extra["cause"] == "workspace_not_allowed"


def test_ten_thousand_entries_are_listed_fast_without_reading(root: Path) -> None:
    for i in range(9_000):
        # Mode 000: unreadable, so the listing must not open them (for a non-root user).
        os.close(os.open(root / f"file-{i:05d}.txt", os.O_CREAT | os.O_WRONLY, 0o000))
    for i in range(1_000):
        (root / f"dir-{i:04d}").mkdir()
    start = time.perf_counter()
    inputs = capture(root, root)
    sections = render_sections(inputs, SandboxSettings("auto", True))
    elapsed = time.perf_counter() - start
    assert len(inputs.layout) == 10_000
    body = sections[0].body
    assert body is not None
    assert "- dir-0000/\n" in body
    assert "- ... 9936 additional entries omitted\n" in body
    assert elapsed < 2.0


def test_list_layout_on_a_directory_descriptor(root: Path) -> None:
    (root / "x").mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert list_layout(fd) == ["x/"]
    finally:
        os.close(fd)
