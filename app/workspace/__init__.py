"""Reading World State inputs from a server directory, safely (spec §4).

Everything here touches the filesystem and nothing else; rendering and diffing are in
``app.core.world_state``. Safety rules, shared by every reader in this package:

- a directory must be absolute, free of ``..`` and lie under one of the configured allowed roots,
  both as written and once resolved (a symlink may not lead out of its root); an empty allow-list
  disables filesystem workspaces;
- after that check, directories are opened one component at a time from the root with
  ``O_NOFOLLOW``, so a symlink swapped in later cannot redirect a read (no check-then-use race);
- files are opened relative to their directory's descriptor with ``O_NOFOLLOW | O_NONBLOCK`` and
  checked with ``fstat``: a symlink, FIFO, device or directory is refused without ever blocking,
  and reads stop one byte past the size limit.
"""

from app.workspace.capture import capture_filesystem
from app.workspace.paths import (
    ResolvedDirectory,
    resolve_under_roots,
    validate_directory,
    validate_working_directory,
)
from app.workspace.skills import discover_skills, read_skill_snapshot

__all__ = [
    "ResolvedDirectory",
    "capture_filesystem",
    "discover_skills",
    "read_skill_snapshot",
    "resolve_under_roots",
    "validate_directory",
    "validate_working_directory",
]
