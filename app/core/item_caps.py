"""Caps of authored items (SPEC §3.3): refused, never trimmed.

A count must be strictly below its cap, so a count equal to the cap is refused. The count is the
counter's token figure of the item's content as it would be sent. Each error names the item, its
count and the cap, and says what to do (texts after the original runtime's ``item_limits.rs``).
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.capabilities import AGENT_MESSAGE_CAP, SKILL_BODY_CAP, SYSTEM_PART_CAP
from app.core.content import Block
from app.core.counting import TokenCounter
from app.core.errors import InvalidInput

__all__ = ["check_agent_message", "check_skill_body", "check_system_part", "content_tokens"]


def content_tokens(content: Sequence[Block], counter: TokenCounter) -> int:
    return counter.tokens(counter.measure_content(content))


def check_system_part(key: str, content: Sequence[Block], counter: TokenCounter) -> int:
    """Refuse a system context part of ``SYSTEM_PART_CAP`` tokens or more; returns its count."""
    tokens = content_tokens(content, counter)
    if tokens >= SYSTEM_PART_CAP:
        raise InvalidInput(
            "system_context_part_too_large",
            f"system context part {key} needs {tokens} tokens, at or over the "
            f"{SYSTEM_PART_CAP}-token cap; split the source file or shorten it",
            key=key,
            tokens=tokens,
            cap=SYSTEM_PART_CAP,
        )
    return tokens


def check_skill_body(name: str, content: Sequence[Block], counter: TokenCounter) -> int:
    """Refuse a skill body of ``SKILL_BODY_CAP`` tokens or more; returns its count."""
    tokens = content_tokens(content, counter)
    if tokens >= SKILL_BODY_CAP:
        raise InvalidInput(
            "skill_too_large",
            f"skill {name} needs {tokens} tokens, at or over the {SKILL_BODY_CAP}-token cap; "
            "split it into smaller skills",
            skill=name,
            tokens=tokens,
            cap=SKILL_BODY_CAP,
        )
    return tokens


def check_agent_message(task: str, content: Sequence[Block], counter: TokenCounter) -> int:
    """Refuse an agent message of ``AGENT_MESSAGE_CAP`` tokens or more; returns its count."""
    tokens = content_tokens(content, counter)
    if tokens >= AGENT_MESSAGE_CAP:
        raise InvalidInput(
            "agent_message_too_large",
            f"the message from {task} needs {tokens} tokens, at or over the "
            f"{AGENT_MESSAGE_CAP}-token cap; have the sub-agent report a summary instead",
            task=task,
            tokens=tokens,
            cap=AGENT_MESSAGE_CAP,
        )
    return tokens
