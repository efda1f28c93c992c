"""Opaque keyset cursors for newest-first lists: ``(created_at, id)`` of a page's last row."""

from __future__ import annotations

import base64
from datetime import datetime

from app.core.errors import InvalidInput

__all__ = ["decode_cursor", "encode_cursor"]


def encode_cursor(created_at: datetime, key: str) -> str:
    raw = f"{created_at.isoformat()}|{key}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """The ``(created_at, id)`` of ``cursor``; ``invalid_cursor`` (422) for anything else."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        created, key = raw.split("|", 1)
        return datetime.fromisoformat(created), key
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput("invalid_cursor", "the cursor is not one this API returned") from exc
