"""Encode a prepared request as an OpenAI Responses body (``POST {base}/responses``).

Sources, consulted 2026-12-05 through the project's documentation search and the ``openai``
SDK's request types (``ResponseCreateParams``, ``ResponseInputItemParam``,
``FunctionToolParam``, ``ResponseReasoningItemParam``):
- ``input`` is a list of items: messages ``{type:"message", role, content}`` (``role`` one of
  ``user``, ``assistant``, ``system``, ``developer``; ``content`` a string or input parts
  ``input_text {text}``, ``input_image {image_url, detail}``, ``input_file {filename,
  file_data}``), ``function_call {call_id, name, arguments}`` (``arguments`` a JSON *string*),
  ``function_call_output {call_id, output}`` (a string or ``input_text`` parts) and
  ``reasoning {id, summary, encrypted_content, ...}`` items;
- ``tools: [{type:"function", name, description, parameters, strict}]`` (``strict`` is
  required; omitted when there are no tools);
- ``max_output_tokens`` (reasoning tokens included);
- ``store: false`` keeps nothing on the provider (every call sends its whole input, which is
  what the prepare builds), and ``include: ["reasoning.encrypted_content"]`` returns each
  reasoning item's state encrypted, so it can be sent back on the next call without ``store``.
  OpenAI refuses that ``include`` for a model that does not reason (HTTP 400 "Encrypted content
  is not supported with this model": gpt-4o, gpt-4.1, gpt-5-chat), so it is sent only when
  ``reasoning`` (the model's capability ``ModelCapabilities.reasoning``) is true;
- streaming: ``stream: true`` (the usage comes with ``response.completed``).

Decisions: each System Context part is its own ``system`` message, in order, as in the Chat
Completions encoding. A user or system message made of exactly one text block is sent as a plain
string, anything else as a list of parts. An assistant message becomes, in this order, its
reasoning items, one ``assistant`` message whose content is its text blocks joined by a newline
(the provider takes input parts only in user, system and developer messages), when it has text,
and one ``function_call`` per tool call. A reasoning item is the ``provider_opaque`` block of
driver ``openai_responses``, kind ``reasoning``, whose payload is the item exactly as the provider
returned it: it is sent back verbatim (``app.providers.openai_responses``). A thinking block
without such an item, and opaque blocks of other drivers, are not sent (a bare thinking text is
no valid input item).
Tool results carry their state line, and an empty result ``[no output]``, exactly as the Chat
Completions encoding writes them (``tool_result_body``, spec §9). Attachments: images are
``input_image`` parts (base64 as a ``data:`` URL), base64 PDFs ``input_file`` parts, anything
else a text note (``attachment_note``); a tool output takes text only. The same request always
yields the same body (dict order is fixed here).

Caching (``caching``, a ``CachePlan`` of ``app.core.caching.breakpoints``): the provider caches
prefixes by
itself; the plan's ``cache_key`` is sent as ``prompt_cache_key`` (after ``max_output_tokens``),
as for Chat Completions. Without a plan no key is sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.core.caching.breakpoints import CachePlan
from app.core.content import Block, DataBlock
from app.providers.encoding._common import PDF_MEDIA_TYPE, attachment_note, is_image
from app.providers.encoding.openai_chat import only_tool_result, tool_result_body

__all__ = [
    "INCLUDE",
    "RESPONSES_DRIVER",
    "encode_openai_responses",
    "message_items",
]

# The ``driver`` of the provider_opaque blocks this encoding echoes back.
RESPONSES_DRIVER = "openai_responses"
# What a stateless call asks to get back: the reasoning state, to send on the next call.
INCLUDE: tuple[str, ...] = ("reasoning.encrypted_content",)


def encode_openai_responses(
    request: Mapping[str, Any],
    *,
    model: str | None = None,
    stream: bool = False,
    caching: CachePlan | None = None,
    reasoning: bool = False,
) -> dict[str, Any]:
    """The Responses body for a prepared ``request`` (messages, tools, max_output_tokens), with
    the ``prompt_cache_key`` of ``caching`` when it has one, asking for the reasoning state back
    when the model is ``reasoning``."""
    body: dict[str, Any] = {}
    if model is not None:
        body["model"] = model
    body["input"] = [item for m in request["messages"] for item in message_items(m)]
    tools = request.get("tools") or []
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t["name"],
                "description": t["description"],
                "parameters": t["input_schema"],
                # Our schemas are plain JSON Schema, not the strict subset.
                "strict": False,
            }
            for t in tools
        ]
    if request.get("max_output_tokens") is not None:
        body["max_output_tokens"] = request["max_output_tokens"]
    if caching is not None and caching.cache_key is not None:
        body["prompt_cache_key"] = caching.cache_key
    body["store"] = False
    if reasoning:
        body["include"] = list(INCLUDE)
    if stream:
        body["stream"] = True
    # The caller's sampling fields on the proxy path (``encoding/sampling.py``), last:
    # the prefix a provider caches is the same bytes with them or without.
    body.update(request.get("extra") or ())
    return body


def message_items(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One prepared message as Responses input items (none for an assistant message that
    holds nothing this protocol can carry)."""
    role = message["role"]
    content: Sequence[Block] = message["content"]
    if role == "tool":
        result = only_tool_result(content)
        output = tool_result_body(result)
        if isinstance(output, list):
            output = [{"type": "input_text", "text": part["text"]} for part in output]
        return [{"type": "function_call_output", "call_id": result["id"], "output": output}]
    if role == "assistant":
        return _assistant_items(content)
    if role not in ("system", "user"):
        raise ValueError(f"unknown message role {role!r}")
    parts = [_input_part(b) for b in content if b["type"] in ("text", "data")]
    return [{"type": "message", "role": role, "content": _parts_or_string(parts)}]


