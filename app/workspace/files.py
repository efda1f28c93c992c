"""Reading one small regular file next to a directory descriptor, without surprises."""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["UnsafeFileError", "read_small_file"]

# O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer.
# O_NOCTTY: a terminal device never becomes our controlling terminal.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class UnsafeFileError(Exception):
    """The file exists but must not be read; the message says why, for the user."""


def read_small_file(name: str, dir_fd: int, limit: int) -> bytes | None:
    """The bytes of regular file ``name`` in ``dir_fd``; ``None`` when it does not exist.

    Raises ``UnsafeFileError`` for a symlink, anything but a regular file, or more than
    ``limit`` bytes (checked on the metadata and again on what is read, since the file may grow
    in between). Other ``OSError``s (permissions, I/O) propagate.
    """
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFileError("it is a symlink") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFileError("it is not a regular file")
        if info.st_size > limit:
            raise UnsafeFileError(f"it is {info.st_size} bytes, over the limit of {limit}")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise UnsafeFileError(f"it is over the limit of {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)
