"""The limits of one stored message: what a caller sends is refused over them
(``message_too_large``, nothing stored), what a provider sends is cut and marked (the turn goes
on). See ``app/core/limits/messages.py``."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.core.limits.json_values import MAX_JSON_CHARS
from app.core.limits.messages import MAX_MESSAGE_BYTES
from tests.api.helpers import append, assistant, new_session, run_turn, scripted_model, user
from tests.api.test_turns import agent, call, history, ok, post_results
from tests.api.test_turns_control import provider, provider_model  # noqa: F401 (fixture)
from tests.conftest import client_for, make_settings
from tests.providers.fakes import FakeProviderServer, FakeToolCall, StreamReply, openai_stream

pytestmark = pytest.mark.anyio

# The compact JSON of a user message's content around its text: [{"type":"text","text":""}].
TEXT_OVERHEAD = 27


def assert_too_large(response: httpx.Response, unit: str, size: int, cap: int) -> None:
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["code"] == "message_too_large"
    assert (problem["unit"], problem["size"], problem["cap"]) == (unit, size, cap)


async def test_a_message_over_the_byte_limit_is_refused_and_one_at_it_stored(
    database_url: str,
) -> None:
    async for api in client_for(make_settings(database_url, max_body_bytes=10_000_000)):
        # A window of 2 000 000 tokens takes any message of 4 MiB (about 1 050 000 tokens).
        wide = await scripted_model(
            api, [], context_window_tokens=2_000_000, max_output_tokens=1000
        )
        sid = await new_session(api, model_id=wide)
        at_limit = "a" * (MAX_MESSAGE_BYTES - TEXT_OVERHEAD)

        over = await append(api, sid, user("Read this."), user(at_limit + "a"))

        assert_too_large(over, "bytes", MAX_MESSAGE_BYTES + 1, MAX_MESSAGE_BYTES)
        assert over.json()["index"] == 1
        assert await history(api, sid) == []  # the whole batch is refused
        stored = await append(api, sid, user(at_limit))
        assert stored.status_code == 201, stored.text


async def test_a_message_the_model_could_never_be_sent_is_refused(api: httpx.AsyncClient) -> None:
    # Window 1000, output 400: 600 input tokens; the estimate is ceil(bytes / 4).
    small = await scripted_model(
        api, [{"text": "Done."}], context_window_tokens=1000, max_output_tokens=400
    )
    sid = await new_session(api, model_id=small, agent={"system_prompt": "Be brief."})
    fits = "b" * (600 * 4 - TEXT_OVERHEAD)

    for message in (user(fits + "b"), assistant(fits + "b")):
        assert_too_large(await append(api, sid, message), "tokens", 601, 600)
    start = {"client_request_id": "big", "input": [{"type": "text", "text": fits + "b"}]}
    turn = await api.post(f"/v1/sessions/{sid}/turns", json=start)
    assert_too_large(turn, "tokens", 601, 600)
    assert await history(api, sid) == []
    assert (await api.get(f"/v1/sessions/{sid}/turns")).json()["turns"] == []
    assert (await append(api, sid, user(fits))).status_code == 201


async def test_a_tool_result_over_the_byte_limit_is_refused_and_nothing_recorded(
    database_url: str,
) -> None:
    async for api in client_for(make_settings(database_url, max_body_bytes=10_000_000)):
        await a_tool_result_over_the_byte_limit(api)


async def a_tool_result_over_the_byte_limit(api: httpx.AsyncClient) -> None:
    model_id = await scripted_model(
        api, [{"tool_calls": [call("read", path="a")]}, {"text": "Read it."}]
    )
    sid = await new_session(api, model_id=model_id, agent=agent())
    turn = await run_turn(api, sid)
    (pending,) = turn["pending_tool_calls"]
    call_id = pending["tool_call_id"]

    huge = await post_results(
        api, sid, turn["turn_id"], ok(call_id, "c" * MAX_MESSAGE_BYTES), wait=False
    )

    assert huge.status_code == 422, huge.text
    assert (huge.json()["code"], huge.json()["index"]) == ("message_too_large", 0)
    again = (await api.get(f"/v1/sessions/{sid}/turns/{turn['turn_id']}")).json()
    assert again["phase"] == "waiting_tool_results"
    assert again["pending_tool_calls"][0]["tool_call_id"] == call_id
    done = await post_results(api, sid, turn["turn_id"], ok(call_id, "small"), wait=True)
    assert done.json()["outcome"] == {"final_text": "Read it."}


async def provider_session(api: httpx.AsyncClient, server: FakeProviderServer) -> str:
    return await new_session(api, model_id=await provider_model(api, server), agent=agent())


def chunks(text: str, size: int = 65_536) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


async def test_a_provider_answer_past_its_output_limit_is_cut_and_marked(
    api: httpx.AsyncClient,
    provider: FakeProviderServer,  # noqa: F811
) -> None:
    runaway = "word " * 1_000_000  # 5 000 000 bytes from a model allowed 1 000 output tokens
    provider.enqueue(StreamReply(openai_stream(text=chunks(runaway))))
    sid = await provider_session(api, provider)

    turn = await run_turn(api, sid)

    assert turn["status"] == "completed", turn
    final = turn["outcome"]["final_text"]
    assert final.startswith("word word ")
    assert final.endswith(
        "[model answer cut: the provider sent 5000000 bytes, more than max_output_tokens 1000 "
        f"allows; {5_000_000 - final.index(chr(10) + '...')} bytes omitted]"
    )
    assert len(final.encode()) <= 16 * 1000  # 16 bytes per output token at most
    (stored,) = [m for m in await history(api, sid) if m["role"] == "assistant"]
    assert stored["content"] == [{"type": "text", "text": final}]


async def test_tool_arguments_over_the_limit_are_not_stored_and_the_model_is_told(
    api: httpx.AsyncClient,
    provider: FakeProviderServer,  # noqa: F811
) -> None:
    arguments = '{"path": "' + "p" * 3_000_069 + '"}'
    assert len(arguments) == 3_000_081
    calls = [FakeToolCall("c1", "read", chunks(arguments))]
    provider.enqueue(
        StreamReply(openai_stream(tool_calls=calls, finish_reason="tool_calls")),
        StreamReply(openai_stream(text=["I will read less."])),
    )
    sid = await provider_session(api, provider)

    turn = await run_turn(api, sid)

    assert turn["outcome"] == {"final_text": "I will read less."}, turn
    messages = await history(api, sid)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["content"] == [
        {"type": "tool_call", "id": "c1", "name": "read", "input": "{}"}
    ]
    result = messages[2]["content"][0]
    assert result["state"] == "error"
    assert result["output"][0]["text"] == (
        "invalid tool input: the arguments' JSON text is 3000081 characters, over the "
        f"{MAX_JSON_CHARS}-character limit; they were not stored and the tool did not run"
    )
    # The model's next request carries the stored call and its error result.
    second: dict[str, Any] = provider.requests[1].json()
    sent = [m for m in second["messages"] if m["role"] in ("assistant", "tool")]
    assert sent[0]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert "3000081 characters" in str(sent[1]["content"])
