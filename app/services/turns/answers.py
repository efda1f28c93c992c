"""A model's answer within the limits of one stored message, before anything of it is stored
(``app.core.limits.messages``).

A provider that sends more than the model's ``max_output_tokens`` can produce (a runaway or
broken stream) never fails the turn, and never stores what no later request could hold: the
text and thinking are cut and marked, a tool call whose arguments are over the free-form JSON
limit keeps its id and name with ``{}`` as arguments and gets the error result the model sees,
and a ``provider_opaque`` block over that limit is dropped (it only echoes provider state back).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping

from app.core.capabilities import ModelCapabilities
from app.core.content import ProviderOpaqueBlock, ToolCallBlock
from app.core.limits.json_values import MAX_JSON_CHARS, json_value_problem
from app.core.limits.messages import answer_text_cap, cut_answer_text
from app.providers.base import ModelResponse

__all__ = ["bounded_answer"]

logger = logging.getLogger(__name__)


def _refusal(chars: int) -> str:
    return (
        f"invalid tool input: the arguments' JSON text is {chars} characters, over the "
        f"{MAX_JSON_CHARS}-character limit; they were not stored and the tool did not run"
    )


def bounded_answer(
    response: ModelResponse, capabilities: ModelCapabilities, *, turn_id: str
) -> tuple[ModelResponse, Mapping[str, str]]:
    """``response`` within the limits (the same object when it already was), and the error
    result text of each call whose arguments were not stored, by call id."""
    cap = answer_text_cap(capabilities.max_output_tokens, capabilities.max_reasoning_tokens)
    text = cut_answer_text(response.text, cap, capabilities.max_output_tokens)
    thinking = cut_answer_text(response.thinking, cap, capabilities.max_output_tokens)
    refused: dict[str, str] = {}
    calls: list[ToolCallBlock] = []
    for call in response.tool_calls:
        if len(call["input"]) > MAX_JSON_CHARS:
            refused[call["id"]] = _refusal(len(call["input"]))
            call = {**call, "input": "{}"}
        calls.append(call)
    opaque: list[ProviderOpaqueBlock] = [
        b for b in response.provider_opaque if json_value_problem(b["payload"]) is None
    ]
    changed = (
        text is not response.text
        or thinking is not response.thinking
        or refused
        or len(opaque) != len(response.provider_opaque)
    )
    if not changed:
        return response, refused
    logger.warning(
        "turn %s: the model's answer was over the limits of one stored message and was cut "
        "(text %d→%d characters, thinking %d→%d, %d call(s) refused, %d opaque block(s) dropped)",
        turn_id,
        len(response.text),
        len(text),
        len(response.thinking),
        len(thinking),
        len(refused),
        len(response.provider_opaque) - len(opaque),
    )
    bounded = dataclasses.replace(
        response, text=text, thinking=thinking, tool_calls=calls, provider_opaque=opaque
    )
    return bounded, refused
