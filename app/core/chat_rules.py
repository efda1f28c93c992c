"""spec §5 append rules, checked on a whole batch before anything is written.

A batch is all-or-nothing: the first violation raises with the index of the offending message, so
the caller's transaction writes nothing. Tool calls opened earlier in the same batch can be
answered later in it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from app.core.content import Block, blank_content
from app.core.errors import Conflict, InvalidInput

__all__ = [
    "MAX_SEQUENCE",
    "AppendPlan",
    "PlannedMessage",
    "check_append",
    "check_tool_result_placement",
]

# Sequences are signed 64-bit integers in the store (BIGINT on PostgreSQL, INTEGER on SQLite):
# a larger number in a query fails in the database driver instead of matching nothing, so
# inputs that name a sequence are bounded by this.
MAX_SEQUENCE = 2**63 - 1

# Assistant blocks are ordered thinking, text, provider_opaque, tool_call (spec §1).
_ASSISTANT_RANK: Final = {"thinking": 0, "text": 1, "provider_opaque": 2, "tool_call": 3}


@dataclass(frozen=True, slots=True)
class PlannedMessage:
    role: str
    kind: str
    content: list[Block]
    opened_calls: tuple[tuple[str, str], ...] = ()  # (call id, tool name) in block order
    resolved_call: str | None = None  # the call id a tool message answers
    tool_name: str | None = None  # the answered call's name


@dataclass(frozen=True, slots=True)
class AppendPlan:
    messages: list[PlannedMessage] = field(default_factory=list)


def _invalid(code: str, index: int, detail: str) -> InvalidInput:
    return InvalidInput(code, f"message {index}: {detail}", index=index)


def check_append(
    batch: Sequence[tuple[str, str, list[Block]]], unresolved: Mapping[str, str]
) -> AppendPlan:
    """Check ``(role, kind, content)`` messages against the unresolved calls (id → name).

    A result whose id names no unresolved call is ``unknown_tool_call`` (422, an id of the body
    that names nothing; the store tells a call answered earlier apart: ``MessageRepository``);
    a second result for a call this batch answers already is ``duplicate_tool_result``."""
    open_calls = dict(unresolved)
    answered: set[str] = set()
    planned: list[PlannedMessage] = []
    for index, (role, kind, content) in enumerate(batch):
        if role == "system":
            raise _invalid(
                "system_message_in_conversation",
                index,
                "a Conversation never holds a system message; put it in the agent's system prompt",
            )
        if kind != "normal" and role != "user":
            raise _invalid("invalid_kind", index, f"kind {kind!r} is only for user-role messages")
        if role == "tool" and not content:
            raise _invalid("empty_message", index, "a tool message needs its tool_result block")
        if role == "user" and blank_content(content):
            raise _invalid(
                "empty_message",
                index,
                "a user message needs a block that is not blank text (spec §5: an empty user "
                "message is refused, and blank text is empty)",
            )
        for block in content:
            if block["type"] == "tool_call" and role != "assistant":
                raise _invalid("invalid_block", index, "tool_call blocks belong to assistants")
        check_tool_result_placement(index, role, [block["type"] for block in content])
        if role == "assistant":
            planned.append(_assistant(index, kind, content, open_calls))
        elif role == "tool":
            planned.append(_tool(index, kind, content, open_calls, answered))
        else:
            planned.append(PlannedMessage(role, kind, content))
    return AppendPlan(planned)


def check_tool_result_placement(index: int, role: str, block_types: Sequence[str]) -> None:
    """A tool message holds exactly one tool_result block, and only tool messages hold one.

    spec §1. Shared with the API's content schema, so a stateless prepare refuses what an append
    refuses, with the same code; ``block_types`` are the message's block ``type`` values.
    """
    if role == "tool":
        if list(block_types) != ["tool_result"]:
            raise _invalid(
                "invalid_tool_message", index, "a tool message holds exactly one tool_result block"
            )
    elif "tool_result" in block_types:
        raise _invalid("invalid_block", index, "tool_result blocks belong to tool messages")


def _assistant(
    index: int, kind: str, content: list[Block], open_calls: dict[str, str]
) -> PlannedMessage:
    ranks = [_ASSISTANT_RANK.get(b["type"], -1) for b in content]
    if -1 in ranks:
        raise _invalid(
            "invalid_block",
            index,
            "assistant messages hold only thinking, text, provider_opaque and tool_call blocks",
        )
    if ranks != sorted(ranks):
        raise _invalid(
            "invalid_block_order",
            index,
            "assistant blocks go in the order thinking, text, provider_opaque, tool_call",
        )
    opened: list[tuple[str, str]] = []
    for block in content:
        if block["type"] == "tool_call":
            call_id = block["id"]
            if call_id in open_calls:
                raise Conflict(
                    "duplicate_tool_call_id",
                    f"message {index}: tool call id {call_id!r} duplicates a call that has no "
                    "result yet; give every call a unique id",
                    index=index,
                    tool_call_id=call_id,
                )
            open_calls[call_id] = block["name"]
            opened.append((call_id, block["name"]))
    return PlannedMessage("assistant", kind, content, opened_calls=tuple(opened))


def _tool(
    index: int, kind: str, content: list[Block], open_calls: dict[str, str], answered: set[str]
) -> PlannedMessage:
    result = content[0]
    assert result["type"] == "tool_result"  # the only block: check_tool_result_placement ran
    call_id = result["id"]
    name = open_calls.pop(call_id, None)
    if name is None:
        if call_id in answered:
            raise InvalidInput(
                "duplicate_tool_result",
                f"message {index}: tool call {call_id!r} is answered twice in this batch; send "
                "one result per call",
                index=index,
                tool_call_id=call_id,
            )
        raise InvalidInput(
            "unknown_tool_call",
            f"message {index}: tool result {call_id!r} answers no tool call of this session "
            "that waits for a result",
            index=index,
            tool_call_id=call_id,
            field=f"messages.{index}.content.0.id",
        )
    answered.add(call_id)
    return PlannedMessage("tool", kind, content, resolved_call=call_id, tool_name=name)
