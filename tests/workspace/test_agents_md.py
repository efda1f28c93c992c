import os
import stat
import threading
from pathlib import Path

import pytest

from app.core.errors import InvalidInput
from app.core.world_state import WorkspaceInputs, render_agents_md
from app.workspace import capture_filesystem


def agents_md(work: Path) -> str | None:
    return capture_filesystem(str(work), allowed_roots=[str(work)], skills_root=None).agents_md


def refused(work: Path) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        agents_md(work)
    assert caught.value.code == "project_instruction_error"
    return caught.value


def test_content_is_kept_verbatim(root: Path) -> None:
    text = "# Rules\r\n\n  keep <this> & that\n\n"
    (root / "AGENTS.md").write_bytes(text.encode())
    assert agents_md(root) == text
    rendered = render_agents_md(WorkspaceInputs(working_directory="/w", agents_md=text))
    assert rendered == f"<project_instructions>\n{text}\n</project_instructions>"


def test_missing_file_is_absent(root: Path) -> None:
    assert agents_md(root) is None


@pytest.mark.parametrize("text", ["", "   ", "\n\t\r\n  \n"])
def test_blank_file_is_absent(root: Path, text: str) -> None:
    (root / "AGENTS.md").write_text(text)
    assert agents_md(root) is None


def test_only_the_working_directory_file_is_read(root: Path) -> None:
    (root / "AGENTS.md").write_text("root rules")
    (root / "sub").mkdir()
    (root / "sub" / "nested").mkdir()
    (root / "sub" / "nested" / "AGENTS.md").write_text("nested rules")
    inputs = capture_filesystem(f"{root}/sub", allowed_roots=[str(root)], skills_root=None)
    assert inputs.agents_md is None


def test_exactly_65536_bytes_is_accepted(root: Path) -> None:
    (root / "AGENTS.md").write_bytes(b"a" * 65_536)
    assert agents_md(root) == "a" * 65_536


def test_65537_bytes_is_refused(root: Path) -> None:
    (root / "AGENTS.md").write_bytes(b"a" * 65_537)
    assert "65537" in refused(root).detail


def test_invalid_utf8_is_refused(root: Path) -> None:
    (root / "AGENTS.md").write_bytes(b"rules \xff\xfe")
    assert "UTF-8" in refused(root).detail


def test_symlink_is_refused_even_to_a_file_inside(root: Path) -> None:
    (root / "real.md").write_text("rules")
    (root / "AGENTS.md").symlink_to(root / "real.md")
    assert "symlink" in refused(root).detail


def test_symlink_to_etc_passwd_is_refused(root: Path) -> None:
    (root / "AGENTS.md").symlink_to("/etc/passwd")
    refused(root)


def test_dangling_symlink_is_refused(root: Path) -> None:
    (root / "AGENTS.md").symlink_to(root / "nowhere")
    refused(root)


def test_directory_is_refused(root: Path) -> None:
    (root / "AGENTS.md").mkdir()
    assert "regular file" in refused(root).detail


def test_fifo_is_refused_without_blocking(root: Path) -> None:
    fifo = root / "AGENTS.md"
    os.mkfifo(fifo)
    outcome: list[object] = []

    def run() -> None:
        try:
            agents_md(root)
        except InvalidInput as exc:
            outcome.append(exc.code)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=5)
    if thread.is_alive():  # unblock the reader so the test process can end
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading a FIFO named AGENTS.md blocked")
    assert outcome == ["project_instruction_error"]


def test_device_is_refused(root: Path) -> None:
    try:
        os.mknod(root / "AGENTS.md", 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # like /dev/null
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")
    assert "regular file" in refused(root).detail


def test_socket_is_refused(root: Path) -> None:
    import socket

    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(root / "AGENTS.md"))
    except OSError:
        pytest.skip("cannot bind a unix socket here")
    try:
        refused(root)
    finally:
        sock.close()
