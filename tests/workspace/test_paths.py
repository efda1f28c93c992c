import os
from pathlib import Path

import pytest

from app.core.errors import InvalidInput
from app.workspace import resolve_under_roots, validate_directory, validate_working_directory
from app.workspace.paths import open_directory_chain


def refused(path: str, roots: list[str]) -> str:
    with pytest.raises(InvalidInput) as caught:
        validate_working_directory(path, roots)
    return caught.value.code


def test_directory_under_a_root_is_returned_canonical(root: Path) -> None:
    (root / "proj" / "sub").mkdir(parents=True)
    assert validate_working_directory(f"{root}/proj//./sub/", [str(root)]) == f"{root}/proj/sub"
    assert validate_working_directory(str(root), [str(root)]) == str(root)


def test_empty_allow_list_disables_filesystem_workspaces(root: Path) -> None:
    assert refused(str(root), []) == "workspace_not_allowed"


@pytest.mark.parametrize("path", ["relative/dir", "", "./x"])
def test_relative_paths_are_refused(root: Path, path: str) -> None:
    assert refused(path, [str(root)]) == "workspace_not_allowed"


def test_dotdot_is_refused_even_when_it_stays_inside(root: Path) -> None:
    (root / "a").mkdir()
    assert refused(f"{root}/a/..", [str(root)]) == "workspace_not_allowed"
    assert refused(f"{root}/../allowed-not", [str(root)]) == "workspace_not_allowed"


def test_outside_and_prefix_sibling_are_refused(root: Path, outside: Path) -> None:
    assert refused(str(outside), [str(root)]) == "workspace_not_allowed"  # "allowed-not"
    assert refused("/etc", [str(root)]) == "workspace_not_allowed"
    assert refused("/", [str(root)]) == "workspace_not_allowed"


def test_outside_path_existence_is_not_revealed(root: Path) -> None:
    assert refused("/definitely/not/here", [str(root)]) == "workspace_not_allowed"


def test_symlink_out_of_the_root_is_refused(root: Path, outside: Path) -> None:
    (root / "etc").symlink_to("/etc")
    (root / "escape").symlink_to(outside)
    assert refused(f"{root}/etc", [str(root)]) == "workspace_not_allowed"
    assert refused(f"{root}/escape", [str(root)]) == "workspace_not_allowed"


def test_symlink_staying_inside_the_root_resolves(root: Path) -> None:
    (root / "real").mkdir()
    (root / "alias").symlink_to(root / "real")
    assert validate_working_directory(f"{root}/alias", [str(root)]) == f"{root}/real"


def test_root_configured_through_a_symlink(tmp_path: Path, root: Path) -> None:
    (root / "proj").mkdir()
    link = tmp_path / "root-link"
    link.symlink_to(root)
    assert validate_working_directory(f"{link}/proj", [str(link)]) == f"{root}/proj"
    resolved = resolve_under_roots(f"{root}/proj", [str(link)])
    assert resolved.root == str(root)


def test_missing_or_not_a_directory(root: Path) -> None:
    (root / "file").write_text("x")
    assert refused(f"{root}/missing", [str(root)]) == "workspace_not_found"
    assert refused(f"{root}/file", [str(root)]) == "workspace_not_found"


def test_nul_byte_is_refused(root: Path) -> None:
    assert refused(f"{root}/a\0b", [str(root)]) == "workspace_not_allowed"


def test_second_root_is_honoured(root: Path, outside: Path) -> None:
    assert validate_directory(str(outside), [str(root), str(outside)], what="skills root") == str(
        outside
    )


def test_symlink_loop_is_refused_cleanly(root: Path) -> None:
    os.symlink(root / "loop", root / "loop")
    assert refused(f"{root}/loop", [str(root)]) == "workspace_not_found"


def test_directory_swapped_for_a_symlink_after_the_check_is_not_followed(
    root: Path, outside: Path
) -> None:
    (root / "proj").mkdir()
    resolved = resolve_under_roots(f"{root}/proj", [str(root)])
    (root / "proj").rmdir()
    (root / "proj").symlink_to(outside)  # the attacker wins the race
    with (
        pytest.raises(OSError, match=r"Not a directory|symbolic link"),
        open_directory_chain(resolved),
    ):
        pass
