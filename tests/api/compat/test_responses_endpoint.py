"""The OpenAI Responses drop-in endpoint (spec §21) driven by the real ``openai`` SDK and by the
OpenAI Agents SDK's ``Runner``: a real ``uvicorn`` of the app in front of the loopback fake
provider (Chat Completions, with OpenAI's automatic prompt cache). The caller resends its whole
input each time (``store: false``); the service continues one session."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import openai
import pytest
from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

from ctxsvc_client import AsyncClient
from ctxsvc_client.agents import CtxsvcSession
from tests.api.compat.e2e import KEY_ENV, register, session, stored
from tests.providers.fake_chat_cache import ScriptedChat
from tests.providers.fake_responses import (
    FakeFunctionCall,
    FakeReasoning,
    responses_stream,
    responses_usage,
)
from tests.providers.fakes import FakeProviderServer, StreamReply
from tests.servers import ServerProcess

pytestmark = pytest.mark.slow

# Nothing leaves the machine: the Agents SDK's traces would be sent to OpenAI.
set_tracing_disabled(True)

INSTRUCTIONS = "You answer questions about the repository. " * 120
TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "read",
        "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        "strict": False,
    }
]
FILES = {"a.py": "print('hello')", "b.py": "print('bye')"}


def sdk(server: ServerProcess, request: pytest.FixtureRequest) -> openai.OpenAI:
    client = openai.OpenAI(
        base_url=f"{server.url}/v1/compat/openai", api_key="unused", max_retries=0, timeout=60
    )
    request.addfinalizer(client.close)
    return client


def test_a_conversation_continues_one_session_streamed_or_not(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
) -> None:
    provider, script = fake
    model = register(server, provider)
    client = sdk(server, request)
    history: list[Any] = [{"role": "user", "content": "What does a.py do?"}]
    script.answers.append("It prints hello.")
    ask = {"model": model, "instructions": INSTRUCTIONS, "store": False}
    raw = client.responses.with_raw_response.create(**ask, input=history)
    first = raw.parse()
    sid = raw.headers["x-ctxsvc-session-id"]
    assert first.output_text == "It prints hello."
    assert first.status == "completed"
    assert first.usage is not None
    assert first.usage.input_tokens_details.cached_tokens == 0

    history += [item.model_dump(exclude_none=True) for item in first.output]
    history.append({"role": "user", "content": "And b.py?"})
    script.answers.append("It prints bye.")
    with client.responses.stream(**ask, input=history) as stream:
        texts = [e.delta for e in stream if e.type == "response.output_text.delta"]
        second = stream.get_final_response()
    assert "".join(texts) == "It prints bye."
    assert second.output_text == "It prints bye."
    assert second.usage is not None
    # The instructions and the first exchange were sent as before: read from the cache.
    assert second.usage.input_tokens_details.cached_tokens >= 1024
    assert second.usage.input_tokens > second.usage.input_tokens_details.cached_tokens

    assert [(m["role"], m["content"][0].get("text")) for m in stored(server, sid)] == [
        ("user", "What does a.py do?"),
        ("assistant", "It prints hello."),
        ("user", "And b.py?"),
        ("assistant", "It prints bye."),
    ]
    assert session(server, sid)["origin"] == "proxy:openai_responses"
    # A third call continues the same session, whose answer came streamed.
    history += [item.model_dump(exclude_none=True) for item in second.output]
    history.append({"role": "user", "content": "Thanks."})
    script.answers.append("You're welcome.")
    raw = client.responses.with_raw_response.create(**ask, input=history)
    assert raw.headers["x-ctxsvc-session-id"] == sid
    assert "x-ctxsvc-forked-from" not in raw.headers


@pytest.mark.parametrize("streamed", [False, True])
def test_function_calls_over_rounds_stay_one_session(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
    streamed: bool,
) -> None:
    provider, script = fake
    model = register(server, provider)
    client = sdk(server, request)
    script.answers.extend(
        [
            [("call_1", "read", '{"path": "a.py"}')],
            [("call_2", "read", '{"path":"b.py"}')],
            "a.py prints hello, b.py prints bye.",
        ]
    )
    history: list[Any] = [{"role": "user", "content": "Summarize a.py and b.py"}]
    sessions = set()
    for _ in range(3):
        ask: dict[str, Any] = {"model": model, "input": history, "tools": TOOLS, "store": False}
        if streamed:
            with client.responses.with_streaming_response.create(**ask, stream=True) as raw:
                sessions.add(raw.headers["x-ctxsvc-session-id"])
                events = list(raw.parse())
            completed = events[-1]
            assert completed.type == "response.completed"
            response = completed.response
        else:
            raw = client.responses.with_raw_response.create(**ask)
            sessions.add(raw.headers["x-ctxsvc-session-id"])
            response = raw.parse()
        history += [item.model_dump(exclude_none=True) for item in response.output]
        for item in response.output:
            if item.type == "function_call":
                output = FILES[json.loads(item.arguments)["path"]]
                history.append(
                    {"type": "function_call_output", "call_id": item.call_id, "output": output}
                )
    assert response.output_text == "a.py prints hello, b.py prints bye."
    (sid,) = sessions
    rows = stored(server, sid)
    roles = ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [m["role"] for m in rows] == roles
    assert rows[1]["content"][0]["input"] == '{"path": "a.py"}'
    assert rows[4]["content"][0]["output"] == [{"type": "text", "text": "print('bye')"}]


def test_previous_response_id_is_refused_before_anything_is_stored(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
) -> None:
    provider, _ = fake
    model = register(server, provider)
    client = sdk(server, request)
    before = len(provider.requests)
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model=model, input="hi", previous_response_id="resp_earlier")
    assert refused.value.code == "previous_response_id_unsupported"
    assert len(provider.requests) == before


@pytest.mark.parametrize("streamed", [False, True])
def test_an_agents_sdk_runner_uses_the_endpoint_as_its_model(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    streamed: bool,
) -> None:
    provider, script = fake
    model = register(server, provider)
    script.answers.extend([[("call_w", "read_file", '{"path": "a.py"}')], "a.py prints hello."])

    @function_tool
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return FILES[path]

    async def run() -> Any:
        client = openai.AsyncOpenAI(
            base_url=f"{server.url}/v1/compat/openai", api_key="unused", max_retries=0
        )
        agent = Agent(
            name="reader",
            instructions="You read files to answer.",
            tools=[read_file],
            model=OpenAIResponsesModel(model=model, openai_client=client),
        )
        try:
            if not streamed:
                return await Runner.run(agent, "What does a.py do?")
            # The SDK reads the endpoint's Responses events itself, text deltas included.
            streaming = Runner.run_streamed(agent, "What does a.py do?")
            async for event in streaming.stream_events():
                if event.type == "raw_response_event" and event.data.type.endswith("text.delta"):
                    deltas.append(event.data.delta)
            return streaming
        finally:
            await client.close()

    deltas: list[str] = []
    before = len(script.bodies)
    result = anyio.run(run)
    assert result.final_output == "a.py prints hello."
    if streamed:
        assert "".join(deltas) == "a.py prints hello."
    calls = script.bodies[before:]
    assert len(calls) == 2
    # The second call's provider request holds the tool's output, after its call, once.
    sent = calls[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert sent[0]["content"] == "You read files to answer."
    assert sent[-1]["content"] == "print('hello')"
    # Both of the Runner's calls continued one session, which holds the whole run.
    (ours,) = [s for s in sessions_of(server) if s["model_id"] == model]
    rows = stored(server, ours["id"])
    assert [m["role"] for m in rows] == ["user", "assistant", "tool", "assistant"]


def sessions_of(server: ServerProcess) -> list[dict[str, Any]]:
    response = httpx.get(f"{server.url}/v1/sessions", params={"limit": 200}, timeout=30)
    assert response.status_code == 200, response.text
    return list(response.json()["sessions"])


def test_a_runner_with_a_ctxsvc_session_runs_its_model_through_the_endpoint(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
) -> None:
    """The typed client's ``CtxsvcSession`` keeps the agent's history; the endpoint is its
    model. Each run sends what the session prepared, and the endpoint continues one session of
    its own with it: the second run is no fork of the first."""
    provider, script = fake
    model = register(server, provider)
    script.answers.extend(
        [[("call_s", "read_file", '{"path": "b.py"}')], "b.py prints bye.", "Yes: bye."]
    )

    @function_tool
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return FILES[path]

    async def run() -> tuple[str, str, str]:
        openai_client = openai.AsyncOpenAI(
            base_url=f"{server.url}/v1/compat/openai", api_key="unused", max_retries=0
        )
        agent = Agent(
            name="reader",
            instructions="You read files to answer.",
            tools=[read_file],
            model=OpenAIResponsesModel(model=model, openai_client=openai_client),
        )
        async with AsyncClient(server.url) as client:
            kept = await CtxsvcSession.create(client, model_id=model)
            try:
                first = await Runner.run(agent, "What does b.py do?", session=kept)
                second = await Runner.run(agent, "Does it print bye?", session=kept)
            finally:
                await openai_client.close()
            return kept.session_id, str(first.final_output), str(second.final_output)

    kept_id, first, second = anyio.run(run)
    assert (first, second) == ("b.py prints bye.", "Yes: bye.")
    roles = ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert [m["role"] for m in stored(server, kept_id)] == roles
    proxied = [s for s in sessions_of(server) if s["model_id"] == model and s["id"] != kept_id]
    assert len(proxied) == 1
    assert proxied[0]["forked_from"] is None
    assert [m["role"] for m in stored(server, proxied[0]["id"])] == roles


def test_reasoning_items_reach_a_responses_provider_again_on_the_next_round(
    server: ServerProcess, request: pytest.FixtureRequest
) -> None:
    """Behind the endpoint a Responses model that reasons: the SDK gets its reasoning item, sends
    it back with the function call's output, and the provider's next input holds it verbatim
    (encrypted content included), before the call it led to."""
    with FakeProviderServer() as provider:
        body = {
            "context_window_tokens": 100_000,
            "max_output_tokens": 1000,
            "provider": {
                "kind": "openai_responses",
                "base_url": provider.base_url + "/v1",
                "model_name": "gpt-fake",
                "api_key_env": KEY_ENV,
            },
        }
        model = "fake-responses-reasoning"
        response = httpx.put(f"{server.url}/v1/models/{model}", json=body, timeout=30)
        assert response.status_code in (200, 201), response.text
        reasoning = FakeReasoning("rs_1", ["Read it first."], "gAAA-encrypted")
        provider.enqueue(
            StreamReply(
                responses_stream(
                    reasoning=[reasoning],
                    function_calls=[FakeFunctionCall("call_r", "read", ['{"path":"a.py"}'])],
                    usage=responses_usage(1500, 30, cached=1024, reasoning=12),
                )
            ),
            StreamReply(responses_stream(text=["It prints ", "hello."])),
        )
        client = sdk(server, request)
        ask: dict[str, Any] = {"model": model, "tools": TOOLS, "store": False}
        history: list[Any] = [{"role": "user", "content": "What does a.py do?"}]
        first = client.responses.create(**ask, input=history)
        assert [item.type for item in first.output] == ["reasoning", "function_call"]
        assert first.usage is not None
        assert first.usage.input_tokens_details.cached_tokens == 1024
        assert first.usage.output_tokens_details.reasoning_tokens == 12
        history += [item.model_dump(exclude_none=True) for item in first.output]
        history.append({"type": "function_call_output", "call_id": "call_r", "output": "hi"})
        with client.responses.stream(**ask, input=history) as stream:
            assert stream.get_final_response().output_text == "It prints hello."
        sent = provider.requests[-1].json()["input"]
        kinds = [item.get("type", "message") for item in sent]
        assert kinds[-3:] == ["reasoning", "function_call", "function_call_output"]
        assert sent[-3]["id"] == "rs_1"
        assert sent[-3]["encrypted_content"] == "gAAA-encrypted"
