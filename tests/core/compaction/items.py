"""Builders for compaction tests (tool results with artifacts, synthetic items)."""

from __future__ import annotations

from typing import Any

from app.core.content import (
    Artifact,
    Item,
    RealOrigin,
    SyntheticOrigin,
    ToolResultState,
    text_block,
)
from tests.core.factories import result_block


def change(path: Any, *, undone: Any = None) -> Artifact:
    payload: dict[str, Any] = {"path": path}
    if undone is not None:
        payload["undone"] = undone
    return {"kind": "file_change", "payload": payload}


def tool_with(
    *artifacts: Artifact,
    seq: int | None = None,
    state: ToolResultState = "success",
    text: str = "ok",
    name: str = "edit",
) -> Item:
    block = result_block(f"call-{seq}", text, name=name, state=state, artifacts=list(artifacts))
    return Item("tool", "normal", [block], RealOrigin(f"m{seq}", seq))


def synthetic(text: str, reason: Any, cid: str = "c1", **source: Any) -> Item:
    return Item("user", "normal", [text_block(text)], SyntheticOrigin(cid, reason, **source))
