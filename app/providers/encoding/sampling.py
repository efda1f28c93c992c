"""The caller's sampling fields as a provider body carries them (spec §21.3): the drop-in
endpoints read them in the caller's protocol (``app.api.compat._sampling``) into a ``Sampling``,
and ``sampling_fields`` writes what the provider's protocol can carry, always in the same order.
The encoders append those fields after everything else (``request["extra"]``), so the prefix a
provider caches is the same bytes with them or without; a turn's request has none.

Written: ``temperature`` (at most 1 to Anthropic, whose range ends there), ``top_p``, ``stop``
(Chat) / ``stop_sequences`` (Anthropic; Responses has no such field: dropped), ``tool_choice``
in the protocol's shape with ``parallel_tool_calls`` (OpenAI) or Anthropic's inverted
``disable_parallel_tool_use`` inside it, ``seed`` (Chat only). The tool fields go only with
tools: OpenAI refuses a ``tool_choice`` or ``parallel_tool_calls`` without them. Pure, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

__all__ = ["MAX_TEMPERATURE", "Choice", "Sampling", "sampling_fields"]

Choice: TypeAlias = Literal["auto", "none", "required", "tool"]

# Anthropic's temperature stops at 1, OpenAI's at 2.
MAX_TEMPERATURE = {"openai_chat": 2.0, "openai_responses": 2.0, "anthropic_messages": 1.0}


@dataclass(frozen=True, slots=True)
class Sampling:
    """What the caller asked of the model's sampling, protocol-neutral (``None``: not set)."""

    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] | None = None
    # ``tool``: the one tool named by ``tool_name``; ``required``: any tool.
    tool_choice: Choice | None = None
    tool_name: str | None = None
    parallel_tool_calls: bool | None = None
    seed: int | None = None


def sampling_fields(sampling: Sampling, kind: str, *, has_tools: bool) -> dict[str, Any]:
    """The body fields ``kind``'s protocol carries of ``sampling``, always in the same order.
    Tool fields go only with tools (OpenAI refuses a ``tool_choice`` without them)."""
    if kind not in MAX_TEMPERATURE:  # scripted, local: no wire body
        return {}
    out: dict[str, Any] = {}
    if sampling.temperature is not None:
        out["temperature"] = min(sampling.temperature, MAX_TEMPERATURE[kind])
    if sampling.top_p is not None:
        out["top_p"] = sampling.top_p
    if sampling.stop is not None and kind != "openai_responses":
        out["stop_sequences" if kind == "anthropic_messages" else "stop"] = list(sampling.stop)
    if has_tools:
        if kind == "anthropic_messages":
            choice = _anthropic_choice(sampling)
            if choice is not None:
                out["tool_choice"] = choice
        else:
            if sampling.tool_choice is not None:
                out["tool_choice"] = _openai_choice(sampling, kind)
            if sampling.parallel_tool_calls is not None:
                out["parallel_tool_calls"] = sampling.parallel_tool_calls
    if sampling.seed is not None and kind == "openai_chat":
        out["seed"] = sampling.seed
    return out


def _openai_choice(sampling: Sampling, kind: str) -> Any:
    if sampling.tool_choice != "tool":
        return sampling.tool_choice
    if kind == "openai_chat":
        return {"type": "function", "function": {"name": sampling.tool_name}}
    return {"type": "function", "name": sampling.tool_name}


def _anthropic_choice(sampling: Sampling) -> dict[str, Any] | None:
    choice, parallel = sampling.tool_choice, sampling.parallel_tool_calls
    if choice is None and parallel is None:
        return None
    kind = {"auto": "auto", "none": "none", "required": "any", "tool": "tool"}[choice or "auto"]
    out: dict[str, Any] = {"type": kind}
    if kind == "tool":
        out["name"] = sampling.tool_name
    # ``none`` takes no other field: whether calls run in parallel means nothing there.
    if parallel is not None and kind != "none":
        out["disable_parallel_tool_use"] = not parallel
    return out
