"""Caps of authored items (spec §3.3): refused, never trimmed.

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

__all__ = [
    "check_agent_message",
    "check_skill_body",
    "check_system_part",
    "check_system_part_measure",
    "content_tokens",
]


def content_tokens(content: Sequence[Block], counter: TokenCounter) -> int:
    return counter.tokens(counter.measure_content(content))


def _refuse_at_cap(
    tokens: int,
    *,
    cap: int,
    code: str,
    item: str,
    advice: str,
    **extra: str,
) -> int:
    """The one rule of spec §3.3: the count must be strictly below the cap."""
    if tokens >= cap:
        raise InvalidInput(
            code,
            f"{item} needs {tokens} tokens, at or over the {cap}-token cap; {advice}",
            tokens=tokens,
            cap=cap,
            **extra,
        )
    return tokens


def check_system_part(key: str, content: Sequence[Block], counter: TokenCounter) -> int:
    """Refuse a system context part of ``SYSTEM_PART_CAP`` tokens or more; returns its count."""
    return check_system_part_measure(key, counter.measure_content(content), counter)


def check_system_part_measure(key: str, measure: int, counter: TokenCounter) -> int:
    """``check_system_part`` from the part's ``measure_content`` figure, already taken.

    The prepare measures each part once and uses the figure both here and in the budget.
    """
    return _refuse_at_cap(
        counter.tokens(measure),
        cap=SYSTEM_PART_CAP,
        code="system_context_part_too_large",
        item=f"system context part {key}",
        advice="split the source file or shorten it",
        key=key,
    )


def check_skill_body(name: str, content: Sequence[Block], counter: TokenCounter) -> int:
    """Refuse a skill body of ``SKILL_BODY_CAP`` tokens or more; returns its count."""
    return _refuse_at_cap(
        content_tokens(content, counter),
        cap=SKILL_BODY_CAP,
        code="skill_too_large",
        item=f"skill {name}",
        advice="split it into smaller skills",
        skill=name,
    )


def check_agent_message(task: str, content: Sequence[Block], counter: TokenCounter) -> int:
    """Refuse an agent message of ``AGENT_MESSAGE_CAP`` tokens or more; returns its count."""
    return _refuse_at_cap(
        content_tokens(content, counter),
        cap=AGENT_MESSAGE_CAP,
        code="agent_message_too_large",
        item=f"the message from {task}",
        advice="have the sub-agent report a summary instead",
        task=task,
    )
