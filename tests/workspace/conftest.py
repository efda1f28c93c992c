from pathlib import Path

import pytest


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An allowed workspace root (resolved, since tmp_path may sit behind a symlink)."""
    path = (tmp_path / "allowed").resolve()
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the root, not under it."""
    path = (tmp_path / "allowed-not").resolve()
    path.mkdir()
    (path / "secret.txt").write_text("secret")
    return path
