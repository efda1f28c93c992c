"""An independent re-measurement of a prepared request (spec §3.1), for comparisons."""

from __future__ import annotations

import json
import math
from typing import Any

from app.core.content import Item, text_block

# Bytes of ``[{"type":"text","text":""}]``: a one-text-block content list around its text.
TEXT_CONTENT_OVERHEAD = len('[{"type":"text","text":""}]')


def json_bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def remeasure(request: dict[str, Any], system_count: int) -> tuple[int, int, int]:
    """(system, conversation, tools) tokens of the request as it would be sent."""
    messages = request["messages"]
    system = sum(json_bytes(m["content"]) for m in messages[:system_count])
    conversation = sum(json_bytes(m["content"]) for m in messages[system_count:])
    tools = json_bytes(request["tools"]) if request["tools"] else 0
    return math.ceil(system / 4), math.ceil(conversation / 4), math.ceil(tools / 4)


def text_of_tokens(tokens: int) -> str:
    """ASCII text whose one-text-block content measures exactly ``tokens`` (4·tokens bytes)."""
    return "t" * (4 * tokens - TEXT_CONTENT_OVERHEAD)


def user_of_tokens(tokens: int) -> Item:
    return Item("user", "normal", [text_block(text_of_tokens(tokens))])
