"""Checkpoint ids (their JSON is written by ``app.api.render.compactions``)."""

from __future__ import annotations

import uuid

__all__ = ["new_compaction_id"]


def new_compaction_id() -> str:
    return f"cmp-{uuid.uuid4().hex}"
