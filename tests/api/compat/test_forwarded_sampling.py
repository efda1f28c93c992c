"""The caller's sampling fields reach the provider, in its protocol (spec §21.3): the real
``openai`` and ``anthropic`` SDKs through a real ``uvicorn`` of the app, the loopback fake
providers (Chat Completions, Anthropic Messages) recording the bodies they were sent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.api.compat.e2e import register
from tests.providers.fake_chat_cache import ScriptedChat
from tests.providers.fake_responses import responses_stream
from tests.providers.fakes import FakeProviderServer, StreamReply, anthropic_stream
from tests.servers import ServerProcess

pytestmark = pytest.mark.slow

CHAT_TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]
ANTHROPIC_TOOLS: list[Any] = [
    {
        "name": "read",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]
SAMPLED: dict[str, Any] = {
    "temperature": 0,
    "top_p": 0.5,
    "stop": ["END"],
    "tool_choice": "required",
    "parallel_tool_calls": False,
    "seed": 7,
}


@pytest.fixture(scope="module")
def claude() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as running:
        yield running


def openai_sdk(server: ServerProcess, request: pytest.FixtureRequest) -> openai.OpenAI:
    client = openai.OpenAI(
        base_url=f"{server.url}/v1/compat/openai", api_key="unused", max_retries=0, timeout=60
    )
    request.addfinalizer(client.close)
    return client


def anthropic_sdk(server: ServerProcess, request: pytest.FixtureRequest) -> anthropic.Anthropic:
    client = anthropic.Anthropic(
        base_url=f"{server.url}/v1/compat/anthropic", api_key="unused", max_retries=0, timeout=60
    )
    request.addfinalizer(client.close)
    return client


def session_ids(server: ServerProcess) -> list[str]:
    response = httpx.get(f"{server.url}/v1/sessions", params={"limit": 200}, timeout=30)
    assert response.status_code == 200, response.text
    return [s["id"] for s in response.json()["sessions"]]


def test_openai_fields_reach_a_chat_provider_last_and_do_not_split_the_session(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
) -> None:
    provider, script = fake
    model = register(server, provider)
    client = openai_sdk(server, request)
    history: list[Any] = [{"role": "user", "content": "What does a.py do?"}]
    script.answers.append("It prints hello.")
    raw = client.chat.completions.with_raw_response.create(
        model=model, messages=history, tools=CHAT_TOOLS, **SAMPLED
    )
    sid = raw.headers["x-ctxsvc-session-id"]
    sent = script.bodies[-1]
    assert {k: sent[k] for k in SAMPLED} == SAMPLED
    # After everything the service sends itself, in a fixed order: the cached prefix is as
    # it would be without them.
    assert list(sent)[-len(SAMPLED) :] == list(SAMPLED)

    history += [
        {"role": "assistant", "content": raw.parse().choices[0].message.content},
        {"role": "user", "content": "And b.py?"},
    ]
    script.answers.append("It prints bye.")
    again = client.chat.completions.with_raw_response.create(
        model=model, messages=history, tools=CHAT_TOOLS, temperature=1.5
    )
    # A changed temperature continues the same session.
    assert again.headers["x-ctxsvc-session-id"] == sid
    assert "x-ctxsvc-forked-from" not in again.headers
    second = script.bodies[-1]
    assert second["temperature"] == 1.5
    assert not {"top_p", "stop", "tool_choice", "seed"} & set(second)
    assert second["messages"][:2] == sent["messages"][:2]
    assert second["tools"] == sent["tools"]


def test_openai_fields_reach_an_anthropic_provider_translated(
    server: ServerProcess, claude: FakeProviderServer, request: pytest.FixtureRequest
) -> None:
    model = register(server, claude, "anthropic_messages")
    client = openai_sdk(server, request)
    before = len(claude.requests)
    claude.enqueue(StreamReply(anthropic_stream(text=["ok"])))
    answer = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "hi"}],
        tools=CHAT_TOOLS,
        **{
            **SAMPLED,
            "temperature": 1.7,
            "tool_choice": {"type": "function", "function": {"name": "read"}},
        },
    )
    assert answer.choices[0].message.content == "ok"
    sent = claude.requests[before].json()
    tail = dict(list(sent.items())[-4:])
    # 1.7 is past Anthropic's range: its hottest; ``seed`` has no equivalent there: dropped.
    assert tail == {
        "temperature": 1.0,
        "top_p": 0.5,
        "stop_sequences": ["END"],
        "tool_choice": {"type": "tool", "name": "read", "disable_parallel_tool_use": True},
    }
    assert not {"seed", "stop"} & set(sent)


def test_anthropic_fields_reach_a_chat_provider_translated(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
) -> None:
    provider, script = fake
    model = register(server, provider)
    client = anthropic_sdk(server, request)
    script.answers.append("Sure.")
    client.messages.create(
        model=model,
        max_tokens=300,
        messages=[{"role": "user", "content": "Read a.py"}],
        tools=ANTHROPIC_TOOLS,
        tool_choice={"type": "any"},
        stop_sequences=["STOP", "HALT"],
        metadata={"user_id": "u-1"},
        extra_body={"top_k": 5},  # no equivalent in Chat Completions: dropped
    )
    sent = script.bodies[-1]
    assert dict(list(sent.items())[-2:]) == {"stop": ["STOP", "HALT"], "tool_choice": "required"}
    assert not {"top_k", "metadata", "parallel_tool_calls", "temperature"} & set(sent)


def test_an_invalid_value_is_refused_in_the_protocols_shape_and_nothing_is_stored(
    server: ServerProcess,
    fake: tuple[FakeProviderServer, ScriptedChat],
    request: pytest.FixtureRequest,
) -> None:
    provider, script = fake
    model = register(server, provider)
    sent = len(script.bodies)
    before = session_ids(server)
    with pytest.raises(openai.BadRequestError) as refused:
        openai_sdk(server, request).chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "hi"}],
            temperature="hot",  # type: ignore[arg-type]
        )
    assert refused.value.code == "invalid_sampling"
    assert "temperature" in str(refused.value)
    with pytest.raises(anthropic.BadRequestError) as too_hot:
        anthropic_sdk(server, request).messages.create(
            model=model,
            max_tokens=100,
            messages=[{"role": "user", "content": "hi"}],
            # Anthropic's range ends at 1 (this SDK has no ``temperature`` argument).
            extra_body={"temperature": 1.5},
        )
    assert too_hot.value.body["error"]["code"] == "invalid_sampling"  # type: ignore[index]
    assert session_ids(server) == before
    assert len(script.bodies) == sent


def test_openai_fields_reach_a_responses_provider_in_its_shape(
    server: ServerProcess, claude: FakeProviderServer, request: pytest.FixtureRequest
) -> None:
    # ``claude`` is a loopback fake like any other: here it answers in the Responses protocol.
    model = register(server, claude, "openai_responses")
    client = openai_sdk(server, request)
    before = len(claude.requests)
    claude.enqueue(StreamReply(responses_stream(text=["ok"])))
    answer = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "hi"}],
        tools=CHAT_TOOLS,
        **{**SAMPLED, "tool_choice": {"type": "function", "function": {"name": "read"}}},
    )
    assert answer.choices[0].message.content == "ok"
    sent = claude.requests[before].json()
    tail = dict(list(sent.items())[-4:])
    # Responses names a function flat and has no ``stop`` or ``seed``: those two are dropped.
    assert tail == {
        "temperature": 0,
        "top_p": 0.5,
        "tool_choice": {"type": "function", "name": "read"},
        "parallel_tool_calls": False,
    }
    assert not {"seed", "stop", "stop_sequences"} & set(sent)
