"""Reading ``{working directory}/AGENTS.md`` (spec §4 section 2)."""

from __future__ import annotations

from app.core.errors import InvalidInput
from app.core.world_state import MAX_AGENTS_MD_BYTES
from app.workspace.files import UnsafeFileError, read_small_file

__all__ = ["read_agents_md"]


def _error(path: str, reason: str) -> InvalidInput:
    return InvalidInput(
        "project_instruction_error",
        f"{path} cannot be used as project instructions: {reason}. Make it a regular UTF-8 "
        f"file of at most {MAX_AGENTS_MD_BYTES} bytes, or remove it.",
        path=path,
    )


def read_agents_md(dir_fd: int, dir_path: str) -> str | None:
    """The content verbatim, or ``None`` when the file is missing or whitespace-only.

    Only the working directory's own ``AGENTS.md`` is read, opened relative to the directory's
    descriptor and without following a link, so it can never resolve outside that directory.
    Raises ``InvalidInput`` ``project_instruction_error`` for a symlink, a non-regular file
    (FIFO, device, directory), more than 65 536 bytes, or bytes that are not UTF-8.
    """
    path = f"{dir_path.rstrip('/')}/AGENTS.md"
    try:
        data = read_small_file("AGENTS.md", dir_fd, MAX_AGENTS_MD_BYTES)
    except UnsafeFileError as exc:
        raise _error(path, str(exc)) from None
    except OSError as exc:
        raise _error(path, f"it cannot be read ({exc.strerror})") from None
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _error(path, f"it is not UTF-8 (invalid byte at offset {exc.start})") from None
    return text if text.strip() else None
