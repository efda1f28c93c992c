"""The OpenAI Agents SDK's ``Runner`` with ``CtxsvcSession`` against a real uvicorn of the app.

The agent's model is the SDK's ``OpenAIResponsesModel`` with an ``AsyncOpenAI`` client whose
``base_url`` is the loopback fake provider speaking Responses (with OpenAI's documented
automatic prefix cache). Each round asks for the weather: the model calls the agent's function
tool, the SDK runs it and the model answers with its output. The ctxsvc session's model has a
small window, so the service compacts while the conversation goes on.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from ctxsvc_client import AsyncClient, InvalidInputError
from ctxsvc_client.agents import CtxsvcSession
from tests.providers.fake_responses import (
    FakeFunctionCall,
    ResponsesPrefixCache,
    responses_object,
    responses_output,
    responses_stream,
    responses_usage,
)
from tests.providers.fakes import BodyReply, FakeProviderServer, RecordedRequest, Reply, StreamReply
from tests.servers import ServerProcess

pytestmark = pytest.mark.anyio

# Nothing leaves the machine: the SDK's traces would be sent to OpenAI.
set_tracing_disabled(True)

PADDING = "Context for this question: " + "the forecast service logs every reading. " * 60


class WeatherModel:
    """The fake's responder: a function call for a new question, the answer once the call's
    output is in the input."""

    def __init__(self) -> None:
        self.cache = ResponsesPrefixCache()
        self.usages: list[tuple[int, int]] = []
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        body = request.json()
        with self._lock:
            usage = self.cache.observe(body)
            self.usages.append(usage)
            number = len(self.usages)
        last = body["input"][-1]
        if last.get("type") == "function_call_output":
            parts: dict[str, Any] = {"text": [f"The answer: {last['output']}."]}
        else:
            city = _asked_city(body["input"])
            call = FakeFunctionCall(f"call_{number}", "get_weather", [json.dumps({"city": city})])
            parts = {"function_calls": [call]}
        figures = responses_usage(usage[0], 20, cached=usage[1])
        if body.get("stream"):
            return StreamReply(responses_stream(usage=figures, **parts))
        return BodyReply(responses_object(responses_output(**parts), usage=figures))


def _asked_city(items: list[dict[str, Any]]) -> str:
    for item in reversed(items):
        content = item.get("content")
        if item.get("role") == "user" and isinstance(content, str) and "weather in" in content:
            return content.split("weather in ", 1)[1].split("?", 1)[0]
    return "nowhere"


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.fixture
def weather() -> WeatherModel:
    return WeatherModel()


@pytest.fixture
def provider(weather: WeatherModel) -> Iterator[FakeProviderServer]:
    with FakeProviderServer(responder=weather) as server:
        yield server


@pytest.fixture
async def agent(provider: FakeProviderServer) -> AsyncIterator[Agent[Any]]:
    client = AsyncOpenAI(base_url=provider.base_url + "/v1", api_key="sk-fake", max_retries=0)
    try:
        yield Agent(
            name="weather",
            instructions="Answer weather questions with the tool.",
            tools=[get_weather],
            model=OpenAIResponsesModel(model="gpt-fake", openai_client=client),
            model_settings=ModelSettings(store=False),
        )
    finally:
        await client.close()


async def session_on(client: AsyncClient, provider: FakeProviderServer) -> CtxsvcSession:
    model_id = f"responses-{uuid.uuid4().hex[:8]}"
    await client.put_model(
        model_id,
        # A small window: the service compacts after a few rounds.
        context_window_tokens=6_000,
        max_output_tokens=500,
        provider={
            "kind": "openai_responses",
            "base_url": provider.base_url + "/v1",
            "model_name": "gpt-fake",
        },
    )
    return await CtxsvcSession.create(client, model_id=model_id, summary_model_id="local")


async def test_a_runner_with_a_ctxsvc_session_over_several_rounds(
    server: ServerProcess, provider: FakeProviderServer, weather: WeatherModel, agent: Agent[Any]
) -> None:
    cities = ["Oslo", "Lima", "Pune", "Kyiv", "Rome", "Cork", "Bern", "Baku"]
    async with AsyncClient(server.url) as client:
        session = await session_on(client, provider)
        for city in cities:
            result = await Runner.run(
                agent, f"{PADDING}What is the weather in {city}?", session=session
            )
            assert result.final_output == f"The answer: sunny in {city}."

        # The service compacted mid-conversation, by itself; the items now start with its
        # summary, and the latest round is still there whole.
        page = await client.list_compactions(session.session_id)
        assert [c.kind for c in page.compactions][-1:] == ["threshold"]
        items = await session.get_items()
        texts = [
            i["content"]
            for i in items
            if i.get("type") == "message" and isinstance(i.get("content"), str)
        ]
        assert any("continuation summary" in t for t in texts)
        assert [i["type"] for i in items[-3:]] == [
            "function_call",
            "function_call_output",
            "message",
        ]
        assert items[-1]["content"] == "The answer: sunny in Baku."

        # Everything stays stored: every question, call and answer.
        stored = (await client.list_messages(session.session_id, limit=500)).messages
        questions = [
            m for m in stored if m.role == "user" and "weather in" in json.dumps(m.content)
        ]
        assert len(questions) == len(cities)
        assert sum(m.role == "tool" for m in stored) == len(cities)

    # Within a round the second call repeats the first's input: the provider read it from its
    # cache, and the figures reached the SDK's usage.
    assert any(cached > 0 for _, cached in weather.usages)


async def test_pop_item_and_clear_session_hide_without_deleting(
    server: ServerProcess, provider: FakeProviderServer, agent: Agent[Any]
) -> None:
    async with AsyncClient(server.url) as client:
        session = await session_on(client, provider)
        await Runner.run(agent, "What is the weather in Oslo?", session=session)
        before = await session.get_items()

        answer = await session.pop_item()
        assert answer == before[-1]
        assert answer["content"] == "The answer: sunny in Oslo."
        output = await session.pop_item()
        assert output["type"] == "function_call_output"
        after = await session.get_items()
        # The call is answered until a result comes (the pairing rule): "interrupted".
        assert after[:-1] == before[:-2]
        assert after[-1]["call_id"] == before[-3]["call_id"]
        assert after[-1]["output"].startswith("[tool state: interrupted]")
        # A correction goes on from there.
        corrected = {
            "type": "function_call_output",
            "call_id": after[-1]["call_id"],
            "output": "rain",
        }
        await session.add_items([corrected])
        assert (await session.get_items())[-1] == corrected

        await session.clear_session()
        left = await session.get_items()
        assert [
            i
            for i in left
            if i.get("role") == "assistant" or i.get("type", "").startswith("function")
        ] == []
        assert not any("Oslo" in json.dumps(i) for i in left)
        # Nothing was deleted.
        stored = (await client.list_messages(session.session_id, limit=500)).messages
        assert any("sunny in Oslo" in json.dumps(m.content) for m in stored)
        # A general agent without a workspace has no World State: no sandbox policy about a
        # bash it never had; nothing is left.
        assert await session.pop_item() is None
        # Nor in the session's figure: it counts what the next request holds.
        shown = await client.get_session(session.session_id)
        assert shown.active_history_tokens == 0


async def test_items_it_cannot_hold_are_refused_and_nothing_is_stored(
    server: ServerProcess, provider: FakeProviderServer
) -> None:
    async with AsyncClient(server.url) as client:
        session = await session_on(client, provider)
        with pytest.raises(InvalidInputError) as refused:
            await session.add_items(
                [
                    {"role": "user", "content": "hi"},
                    {"type": "web_search_call", "id": "ws_1", "status": "completed"},
                ]
            )
        assert getattr(refused.value, "code", None) == "unsupported_item"
        assert "items.1" in str(refused.value)
        assert (await client.list_messages(session.session_id)).messages == []
