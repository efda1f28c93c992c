"""A tool message holds exactly one tool_result block, and only tool messages hold one (spec §1).

Append always refused other shapes (``app.core.chat_rules``); the stateless prepare used to drop
a text-only tool message silently (``dropped_orphan_results: 0``) and to pass a tool_result in a
user or assistant message on to encoders that lost it. Every body that takes a Conversation now
refuses them with append's own code and message index.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.helpers import append, assistant_calls, new_session, stored, text, user

pytestmark = pytest.mark.anyio

CALL = assistant_calls(("c1", "read"))
RESULT = {"type": "tool_result", "id": "c1", "name": "read", "output": text("body")}
TEXT = {"type": "text", "text": "loose"}

# (conversation after a user request and the call, code, index of the offending message)
MISPLACED = [
    ([{"role": "tool", "content": [TEXT]}], "invalid_tool_message", 2),
    ([{"role": "tool", "content": [RESULT, TEXT]}], "invalid_tool_message", 2),
    ([{"role": "tool", "content": [RESULT, RESULT]}], "invalid_tool_message", 2),
    ([{"role": "user", "content": [RESULT]}], "invalid_block", 2),
    (
        [{"role": "tool", "content": [RESULT]}, {"role": "assistant", "content": [RESULT]}],
        "invalid_block",
        3,
    ),
]


def prepare_body(conversation: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "conversation": [user("go"), CALL, *conversation],
        "model": {"context_window_tokens": 10_000, "max_output_tokens": 400},
    }


def refused(response: httpx.Response, code: str, index: int) -> None:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert (response.json()["code"], response.json()["index"]) == (code, index)


@pytest.mark.parametrize(("conversation", "code", "index"), MISPLACED)
async def test_prepare_and_token_count_refuse_it_as_append_does(
    api: httpx.AsyncClient, conversation: list[dict[str, Any]], code: str, index: int
) -> None:
    body = prepare_body(conversation)
    refused(await api.post("/v1/prepare", json=body), code, index)
    refused(await api.post("/v1/tokens/count", json={"prepare": body}), code, index)
    sid = await new_session(api)
    refused(await append(api, sid, *body["conversation"]), code, index)
    assert await stored(api, sid) == []


async def test_a_tool_message_with_its_one_result_is_prepared(api: httpx.AsyncClient) -> None:
    response = await api.post(
        "/v1/prepare", json=prepare_body([{"role": "tool", "content": [RESULT]}])
    )
    assert response.status_code == 200, response.text
    assert [m["role"] for m in response.json()["request"]["messages"]] == [
        "user",
        "assistant",
        "tool",
    ]
    assert response.json()["projection"]["dropped_orphan_results"] == 0