def _assistant_items(content: Sequence[Block]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for block in content:
        if (
            block["type"] == "provider_opaque"
            and block["driver"] == RESPONSES_DRIVER
            and block["kind"] == "reasoning"
            and isinstance(block["payload"], dict)
        ):
            items.append(dict(block["payload"]))
    # The provider takes an earlier answer's text as one string (input parts are for user,
    # system and developer messages); an attachment in an answer becomes its note.
    texts = [
        b["text"] if b["type"] == "text" else attachment_note(b)
        for b in content
        if b["type"] == "data" or (b["type"] == "text" and b["text"])
    ]
    if texts:
        items.append({"type": "message", "role": "assistant", "content": "\n".join(texts)})
    for block in content:
        if block["type"] == "tool_call":
            items.append(
                {
                    "type": "function_call",
                    "call_id": block["id"],
                    "name": block["name"],
                    # Verbatim; only an empty one is normalized (an empty string is not JSON).
                    "arguments": block["input"] or "{}",
                }
            )
    return items


def _input_part(block: Block) -> dict[str, Any]:
    if block["type"] == "text":
        return {"type": "input_text", "text": block["text"]}
    assert block["type"] == "data"
    return _data_part(block)


def _data_part(block: DataBlock) -> dict[str, Any]:
    source = block["source"]
    kind = source["source_type"]
    if kind == "file_id":
        # A file id names a file of some provider: never assumed to be one of this one's.
        return {"type": "input_text", "text": attachment_note(block)}
    if is_image(block):
        if kind == "url":
            url = source.get("url", "")
        else:
            url = f"data:{source.get('media_type')};base64,{source.get('data', '')}"
        return {"type": "input_image", "image_url": url, "detail": "auto"}
    if kind == "base64" and source.get("media_type") == PDF_MEDIA_TYPE:
        return {
            "type": "input_file",
            "filename": block.get("name") or "document.pdf",
            "file_data": f"data:{PDF_MEDIA_TYPE};base64,{source.get('data', '')}",
        }
    return {"type": "input_text", "text": attachment_note(block)}


def _parts_or_string(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if len(parts) == 1 and parts[0]["type"] == "input_text":
        text: str = parts[0]["text"]
        return text
    return parts
