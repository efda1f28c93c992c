"""The caller's sampling fields, read in its protocol and written in the provider's (spec §21.3).

Forwarded: ``temperature`` and ``top_p`` (all three protocols); ``stop`` (OpenAI Chat, a
string or a list) ↔ ``stop_sequences`` (Anthropic; Responses has no such field); ``tool_choice``
(Chat ``"auto"|"none"|"required"|{"type":"function","function":{"name"}}``, Responses
``"auto"|"none"|"required"|{"type":"function","name"}``, Anthropic
``{"type":"auto"|"any"|"none"|"tool","name"?}``); ``parallel_tool_calls`` (OpenAI) ↔
``tool_choice.disable_parallel_tool_use`` (Anthropic, inverted); ``seed`` (Chat to Chat only).

``read`` checks the caller's values in its own protocol (``InvalidInput`` ``invalid_sampling``,
naming the field, before anything is stored: the codec answers it in the protocol's shape); a
null is a field left out. ``provider_fields`` writes what the provider's protocol can carry, in a
fixed order (the wire encoders append it after everything else, so the cached prefix never
moves); what it cannot carry is dropped (docs/drop-in.md lists it). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from app.core.errors import InvalidInput

__all__ = ["Sampling", "provider_fields", "read"]

Choice: TypeAlias = Literal["auto", "none", "required", "tool"]

# Anthropic's temperature stops at 1, OpenAI's at 2: a hotter OpenAI value is sent as 1.
_MAX_TEMPERATURE = {"openai_chat": 2.0, "openai_responses": 2.0, "anthropic_messages": 1.0}
_ANTHROPIC_TYPES = {"auto": "auto", "any": "required", "none": "none", "tool": "tool"}


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


def _refused(field: str, what: str) -> InvalidInput:
    return InvalidInput("invalid_sampling", f"{field} {what}", field=field)


def _number(params: Mapping[str, Any], key: str, high: float) -> float | None:
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= high:
        raise _refused(key, f"must be a number from 0 to {high:g}; got {value!r:.40}")
    return value


def read(params: Mapping[str, Any], protocol: str) -> Sampling:
    """The sampling fields of a caller's ``params`` (its protocol's other request fields)."""
    anthropic = protocol == "anthropic_messages"
    temperature = _number(params, "temperature", _MAX_TEMPERATURE[protocol])
    top_p = _number(params, "top_p", 1.0)
    stop = _stop(params, "stop_sequences" if anthropic else "stop", protocol)
    parallel = params.get("parallel_tool_calls") if not anthropic else None
    if parallel is not None and not isinstance(parallel, bool):
        raise _refused("parallel_tool_calls", f"must be true or false; got {parallel!r:.40}")
    choice, name, disable = _tool_choice(params.get("tool_choice"), protocol)
    if disable is not None:
        parallel = not disable
    seed = params.get("seed") if protocol == "openai_chat" else None
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise _refused("seed", f"must be a whole number; got {seed!r:.40}")
    return Sampling(temperature, top_p, stop, choice, name, parallel, seed)


def _stop(params: Mapping[str, Any], key: str, protocol: str) -> tuple[str, ...] | None:
    if protocol == "openai_responses":  # the protocol has no stop field
        return None
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, str) and key == "stop":
        return (value,)
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return tuple(value)
    what = "a string or a list of strings" if key == "stop" else "a list of strings"
    raise _refused(key, f"must be {what}; got {value!r:.40}")


def _tool_choice(value: Any, protocol: str) -> tuple[Choice | None, str | None, bool | None]:
    """The choice, the tool it names, and Anthropic's ``disable_parallel_tool_use``. A form of
    the protocol this service does not model (``allowed_tools``, a hosted tool) is dropped."""
    if value is None:
        return None, None, None
    if protocol == "anthropic_messages":
        kind = value.get("type") if isinstance(value, dict) else None
        if kind not in _ANTHROPIC_TYPES:
            raise _refused("tool_choice", "must be an object of type auto, any, none or tool")
        disable = value.get("disable_parallel_tool_use")
        if disable is not None and not isinstance(disable, bool):
            raise _refused("tool_choice.disable_parallel_tool_use", "must be true or false")
        name = value.get("name")
        if kind == "tool" and (not isinstance(name, str) or not name):
            raise _refused("tool_choice.name", "must name a tool")
        choice: Choice = _ANTHROPIC_TYPES[kind]  # type: ignore[assignment]
        return choice, name if kind == "tool" else None, disable
    if value in ("auto", "none", "required"):
        return value, None, None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise _refused("tool_choice", "must be auto, none, required or a tool object")
    if value["type"] != "function":
        return None, None, None  # allowed_tools, custom or hosted tools: no equivalent
    holder = value.get("function") if protocol == "openai_chat" else value
    name = holder.get("name") if isinstance(holder, dict) else None
    if not isinstance(name, str) or not name:
        field = "tool_choice.function.name" if protocol == "openai_chat" else "tool_choice.name"
        raise _refused(field, "must name a function")
    return "tool", name, None


def provider_fields(sampling: Sampling, kind: str, *, has_tools: bool) -> dict[str, Any]:
    """The body fields ``kind``'s protocol carries of ``sampling``, always in the same order.
    Tool fields go only with tools (OpenAI refuses a ``tool_choice`` without them)."""
    if kind not in _MAX_TEMPERATURE:  # scripted, local: no wire body
        return {}
    out: dict[str, Any] = {}
    if sampling.temperature is not None:
        out["temperature"] = min(sampling.temperature, _MAX_TEMPERATURE[kind])
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
