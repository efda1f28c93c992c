"""Prompt caching through both adapters against the loopback fake: the body sent carries the
plan's markers (Anthropic ``cache_control``) or key (OpenAI ``prompt_cache_key``), and cache
reads and writes are parsed from streamed and whole answers, the input staying the whole
prompt."""

from __future__ import annotations

import json

import pytest

from app.core.caching.breakpoints import CachePlan
from app.providers.encoding import encode_anthropic_messages, encode_openai_chat
from app.providers.http_client import ProviderHTTP
from tests.providers import test_anthropic_messages as anthropic
from tests.providers import test_openai_chat as openai
from tests.providers.encoding.requests import agent_loop
from tests.providers.encoding.sdk_types import assert_anthropic_body, assert_openai_body
from tests.providers.fake_wire import SSE
from tests.providers.fakes import (
    BodyReply,
    FakeProviderServer,
    StreamReply,
    anthropic_message,
    anthropic_stream,
    openai_completion,
    openai_stream,
    openai_usage,
)

pytestmark = pytest.mark.anyio

PLAN = CachePlan(True, True, (2, 5), "ctxsvc-00112233445566ff")


async def test_anthropic_sends_the_planned_cache_control_markers(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(StreamReply(anthropic_stream(text=["ok"])))
    request = agent_loop()
    await anthropic.client(fake_server, http).complete(request, caching=PLAN)
    [sent] = fake_server.requests
    body = sent.json()
    assert body == encode_anthropic_messages(
        request, model="claude-test", stream=True, caching=PLAN
    )
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    marked = [b for m in body["messages"] for b in m["content"] if "cache_control" in b]
    assert [b["type"] for b in marked] == ["tool_use", "text"]
    assert "prompt_cache_key" not in body
    assert_anthropic_body(body)


async def test_anthropic_without_a_plan_sends_no_marker(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(StreamReply(anthropic_stream(text=["ok"])))
    await anthropic.client(fake_server, http).complete(agent_loop())
    [sent] = fake_server.requests
    assert b"cache_control" not in sent.body


async def test_openai_sends_the_session_key(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    fake_server.enqueue(StreamReply(openai_stream(text=["ok"], usage=openai_usage(10, 2))))
    request = agent_loop()
    await openai.client(fake_server, http).complete(request, caching=PLAN)
    [sent] = fake_server.requests
    body = sent.json()
    assert body["prompt_cache_key"] == PLAN.cache_key
    assert body == encode_openai_chat(request, model="gpt-test", stream=True, caching=PLAN)
    assert b"cache_control" not in sent.body
    assert_openai_body(body)


async def test_anthropic_streamed_cache_reads_and_writes_are_parsed(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    events = anthropic_stream(
        text=["ok"], input_tokens=7, cache_read=3000, cache_creation=500, output_tokens=9
    )
    fake_server.enqueue(StreamReply(events))
    usage = (await anthropic.client(fake_server, http).complete(agent_loop())).usage
    # The input is the whole prompt: uncached + read from cache + written to it.
    assert usage.input_tokens == 3507
    assert (usage.cached_tokens, usage.cache_creation_tokens) == (3000, 500)
    assert usage.output_tokens == 9


async def test_anthropic_cumulative_usage_in_message_delta_replaces_message_start(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    events = anthropic_stream(text=["ok"], input_tokens=7, cache_read=0, cache_creation=0)
    # The final message_delta restates the input figures, as the API's cumulative usage does.
    delta = json.loads(events[-2].data)
    assert delta["type"] == "message_delta"
    delta["usage"].update(
        input_tokens=7, cache_read_input_tokens=1200, cache_creation_input_tokens=40
    )
    events[-2] = SSE(json.dumps(delta), event="message_delta")
    fake_server.enqueue(StreamReply(events))
    usage = (await anthropic.client(fake_server, http).complete(agent_loop())).usage
    assert (usage.input_tokens, usage.cached_tokens, usage.cache_creation_tokens) == (
        1247,
        1200,
        40,
    )


async def test_anthropic_whole_answer_cache_usage_is_parsed(
    fake_server: FakeProviderServer, http: ProviderHTTP
) -> None:
    answer = anthropic_message(content=[{"type": "text", "text": "ok"}], input_tokens=12)
    answer["usage"].update(cache_read_input_tokens=2048, cache_creation_input_tokens=64)
    fake_server.enqueue(BodyReply(answer))
    usage = (await anthropic.client(fake_server, http).complete(agent_loop())).usage
    assert (usage.input_tokens, usage.cached_tokens, usage.cache_creation_tokens) == (
        2124,
        2048,
        64,
    )


@pytest.mark.parametrize("streamed", [True, False])
async def test_openai_cached_tokens_are_part_of_the_prompt(
    fake_server: FakeProviderServer, http: ProviderHTTP, streamed: bool
) -> None:
    usage_body = openai_usage(5000, 20, cached=4096)
    if streamed:
        fake_server.enqueue(StreamReply(openai_stream(text=["ok"], usage=usage_body)))
    else:
        fake_server.enqueue(BodyReply(openai_completion(text="ok", usage=usage_body)))
    usage = (await openai.client(fake_server, http).complete(agent_loop())).usage
    # OpenAI's prompt_tokens already counts the cached part; it reports no cache writes.
    assert (usage.input_tokens, usage.cached_tokens, usage.cache_creation_tokens) == (
        5000,
        4096,
        None,
    )
