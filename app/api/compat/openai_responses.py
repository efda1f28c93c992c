"""The OpenAI Responses codec of the drop-in endpoint ``POST /v1/compat/openai/responses``.

The request is what ``openai.OpenAI().responses.create`` sends when the caller keeps its own
conversation (the OpenAI Agents SDK's default; the ``openai`` SDK's request types
``ResponseCreateParams``, ``ResponseInputItemParam``, ``FunctionToolParam``): ``input`` a string
(one user message) or a list of items, ``instructions``, ``tools`` of type ``function``,
``max_output_tokens``, ``stream``. Every other field (``store``, ``include``, ``tool_choice``,
``reasoning``, ``temperature`` ...) goes verbatim into ``params``.

Items become messages the way a session kept as Responses items does (spec §15.5,
``app.providers.encoding.openai_responses_items``): user and assistant messages, reasoning items
(kept verbatim as ``provider_opaque``), ``function_call`` and ``function_call_output``.
``system`` and ``developer`` messages join ``instructions``, in order, as the caller's system
prompt. The endpoint answers from the history the caller sends, so ``previous_response_id`` and
``conversation`` (the provider's stored state) are refused with
``previous_response_id_unsupported``; hosted tools (web or file search, MCP ...) run at the
provider and are refused with ``unsupported_tool``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal

from app.api.compat._responses_answer import error_body, response_body, response_events
from app.api.compat._sampling import read as read_sampling
from app.api.compat._shared import optional_bool, positive_int, required_string, tool_definition
from app.core.errors import InvalidInput
from app.core.pipeline.prepared_call import ToolDefinition
from app.providers.base import ModelResponse
from app.providers.encoding.openai_responses_items import ConvertedMessage, items_to_messages
from app.services.proxy.contract import AnswerEvent, ProxyMessage, ProxyRequest

__all__ = ["CODEC", "REFUSALS", "OpenAIResponsesCodec"]

# The codes ``decode`` refuses a request with: answered in the protocol's error shape, never
# as problem+json, so they are not in the API description (tests/test_openapi_codes.py).
REFUSALS: tuple[str, ...] = (
    "invalid_request",
    "invalid_model",
    "invalid_input",
    "invalid_system",
    "invalid_tools",
    "invalid_max_tokens",
    "invalid_sampling",
    "unsupported_item",
    "unsupported_tool",
    "previous_response_id_unsupported",
)
# The fields ``decode`` reads; every other one is a ``param``.
_CONSUMED = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "max_output_tokens",
        "stream",
        "previous_response_id",
        "conversation",
    }
)
_SYSTEM_ROLES = ("system", "developer")


class OpenAIResponsesCodec:
    protocol: Literal["openai_responses"] = "openai_responses"

    def decode(self, body: Mapping[str, Any]) -> ProxyRequest:
        if not isinstance(body, Mapping):
            raise InvalidInput("invalid_request", "the body must be a JSON object")
        for key in ("previous_response_id", "conversation"):
            if body.get(key) is not None:
                raise InvalidInput(
                    "previous_response_id_unsupported",
                    f"{key} asks the provider for a conversation it stored; this endpoint keeps "
                    "the conversation itself from what each request sends: send the whole "
                    f"history in input (store: false) and leave {key} out",
                )
        instructions = body.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise InvalidInput("invalid_system", "instructions must be a string")
        system, messages = _input(body.get("input"))
        if instructions:
            system.insert(0, instructions)
        params = {k: v for k, v in body.items() if k not in _CONSUMED}
        return ProxyRequest(
            protocol=self.protocol,
            model=required_string(body, "model", code="invalid_model"),
            system="\n\n".join(system) or None,
            messages=messages,
            tools=_tools(body.get("tools")),
            stream=optional_bool(body, "stream", code="invalid_request"),
            max_output_tokens=positive_int(body, "max_output_tokens", code="invalid_max_tokens"),
            params=params,
            sampling=read_sampling(params, self.protocol),
        )

    def render(self, response: ModelResponse, *, model: str, response_id: str) -> dict[str, Any]:
        return response_body(response, model=model, response_id=response_id)

    def render_stream(
        self, events: AsyncIterator[AnswerEvent], *, model: str, response_id: str
    ) -> AsyncIterator[bytes]:
        return response_events(events, model=model, response_id=response_id)

    def render_error(self, status: int, code: str, message: str) -> dict[str, Any]:
        return error_body(status, code, message)


CODEC = OpenAIResponsesCodec()


def _input(value: Any) -> tuple[list[str], list[ProxyMessage]]:
    """The system texts and the messages of ``input``: each run of items between system and
    developer messages is converted as one list (its indices kept), names of calls carried on."""
    if isinstance(value, str):
        return [], [ProxyMessage("user", [{"type": "text", "text": value}])]
    if not isinstance(value, list) or not value:
        raise InvalidInput("invalid_input", "input must be a string or a non-empty list of items")
    system: list[str] = []
    messages: list[ProxyMessage] = []
    names: dict[str, str] = {}
    run_start = 0
    for index, item in enumerate([*value, None]):
        if item is not None and not isinstance(item, dict):
            raise InvalidInput("invalid_input", f"input[{index}] is not an object")
        is_system = item is not None and item.get("role") in _SYSTEM_ROLES
        if item is not None and not is_system:
            continue
        run = value[run_start:index]
        if run:
            converted = items_to_messages(run, names, first_index=run_start)
            names.update(_call_names(converted))
            messages.extend(_proxy_message(m) for m in converted)
        if item is not None:
            system.append(_system_text(item, index))
        run_start = index + 1
    return system, messages


def _call_names(messages: list[ConvertedMessage]) -> dict[str, str]:
    return {
        block["id"]: block["name"]
        for message in messages
        for block in message.content
        if block["type"] == "tool_call"
    }


def _proxy_message(message: ConvertedMessage) -> ProxyMessage:
    roles: dict[str, Literal["user", "assistant", "tool"]] = {
        "user": "user",
        "assistant": "assistant",
        "tool": "tool",
    }
    return ProxyMessage(roles[message.role], message.content)  # the roles it makes


def _system_text(item: Mapping[str, Any], index: int) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content if isinstance(content, list) else [None]:
        if not isinstance(part, dict) or part.get("type") != "input_text":
            raise InvalidInput(
                "unsupported_item",
                f"item {index} is a {item.get('role')} message with a part other than "
                "input_text; the system prompt is text",
                index=index,
            )
        text = part.get("text")
        parts.append(text if isinstance(text, str) else "")
    return "\n\n".join(parts)


def _tools(value: Any) -> list[ToolDefinition]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidInput("invalid_tools", "tools must be a list")
    out: list[ToolDefinition] = []
    for index, tool in enumerate(value):
        if not isinstance(tool, dict):
            raise InvalidInput("invalid_tools", f"tool {index} is not an object")
        if tool.get("type") != "function":
            raise InvalidInput(
                "unsupported_tool",
                f"tool {index} is of type {tool.get('type')!r:.60}, a tool that runs at the "
                "provider; this endpoint takes function tools",
            )
        schema = tool.get("parameters")
        out.append(tool_definition(tool.get("name"), tool.get("description"), schema, index))
    return out
