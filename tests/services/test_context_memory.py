"""The process memory a kept session context is counted as (``conversation_cache.process_bytes``,
what ``CTXSVC_CONVERSATION_CACHE_BYTES`` bounds) against what ``tracemalloc`` sees it take: an
operator sizing a worker by the setting gets a bound that holds, within a factor."""

from __future__ import annotations

import gc
import json
import random
import tracemalloc
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx
import pytest

from app.core.counting import ESTIMATE
from app.providers.encoding import wire
from app.providers.encoding.openai_chat import encode_openai_chat
from app.services.conversation import ActiveConversation
from app.services.conversation_cache import ConversationCache, process_bytes
from app.services.tokens import CountedConversation
from app.storage.models import AgentSession
from tests.api.helpers import (
    append,
    assistant_calls,
    fake_provider_model,
    new_session,
    run_turn,
    tool_result,
    user,
)
from tests.conftest import client_for, make_settings
from tests.providers.fakes import FakeProviderServer, FakeToolCall, StreamReply, openai_stream

pytestmark = pytest.mark.anyio

# The estimate may be off by this factor either way, and no more.
FACTOR = 2.0


def _output(rng: random.Random, index: int, lines: int = 30) -> str:
    # Distinct text per result (as real outputs are), a few KB like a file read.
    text = [f"{index}:{n}: " + "".join(rng.choices("abcdefgh ", k=60)) for n in range(lines)]
    return "\n".join(text)


async def _fill(api: httpx.AsyncClient, sid: str, rounds: int, lines: int = 30) -> None:
    rng = random.Random(3)
    for n in range(rounds):
        call = f"call_{n}"
        messages = [
            user(f"step {n}: look at module {n}"),
            assistant_calls((call, "read")),
            tool_result(call, _output(rng, n, lines)),
        ]
        assert (await append(api, sid, *messages)).status_code == 201


def _traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


# Results of a few KB (JSON dominates), and of one short line (the per-message part does).
@pytest.mark.parametrize("lines", [30, 1])
async def test_a_kept_context_takes_what_it_is_counted_as_within_a_factor(
    database_url: str, lines: int
) -> None:
    async for api in client_for(make_settings(database_url)):
        container: Any = api._transport.app.state.container  # type: ignore[attr-defined]
        cache: ConversationCache = container.conversations
        sid = await new_session(api)
        await _fill(api, sid, 100, lines)
        tracemalloc.start()
        try:
            before = _traced()
            response = await api.get(f"/v1/sessions/{sid}/context")
            assert response.status_code == 200, response.text
            del response
            counted = cache.held_bytes
            with_context = _traced()
            cache.discard(sid)
            without = _traced()
        finally:
            tracemalloc.stop()
        taken = with_context - without
        assert counted > 0
        assert with_context > before
        assert counted / FACTOR <= taken <= counted * FACTOR, (taken, counted)


def test_the_memo_a_context_keeps_takes_about_the_json_it_counts() -> None:
    rng = random.Random(5)
    messages = [
        {"role": "user", "content": [{"type": "text", "text": _output(rng, n)}]} for n in range(300)
    ]
    memo = wire.OwnedMemo()
    tracemalloc.start()
    try:
        before = _traced()
        wire.owned_by(memo)
        try:
            body = wire.openai_chat_body({"messages": messages}, model="m", stream=True)
        finally:
            wire.owned_by(None)
        del body
        taken = _traced() - before
    finally:
        tracemalloc.stop()
    assert memo.held_bytes > 300 * 1000
    # Each message's JSON in a bytes object of its own size, and an entry for it; orjson's
    # buffers (8 KiB each, whatever the JSON's length) would take several times the count.
    assert memo.held_bytes <= taken <= memo.held_bytes * 1.3, (taken, memo.held_bytes)


def _session() -> AgentSession:
    return AgentSession(id="s1", created_at=datetime(2026, 12, 5, tzinfo=UTC))


def _messages(texts: list[str]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": t}]} for t in texts]


def test_a_contexts_encoded_json_is_counted_with_it_and_the_shared_memo_stays_empty() -> None:
    wire.forget()
    cache = ConversationCache(max_bytes=10**6)
    context = cache.context_for(_session(), ESTIMATE)
    request = {"messages": _messages(["one", "two"])}
    wire.owned_by(context.encoded)  # as ``SessionContext.prepare`` does for a kept context
    try:
        body = wire.openai_chat_body(request, model="m", stream=True)
    finally:
        wire.owned_by(None)
    assert body == wire.dumps(encode_openai_chat(request, model="m", stream=True))
    one = len(wire.dumps({"role": "user", "content": "one"}))
    assert context.encoded.held_bytes == 2 * one
    assert wire._openai_memo._bytes == 0
    read = CountedConversation(ActiveConversation([], None, []))
    context.remember(read)
    assert cache.held_bytes == process_bytes(0, 0, 2 * one)
    cache.discard("s1")  # evicted: its encoded JSON goes with it
    assert cache.held_bytes == 0


def test_a_memo_drops_what_its_requests_no_longer_hold() -> None:
    memo = wire.OwnedMemo()
    long = {"messages": _messages([f"m{n:03d}" for n in range(200)])}
    short = {"messages": long["messages"][-10:]}  # as after a compaction
    wire.owned_by(memo)
    try:
        wire.openai_chat_body(long, model="m", stream=True)
        assert memo.held_bytes == 200 * len(wire.dumps({"role": "user", "content": "m000"}))
        body = wire.openai_chat_body(short, model="m", stream=True)
    finally:
        wire.owned_by(None)
    assert body == wire.dumps(encode_openai_chat(short, model="m", stream=True))
    assert memo.held_bytes == 10 * len(wire.dumps({"role": "user", "content": "m000"}))


async def test_a_turns_calls_encode_with_the_sessions_context_not_the_shared_memo(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXSVC_TEST_FAKE_KEY", "sk-test")
    wire.forget()
    with FakeProviderServer() as provider:
        async for api in client_for(make_settings(database_url)):
            container: Any = api._transport.app.state.container  # type: ignore[attr-defined]
            cache: ConversationCache = container.conversations
            model = await fake_provider_model(api, provider.base_url, "openai_chat")
            sid = await new_session(api, model_id=model)
            await _fill(api, sid, 20)
            arguments = json.dumps({"plan": [{"step": "look", "status": "in_progress"}]})
            call = FakeToolCall("call-plan-1", "update_plan", [arguments])
            provider.enqueue(
                StreamReply(openai_stream(tool_calls=[call], finish_reason="tool_calls")),
                StreamReply(openai_stream(text=["done"])),
            )
            with anyio.fail_after(60):
                turn = await run_turn(api, sid)
            assert turn["status"] == "completed", turn
            assert turn["model_calls"] == 2
            entry = cache._entries.get(sid)
            assert entry is not None
            context = entry.context
            # Both calls' messages (60 stored, 20 of them results of ~2 KB, and the turn's
            # own) are in the context's memo, counted in what the cache holds; the
            # process-wide memo took none of them.
            assert context.encoded.held_bytes > 20 * 2000
            assert cache.held_bytes >= context.encoded.held_bytes
            assert wire._openai_memo._bytes == 0
