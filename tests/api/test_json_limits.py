"""Every JSON the service accepts is bounded in depth and size: JSON carried
as text (``tool_call.input``) and free-form JSON values (payloads, artifacts, tool schemas,
scripted entries) past 64 levels or 1 048 576 characters are refused with 422 ``invalid_request``
naming the field, and nothing is stored, on both engines. Arguments a model produces past the
limits become an error result the model sees; the turn goes on."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from app.core.jsontext import MAX_ARGUMENT_DEPTH, loads_arguments
from app.core.limits.json_values import MAX_JSON_CHARS, MAX_JSON_DEPTH, json_text_problem
from tests.api.helpers import (
    append,
    assistant_calls,
    new_session,
    run_turn,
    scripted_model,
    stored,
    text,
    user,
)

pytestmark = pytest.mark.anyio


def test_what_is_accepted_reads_back_as_itself() -> None:
    # The readers of stored arguments refuse past their own cap; nothing accepted may be past it.
    assert MAX_JSON_DEPTH <= MAX_ARGUMENT_DEPTH
    at_limit = nested_text(MAX_JSON_DEPTH)
    assert json_text_problem(at_limit) is None
    assert loads_arguments(at_limit) == nested(MAX_JSON_DEPTH)


def nested(depth: int) -> Any:
    """``depth`` levels of arrays and objects (alternating), around a number."""
    value: Any = 1
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def nested_text(depth: int) -> str:
    """``json.dumps(nested(depth))``, built without recursion (the encoder fails past ~1 000)."""
    opening = ["[" if level % 2 else '{"k": ' for level in range(depth)]
    closing = ["]" if level % 2 else "}" for level in range(depth)]
    return "".join(reversed(opening)) + "1" + "".join(closing)


def call_with_input(raw: str) -> dict[str, Any]:
    message = assistant_calls(("c1", "read"))
    message["content"][0]["input"] = raw
    return message


def refused_field(response: httpx.Response) -> str:
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["code"] == "invalid_request"
    (error,) = problem["errors"]
    return ".".join(str(part) for part in error["loc"])


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 1_000, 100_000])
async def test_tool_call_input_nested_too_deep_is_refused_and_nothing_stored(
    api: httpx.AsyncClient, depth: int
) -> None:
    sid = await new_session(api)
    response = await append(api, sid, user("hi"), call_with_input(nested_text(depth)))
    assert refused_field(response) == "body.messages.1.content.0.tool_call.input"
    assert f"deeper than {MAX_JSON_DEPTH} levels" in response.json()["detail"]
    assert await stored(api, sid) == []


async def test_tool_call_input_at_the_depth_limit_is_stored_and_read_back(
    api: httpx.AsyncClient,
) -> None:
    sid = await new_session(api)
    raw = json.dumps(nested(MAX_JSON_DEPTH))
    assert (await append(api, sid, user("hi"), call_with_input(raw))).status_code == 201
    assert (await stored(api, sid))[1]["content"][0]["input"] == raw
    for encode in ("anthropic_messages", "openai_chat"):
        context = await api.get(f"/v1/sessions/{sid}/context", params={"encode": encode})
        assert context.status_code == 200, context.text


async def test_brackets_inside_strings_do_not_count(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    raw = json.dumps({"pattern": "[" * 500 + "{" * 500, "quote": '"\\[' * 100})
    assert (await append(api, sid, user("hi"), call_with_input(raw))).status_code == 201


async def test_tool_call_input_that_is_not_json_is_still_bounded(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    assert (await append(api, sid, user("hi"), call_with_input("{oops"))).status_code == 201
    unclosed = "[" * (MAX_JSON_DEPTH + 1)  # what a reader would recurse into before failing
    refused = await append(api, sid, call_with_input(unclosed))
    assert refused_field(refused) == "body.messages.0.content.0.tool_call.input"


async def test_tool_call_input_size_limit(api: httpx.AsyncClient) -> None:
    # A model whose input room holds a message of that size (a smaller one refuses the message
    # as one it could never be sent: message_too_large).
    wide = await scripted_model(api, [], context_window_tokens=1_000_000, max_output_tokens=1000)
    sid = await new_session(api, model_id=wide)
    at_limit = json.dumps({"s": "x" * (MAX_JSON_CHARS - 9)})
    assert len(at_limit) == MAX_JSON_CHARS
    assert (await append(api, sid, user("hi"), call_with_input(at_limit))).status_code == 201
    over = json.dumps({"s": "x" * (MAX_JSON_CHARS - 8)})
    sid2 = await new_session(api, model_id=wide)
    refused = await append(api, sid2, user("hi"), call_with_input(over))
    assert refused_field(refused) == "body.messages.1.content.0.tool_call.input"
    assert await stored(api, sid2) == []


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (nested(MAX_JSON_DEPTH + 1), "deeper than 64 levels"),
        ({"s": "x" * MAX_JSON_CHARS}, "over the 1048576-character limit"),
    ],
)
async def test_provider_opaque_payload_limits(
    api: httpx.AsyncClient, payload: Any, why: str
) -> None:
    sid = await new_session(api)
    opaque = {"type": "provider_opaque", "driver": "anthropic", "kind": "thinking"}
    message = {"role": "assistant", "content": [{**opaque, "payload": payload}]}
    response = await append(api, sid, user("hi"), message)
    assert refused_field(response) == "body.messages.1.content.0.provider_opaque.payload"
    assert why in response.json()["detail"]
    assert await stored(api, sid) == []
    within = {"role": "assistant", "content": [{**opaque, "payload": nested(MAX_JSON_DEPTH)}]}
    assert (await append(api, sid, user("hi"), within)).status_code == 201


async def test_nan_in_a_free_form_value_is_refused(api: httpx.AsyncClient) -> None:
    # Python's reader takes NaN and 1e400 (infinity); PostgreSQL's json type refuses them.
    sid = await new_session(api)
    for number in ("NaN", "1e400", "-Infinity"):
        raw = (
            '{"messages": [{"role": "assistant", "content": [{"type": "provider_opaque", '
            f'"driver": "d", "kind": "k", "payload": {{"x": {number}}}}}]}}]}}'
        )
        response = await api.post(
            f"/v1/sessions/{sid}/messages",
            content=raw.encode(),
            headers={"content-type": "application/json"},
        )
        assert refused_field(response) == "body.messages.0.content.0.provider_opaque.payload"
        assert "NaN or an infinite number" in response.json()["detail"]
    assert await stored(api, sid) == []


async def test_artifact_payload_limits_on_append(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    result = {
        "role": "tool",
        "content": [
            {
                "type": "tool_result",
                "id": "c1",
                "output": text("ok"),
                "artifacts": [{"kind": "log", "payload": nested(MAX_JSON_DEPTH + 1)}],
            }
        ],
    }
    response = await append(api, sid, user("hi"), assistant_calls(("c1", "read")), result)
    assert refused_field(response) == "body.messages.2.content.0.tool_result.artifacts.0.payload"
    assert await stored(api, sid) == []


async def test_stateless_bodies_are_bounded_too(api: httpx.AsyncClient) -> None:
    model = {"context_window_tokens": 10_000, "max_output_tokens": 100}
    deep_call = call_with_input(json.dumps(nested(MAX_JSON_DEPTH + 1)))
    body = {"conversation": [user("hi"), deep_call], "model": model}
    response = await api.post("/v1/prepare", json=body)
    assert refused_field(response) == "body.conversation.1.content.0.tool_call.input"
    tool = {"name": "t", "input_schema": nested(MAX_JSON_DEPTH + 1)}
    response = await api.post("/v1/prepare", json={"tools": [tool], "model": model})
    assert refused_field(response) == "body.tools.0.input_schema"
    response = await api.post("/v1/tokens/count", json={"content": deep_call["content"]})
    assert refused_field(response) == "body.content.0.tool_call.input"


async def test_agent_tool_schema_and_script_entries_are_bounded(api: httpx.AsyncClient) -> None:
    tools = [{"name": "t", "input_schema": nested(MAX_JSON_DEPTH + 1)}]
    response = await api.post(
        "/v1/sessions", json={"model_id": "local", "agent": {"system_prompt": "p", "tools": tools}}
    )
    assert refused_field(response) == "body.agent.tools.0.input_schema"
    entry = {"tool_calls": [{"name": "t", "input": nested(MAX_JSON_DEPTH + 1)}]}
    body = {
        "context_window_tokens": 1000,
        "max_output_tokens": 100,
        "provider": {"kind": "scripted", "script": [entry]},
    }
    response = await api.put("/v1/models/too-deep", json=body)
    assert response.status_code == 422, response.text
    assert (await api.get("/v1/models/too-deep")).status_code == 404


async def test_a_body_too_deep_to_parse_is_a_422_not_a_400_or_500(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    raw = '{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}"
    response = await api.post(
        f"/v1/sessions/{sid}/messages",
        content=raw.encode(),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "invalid_request"
    assert "nests arrays and objects too deeply" in response.json()["detail"]


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 2_000])
async def test_model_arguments_too_deep_are_a_result_the_model_sees(
    api: httpx.AsyncClient, depth: int
) -> None:
    raw = nested_text(depth)
    model = await scripted_model(
        api, [{"tool_calls": [{"name": "read", "input": raw}]}, {"text": "continued"}]
    )
    sid = await new_session(api, model_id=model)
    turn = await run_turn(api, sid)
    assert (turn["status"], turn["outcome"]) == ("completed", {"final_text": "continued"}), turn
    (result,) = [m for m in await stored(api, sid) if m["role"] == "tool"]
    block = result["content"][0]
    assert block["state"] == "error"
    assert block["output"][0]["text"] == (
        "invalid tool input: the arguments' JSON text nests deeper than 64 levels of arrays "
        "and objects"
    )
