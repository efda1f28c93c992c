"""Allowed-root checks and race-free opening of workspace directories."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from app.core.errors import InvalidInput

__all__ = [
    "DirectoryChain",
    "ResolvedDirectory",
    "open_directory_chain",
    "resolve_under_roots",
    "validate_directory",
    "validate_working_directory",
]

# O_NOFOLLOW: a symlink in place of a directory fails with ELOOP instead of being followed.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class ResolvedDirectory:
    """A canonical directory path (no symlink, no ``..``) and the canonical allowed root
    that contains it."""

    path: str
    root: str


# (canonical path, open descriptor) from the allowed root down to the directory itself.
DirectoryChain = list[tuple[str, int]]


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _not_allowed(detail: str) -> InvalidInput:
    return InvalidInput("workspace_not_allowed", detail)


def resolve_under_roots(
    path: str, allowed_roots: Sequence[str], *, what: str = "working directory"
) -> ResolvedDirectory:
    """Check that ``path`` is an existing directory under one of ``allowed_roots``.

    Raises ``InvalidInput``: ``workspace_not_allowed`` when the allow-list is empty, the path is
    relative or contains ``..``, lies outside every root, or resolves (through a symlink) outside
    the root it is written under; ``workspace_not_found`` when it does not exist or is not a
    directory. Outside paths are refused before anything is looked up, so the answer never
    reveals whether a path outside the roots exists.
    """
    if not allowed_roots:
        raise _not_allowed(
            "Filesystem workspaces are disabled on this server (CTXSVC_WORKSPACE_ROOTS is "
            'empty); send the workspace inputs as "provided" instead.'
        )
    if "\0" in path or not os.path.isabs(path):
        raise _not_allowed(f"The {what} must be an absolute path; got {path!r}.")
    if ".." in path.split("/"):
        raise _not_allowed(f"The {what} {path!r} must not contain '..' components.")
    lexical = os.path.normpath(path)
    candidates: list[str] = []
    for root in allowed_roots:
        root_lexical = os.path.normpath(root)
        root_real = os.path.realpath(root_lexical)
        if _within(lexical, root_lexical) or _within(lexical, root_real):
            candidates.append(root_real)
    if not candidates:
        raise _not_allowed(
            f"The {what} {path!r} is outside the allowed workspace roots; use a directory "
            "under one of them."
        )
    try:
        real = os.path.realpath(lexical, strict=True)
    except OSError as exc:
        raise InvalidInput(
            "workspace_not_found", f"The {what} {path!r} cannot be resolved: {exc.strerror}."
        ) from None
    containing = [root for root in candidates if _within(real, root)]
    if not containing:
        raise _not_allowed(f"The {what} {path!r} leads outside its allowed root through a symlink.")
    if not os.path.isdir(real):
        raise InvalidInput("workspace_not_found", f"The {what} {path!r} is not a directory.")
    # The outermost root: everything under any allowed root may be read.
    return ResolvedDirectory(path=real, root=min(containing, key=len))


def validate_directory(path: str, allowed_roots: Sequence[str], *, what: str) -> str:
    """The canonical form of ``path`` (see ``resolve_under_roots`` for the errors)."""
    return resolve_under_roots(path, allowed_roots, what=what).path


def validate_working_directory(path: str, allowed_roots: Sequence[str]) -> str:
    """Check a session's working directory when it is set (create/patch): a 4xx up front.

    Returns the canonical path, which is what the project context shows.
    """
    return validate_directory(path, allowed_roots, what="working directory")


@contextmanager
def open_directory_chain(resolved: ResolvedDirectory) -> Iterator[DirectoryChain]:
    """Open the root, then each component down to ``resolved.path``, never following a link.

    ``resolve_under_roots`` checked the path; opening it again component by component with
    ``O_NOFOLLOW`` means a directory replaced by a symlink since then fails (``OSError``)
    instead of leading elsewhere. All descriptors are closed on exit.
    """
    chain: DirectoryChain = []
    try:
        chain.append((resolved.root, os.open(resolved.root, _DIR_FLAGS)))
        relative = os.path.relpath(resolved.path, resolved.root)
        current = resolved.root
        if relative != ".":
            for part in relative.split("/"):
                current = os.path.join(current, part)
                chain.append((current, os.open(part, _DIR_FLAGS, dir_fd=chain[-1][1])))
        yield chain
    finally:
        for _, fd in chain:
            os.close(fd)
