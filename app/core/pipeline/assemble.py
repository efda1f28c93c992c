"""Stage 4: validate the regions and assemble the provider-independent request (spec §2.4).

The request has fixed boundaries: system parts first (input order, never sorted), then the
normalized Conversation; the tool definitions as given; ``max_output_tokens`` always explicit;
sampling parameters (temperature, top_p, reasoning) never set here. Tool-result ``artifacts``
are removed, so nothing meant for the caller reaches the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.core.content import Block, Item, blank_content, content_without_artifacts
from app.core.counting import TokenCounter
from app.core.errors import InvalidInput
from app.core.pipeline.item_caps import check_system_part_measure
from app.core.pipeline.prepared_call import RequestMessage, SystemPart, ToolDefinition

__all__ = [
    "CONVERSATION_ROLES",
    "assemble_request",
    "measure_system_context",
    "system_message_in_conversation",
    "validate_conversation",
    "validate_system_context",
]

CONVERSATION_ROLES = frozenset({"user", "assistant", "tool"})


def validate_system_context(parts: Sequence[SystemPart], counter: TokenCounter) -> None:
    """Non-blank unique keys, non-empty content, each part under its cap (spec §3.3)."""
    measure_system_context(parts, counter)


def measure_system_context(parts: Sequence[SystemPart], counter: TokenCounter) -> int:
    """``validate_system_context``, returning Σ of the parts' measures as messages.

    Each part is measured once: its content's figure is what its cap applies to (the part as
    authored), and that figure framed as a ``system`` message is its share of the budget (each
    part is one message of the request, framed as conversation messages are).
    """
    seen: set[str] = set()
    total = 0
    for position, part in enumerate(parts):
        if not part.key.strip():
            raise InvalidInput(
                "empty_system_context_key",
                f"system context part {position} has a blank key; give every part a unique key",
                part_index=position,
            )
        if part.key in seen:
            raise InvalidInput(
                "duplicate_system_context_key",
                f"duplicate system context key: {part.key}; every part needs a unique key",
                key=part.key,
            )
        seen.add(part.key)
        if _is_empty(part):
            raise InvalidInput(
                "empty_system_context_part",
                f"system context part must not be empty: {part.key}; drop it or give it content",
                key=part.key,
            )
        measure = counter.measure_content(part.content)
        check_system_part_measure(part.key, measure, counter)
        total += counter.frame_message("system", measure)
    return total


def _is_empty(part: SystemPart) -> bool:
    # A part of only blank text says nothing to the model; treat it as empty too.
    return blank_content(part.content)


def validate_conversation(items: Sequence[Item]) -> None:
    """The Conversation never carries a system message (spec §1).

    ``items`` is the caller's Conversation (the stages keep every message that is not a tool
    message, in order and with its role), so the error names the caller's item.
    """
    for index, item in enumerate(items):
        if item.role not in CONVERSATION_ROLES:
            raise system_message_in_conversation(index, item)


def system_message_in_conversation(index: int, item: Item) -> InvalidInput:
    """The error for ``item``, at ``index`` of the caller's Conversation, of another role."""
    return InvalidInput(
        "system_message_in_conversation",
        f"conversation item {index} has role {item.role!r}; system instructions belong "
        "in system_context, the conversation holds only user, assistant and tool messages",
        item_index=index,
    )


def _sendable(content: list[Block]) -> list[Block]:
    # A plain loop (no generator) because this runs once per message on the hot path; the
    # common case, no artifacts, hands on the very same list.
    for block in content:
        if block["type"] == "tool_result" and "artifacts" in block:
            return content_without_artifacts(content)
    return content


def assemble_request(
    system_context: Sequence[SystemPart],
    items: Sequence[Item],
    tools: Sequence[ToolDefinition],
    max_output_tokens: int,
) -> dict[str, Any]:
    """The request (its provenance is ``PreparedModelCall.provenance``)."""
    messages: list[RequestMessage] = [
        {"role": "system", "content": part.content} for part in system_context
    ]
    for item in items:
        messages.append({"role": item.role, "content": _sendable(item.content)})
    request: dict[str, Any] = {
        "messages": messages,
        "tools": list(tools),
        "max_output_tokens": max_output_tokens,
    }
    return request
