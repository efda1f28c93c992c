"""Caller-side tools for ``run_turn``: call the caller's function with the model's arguments and
turn what it returns (or raises) into the tool result the service expects."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ctxsvc_client._function_tools import FunctionTool
from ctxsvc_client._inputs import ToolResultIn
from ctxsvc_client._models import PendingToolCall

__all__ = [
    "ToolFunction",
    "ToolResult",
    "call_arguments",
    "error_result",
    "propagates",
    "result_of",
]

# A tool is called with the model's arguments as keyword arguments; it may be ``async`` with
# ``AsyncClient``. It returns a string, content blocks, a ``ToolResult``, or anything JSON
# can write (sent as its JSON text).
ToolFunction = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool function returns when it needs more than text: a state other than
    ``success``, data blocks, or artifacts for the caller (never sent to the model)."""

    output: str | Sequence[Mapping[str, Any]]
    state: Literal["success", "error", "denied", "interrupted"] = "success"
    artifacts: Sequence[Mapping[str, Any]] = field(default_factory=tuple)


def call_arguments(
    call: PendingToolCall, tools: Mapping[str, ToolFunction]
) -> tuple[ToolFunction, dict[str, Any]] | ToolResultIn:
    """The function and keyword arguments for ``call``, or the error result to post instead."""
    function = tools.get(call.name)
    if function is None:
        return error_result(call, f"no tool named {call.name!r} is available to this caller")
    try:
        arguments = call.arguments()
    except ValueError as exc:
        return error_result(call, f"the arguments are not valid JSON: {exc}")
    if not isinstance(arguments, dict):
        return error_result(call, "the arguments are not a JSON object")
    if isinstance(function, FunctionTool):
        # Checked against the signature first: the function is not called with what it
        # cannot take (the model's mistake, answered as such).
        try:
            arguments = function.keyword_arguments(arguments)
        except ValueError as exc:
            return error_result(call, str(exc))
    return function, arguments


def propagates(function: ToolFunction) -> bool:
    """Whether an exception of ``function`` leaves ``run_turn`` (``on_error="raise"``)
    instead of becoming an ``error`` result."""
    return isinstance(function, FunctionTool) and function.on_error == "raise"


def error_result(call: PendingToolCall, message: str) -> ToolResultIn:
    return {"tool_call_id": call.tool_call_id, "state": "error", "output": [_text(message)]}


def exception_result(call: PendingToolCall, error: BaseException) -> ToolResultIn:
    """A tool that raised: an ``error`` result the model sees (type and message)."""
    return error_result(call, f"{type(error).__name__}: {error}")


def result_of(call: PendingToolCall, value: Any) -> ToolResultIn:
    """The tool result for what a tool function returned."""
    if isinstance(value, ToolResult):
        result: ToolResultIn = {
            "tool_call_id": call.tool_call_id,
            "state": value.state,
            "output": _output(value.output),
        }
        if value.artifacts:
            result["artifacts"] = [dict(a) for a in value.artifacts]
        return result
    return {"tool_call_id": call.tool_call_id, "state": "success", "output": _output(value)}


def _output(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return [_text("")]
    if isinstance(value, str):
        return [_text(value)]
    if _is_blocks(value):
        return [dict(block) for block in value]
    return [_text(json.dumps(value, ensure_ascii=False, default=str))]


def _is_blocks(value: Any) -> bool:
    return (
        isinstance(value, list | tuple)
        and bool(value)
        and all(isinstance(b, Mapping) and b.get("type") in ("text", "data") for b in value)
    )


def _text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}
