"""Keyset cursors for newest-first lists: ``(created_at, id)`` of a page's last row.

A cursor is ``{microseconds since 1970}.{id}``: every string of that shape is a position in
the newest-first order, so the schema's pattern says exactly which cursors are valid (an empty
one is the first page).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from app.core.errors import InvalidInput

__all__ = ["SESSION_CURSOR", "TURN_CURSOR", "CursorShape", "decode_cursor", "encode_cursor"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


class CursorShape:
    """The cursors of one list: ids ``{prefix}-{32 hex digits}``."""

    def __init__(self, prefix: str) -> None:
        # 17 digits reach the year 5138, within what ``datetime`` holds.
        self.pattern = rf"^(?:[0-9]{{1,17}}\.{prefix}-[0-9a-f]{{32}})?$"
        self._regex = re.compile(self.pattern)

    def fullmatch(self, cursor: str) -> bool:
        return self._regex.fullmatch(cursor) is not None


SESSION_CURSOR = CursorShape("ses")
TURN_CURSOR = CursorShape("turn")


def encode_cursor(created_at: datetime, key: str) -> str:
    return f"{(created_at - _EPOCH) // _MICROSECOND}.{key}"


def decode_cursor(cursor: str, shape: CursorShape) -> tuple[datetime, str]:
    """The ``(created_at, id)`` of ``cursor``; ``invalid_cursor`` (422) for anything else."""
    if not cursor or not shape.fullmatch(cursor):
        raise InvalidInput("invalid_cursor", "the cursor is not one this API returned")
    micros, key = cursor.split(".", 1)
    return _EPOCH + int(micros) * _MICROSECOND, key
