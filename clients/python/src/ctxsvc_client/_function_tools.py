"""Tools as typed Python functions: the schema comes from the signature and the docstring.

``@function_tool`` reads a function (plain or ``async``) once: its name, the first paragraph of
its docstring as the description, each parameter's annotation and default as a pydantic field
(described by the docstring's ``Args:`` / ``:param:`` / numpydoc entry), and builds the JSON
Schema the model sees — as the OpenAI Agents SDK's ``function_tool`` does. The same object is
given to ``create_session`` (in ``agent["tools"]``: its schema is sent) and runs the calls of
``run_turn`` (the client remembers the functions of the sessions it created; another process
passes ``tools=[...]``).

The error rule, one for every ``FunctionTool``:

- arguments that do not match the signature are the model's mistake: an ``error`` result that
  names what is wrong, and the function is not called;
- an exception the function raises becomes an ``error`` result with the text
  ``"<ExceptionType>: <message>"`` (``on_error="result"``, the default), so the model can
  recover; with ``on_error="raise"`` it propagates out of ``run_turn`` instead, and the turn
  stays waiting for that result (post it with ``post_tool_results`` or cancel the turn).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_type_hints, overload

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ctxsvc_client._inputs import ToolSpec

__all__ = ["FunctionTool", "OnError", "function_tool", "tool_table"]

OnError = Literal["result", "raise"]


@dataclass(frozen=True, slots=True)
class FunctionTool:
    """A caller-side tool built from a function (``function_tool``)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    function: Callable[..., Any]
    arguments_model: type[BaseModel]
    on_error: OnError = "result"
    runs_commands: bool = False

    def spec(self) -> ToolSpec:
        """The tool as an agent definition lists it (what the model is shown)."""
        spec: ToolSpec = {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }
        if self.runs_commands:
            spec["runs_commands"] = True
        return spec

    def keyword_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The model's arguments checked against the signature, as keyword arguments
        (``ValueError`` naming what is wrong)."""
        try:
            parsed = self.arguments_model.model_validate(dict(arguments))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            raise ValueError(
                f"the arguments do not match {self.name}'s parameters: {problems}"
            ) from None
        return {field: getattr(parsed, field) for field in type(parsed).model_fields}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)


@overload
def function_tool(function: Callable[..., Any], /) -> FunctionTool: ...


@overload
def function_tool(
    *,
    name: str | None = None,
    description: str | None = None,
    on_error: OnError = "result",
    runs_commands: bool = False,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def function_tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    on_error: OnError = "result",
    runs_commands: bool = False,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make ``function`` a tool: ``@function_tool`` or ``@function_tool(on_error="raise")``.

    ``name`` / ``description`` replace the function's name and docstring summary;
    ``runs_commands`` tells the service the tool runs commands (a general agent then gets the
    sandbox policy). Raises ``TypeError`` for a signature JSON arguments cannot fill
    (``*args``, ``**kwargs``, positional-only parameters).
    """

    def build(fn: Callable[..., Any]) -> FunctionTool:
        doc = docstring_parser.parse(inspect.getdoc(fn) or "")
        summary = "\n\n".join(p for p in (doc.short_description, doc.long_description) if p)
        model = _arguments_model(fn, {p.arg_name: p.description or "" for p in doc.params})
        schema = model.model_json_schema()
        schema.pop("title", None)
        return FunctionTool(
            name=name or fn.__name__,
            description=description or summary or fn.__name__,
            input_schema=schema,
            function=fn,
            arguments_model=model,
            on_error=on_error,
            runs_commands=runs_commands,
        )

    return build if function is None else build(function)


def _arguments_model(fn: Callable[..., Any], described: Mapping[str, str]) -> type[BaseModel]:
    hints = get_type_hints(fn)
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.kind in (
            parameter.VAR_POSITIONAL,
            parameter.VAR_KEYWORD,
            parameter.POSITIONAL_ONLY,
        ):
            raise TypeError(
                f"{fn.__name__}: parameter {parameter.name!r} cannot be filled from JSON "
                "arguments (no *args, **kwargs or positional-only parameters)"
            )
        default = ... if parameter.default is parameter.empty else parameter.default
        text = described.get(parameter.name) or None
        fields[parameter.name] = (
            hints.get(parameter.name, Any),
            Field(default, description=text),
        )
    return create_model(f"{fn.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields)


def tool_table(
    tools: Mapping[str, Callable[..., Any]] | Sequence[FunctionTool] | None,
) -> dict[str, Callable[..., Any]]:
    """Tools by name: a mapping as given, or ``FunctionTool``s under their names."""
    if tools is None:
        return {}
    if isinstance(tools, Mapping):
        return dict(tools)
    return {tool.name: tool for tool in tools}
