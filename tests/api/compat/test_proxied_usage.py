"""A proxied call counts as a turn's model call does (spec §21.2): what its provider reported is
added to the session's ``usage`` and becomes a calibration sample of the model. Each protocol's
real SDK, streamed and not, through a real ``uvicorn`` of the app; behind it a loopback OpenAI
Responses provider reporting every figure (cache reads and writes, reasoning)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.api.compat.e2e import register, session
from tests.providers.fake_responses import responses_stream, responses_usage
from tests.providers.fakes import FakeProviderServer, StreamReply
from tests.servers import ServerProcess

pytestmark = pytest.mark.slow

# What the provider reports for each of the two calls (``input_tokens``: the whole prompt).
REPORTED = [
    {"input": 1500, "output": 30, "cached": 0, "cache_write": 1200, "reasoning": 12},
    {"input": 1700, "output": 44, "cached": 1024, "cache_write": 128, "reasoning": 0},
]


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as running:
        yield running


def openai_chat(server: ServerProcess, model: str, history: list[Any], stream: bool) -> str:
    with openai.OpenAI(
        base_url=f"{server.url}/v1/compat/openai", api_key="unused", max_retries=0
    ) as client:
        if stream:
            with client.chat.completions.with_streaming_response.create(
                model=model,
                messages=history,
                stream=True,
                stream_options={"include_usage": True},
            ) as raw:
                text = "".join(
                    chunk.choices[0].delta.content or "" for chunk in raw.parse() if chunk.choices
                )
                sid = raw.headers["x-ctxsvc-session-id"]
        else:
            whole = client.chat.completions.with_raw_response.create(model=model, messages=history)
            text = whole.parse().choices[0].message.content or ""
            sid = whole.headers["x-ctxsvc-session-id"]
    history.append({"role": "assistant", "content": text})
    return str(sid)


def openai_responses(server: ServerProcess, model: str, history: list[Any], stream: bool) -> str:
    with openai.OpenAI(
        base_url=f"{server.url}/v1/compat/openai", api_key="unused", max_retries=0
    ) as client:
        if stream:
            streamed = client.responses.with_raw_response.create(
                model=model, input=history, store=False, stream=True
            )
            done = [e for e in streamed.parse() if e.type == "response.completed"]
            output = done[0].response.output
            sid = streamed.headers["x-ctxsvc-session-id"]
        else:
            raw = client.responses.with_raw_response.create(model=model, input=history, store=False)
            output = raw.parse().output
            sid = raw.headers["x-ctxsvc-session-id"]
    history.extend(item.model_dump(exclude_none=True) for item in output)
    return str(sid)


def anthropic_messages(server: ServerProcess, model: str, history: list[Any], stream: bool) -> str:
    with anthropic.Anthropic(
        base_url=f"{server.url}/v1/compat/anthropic", api_key="unused", max_retries=0
    ) as client:
        answer: Any
        if stream:
            with client.messages.stream(model=model, max_tokens=500, messages=history) as events:
                sid = events.response.headers["x-ctxsvc-session-id"]
                answer = events.get_final_message()
        else:
            raw = client.messages.with_raw_response.create(
                model=model, max_tokens=500, messages=history
            )
            answer = raw.parse()
            sid = raw.headers["x-ctxsvc-session-id"]
    history.append({"role": "assistant", "content": answer.content})
    return str(sid)


Call = Callable[[ServerProcess, str, list[Any], bool], str]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("call", [openai_chat, openai_responses, anthropic_messages])
def test_two_proxied_calls_add_what_the_provider_reported_to_the_session(
    server: ServerProcess, provider: FakeProviderServer, call: Call, stream: bool
) -> None:
    model = register(server, provider, "openai_responses")
    provider.enqueue(
        *(
            StreamReply(
                responses_stream(
                    text=[f"Answer {i}."],
                    usage=responses_usage(
                        r["input"],
                        r["output"],
                        cached=r["cached"],
                        cache_write=r["cache_write"],
                        reasoning=r["reasoning"],
                    ),
                )
            )
            for i, r in enumerate(REPORTED)
        )
    )
    history: list[Any] = [{"role": "user", "content": f"What does a.py do? {uuid.uuid4().hex}"}]
    first = call(server, model, history, stream)
    history.append({"role": "user", "content": "And b.py?"})
    assert call(server, model, history, stream) == first

    # Read at once: the answers are recorded after the responses, and the read waits for them.
    shown = session(server, first)
    assert shown["usage"]["proxied_calls"] == 2, server.log()
    assert shown["usage"] == {
        "turns": 0,
        "proxied_calls": 2,
        "input_tokens": sum(r["input"] for r in REPORTED),
        "output_tokens": sum(r["output"] for r in REPORTED),
        "cached_tokens": sum(r["cached"] for r in REPORTED),
        "cache_creation_tokens": sum(r["cache_write"] for r in REPORTED),
        "reasoning_tokens": sum(r["reasoning"] for r in REPORTED),
    }
    assert shown["message_count"] == 4

    # Each call is a sample of the model's calibration: the reported whole input against the
    # estimate of the request sent.
    described = httpx.get(f"{server.url}/v1/models/{model}", timeout=30).json()
    samples = described["calibration"]["samples"]
    assert sorted(s["reported_input_tokens"] for s in samples) == [r["input"] for r in REPORTED]
    assert all(s["estimated_input_tokens"] > 0 for s in samples)
