"""The sampling fields of a drop-in request, read and checked in the caller's protocol (spec
§21.3) into a protocol-neutral ``Sampling`` (written for the provider by
``app.providers.encoding.sampling``).

Read: ``temperature`` (0–2 for OpenAI, 0–1 for Anthropic), ``top_p`` (0–1); ``stop`` (Chat: a
string or a list) / ``stop_sequences`` (Anthropic); ``tool_choice`` (Chat
``"auto"|"none"|"required"|{"type":"function","function":{"name"}}``, Responses
``"auto"|"none"|"required"|{"type":"function","name"}``, Anthropic
``{"type":"auto"|"any"|"none"|"tool","name"?,"disable_parallel_tool_use"?}``);
``parallel_tool_calls`` (OpenAI); ``seed`` (Chat). A null is a field left out; a ``tool_choice``
form the service does not model (``allowed_tools``, a custom or hosted tool) is dropped; a value
of the wrong type or range is ``InvalidInput`` ``invalid_sampling`` naming the field, raised by
the codec's ``decode`` before anything is stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core.errors import InvalidInput
from app.providers.encoding.sampling import MAX_TEMPERATURE, Choice, Sampling

__all__ = ["read"]

_ANTHROPIC_TYPES: dict[str, Choice] = {
    "auto": "auto",
    "any": "required",
    "none": "none",
    "tool": "tool",
}


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
    temperature = _number(params, "temperature", MAX_TEMPERATURE[protocol])
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
        return _ANTHROPIC_TYPES[kind], name if kind == "tool" else None, disable
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
