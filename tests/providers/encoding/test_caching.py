"""Cache breakpoints on the wire (``app.core.caching.breakpoints`` placed by the encoders): where
the markers
land in each protocol, that every body stays valid by the official SDKs' types, and that the
memoized bodies stay byte-exact with a plan."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import app.providers.encoding.wire as wire
from app.core.caching.breakpoints import MIN_CACHEABLE_TOKENS, CachePlan, plan_for
from app.core.capabilities import ModelCapabilities
from app.core.content import Item, RealOrigin, text_block
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import SystemPart
from app.providers.encoding import (
    encode,
    encode_anthropic_messages,
    encode_openai_chat,
    encode_openai_responses,
)
from tests.providers.encoding.requests import (
    READ_TOOL,
    agent_loop,
    call,
    msg,
    prepared,
    result,
    text,
)
from tests.providers.encoding.sdk_types import (
    assert_anthropic_body,
    assert_openai_body,
    assert_responses_body,
)
from tests.providers.encoding.test_wire import requests

EPHEMERAL = {"type": "ephemeral"}
KEY = "ctxsvc-0123456789abcdef"


@pytest.fixture(autouse=True)
def empty_memo() -> Iterator[None]:
    wire.forget()
    yield
    wire.forget()


def cc_paths(body: dict[str, Any]) -> list[str]:
    """Where ``cache_control`` sits in an Anthropic body, as readable paths."""
    paths = []
    for i, tool in enumerate(body.get("tools", [])):
        if "cache_control" in tool:
            paths.append(f"tools[{i}]")
    for i, block in enumerate(body.get("system", [])):
        if "cache_control" in block:
            paths.append(f"system[{i}]")
    for i, message in enumerate(body["messages"]):
        for j, block in enumerate(message["content"]):
            if "cache_control" in block:
                paths.append(f"messages[{i}].content[{j}]")
    return paths


def test_anthropic_marks_the_last_tool_the_last_system_block_and_the_planned_messages() -> None:
    request = agent_loop()
    request["messages"].insert(1, msg("system", text("Project notes.")))
    request["tools"] = [READ_TOOL, {**READ_TOOL, "name": "write"}]
    # Index 4 is the first tool message: merged with the next one and the World State notice
    # into one user turn, so its block sits at the head of that turn.
    plan = CachePlan(True, True, (4, 6), KEY)
    body = encode_anthropic_messages(request, model="claude-x", stream=True, caching=plan)
    assert cc_paths(body) == [
        "tools[1]",
        "system[1]",
        "messages[2].content[0]",
        "messages[2].content[2]",
    ]
    assert body["tools"][1]["cache_control"] == EPHEMERAL
    assert body["messages"][2]["content"][0]["tool_use_id"] == "c1"
    assert body["messages"][2]["content"][2]["type"] == "text"
    assert "prompt_cache_key" not in body  # OpenAI's field only
    assert_anthropic_body(body)
    # Take the markers away and the body is today's.
    assert _without_markers(body) == encode_anthropic_messages(
        request, model="claude-x", stream=True
    )


def test_a_marked_assistant_turn_keeps_its_tool_use_block_valid() -> None:
    request = agent_loop()
    body = encode_anthropic_messages(request, caching=CachePlan(False, False, (2,), None))
    assert cc_paths(body) == ["messages[1].content[2]"]
    assert body["messages"][1]["content"][2]["type"] == "tool_use"
    assert_anthropic_body({"model": "m", **body})


def test_a_message_that_encodes_to_no_block_marks_nothing() -> None:
    request = prepared(msg("user", text("q")), msg("user", text("")))
    body = encode_anthropic_messages(request, caching=CachePlan(False, False, (1,), None))
    assert cc_paths(body) == []


def test_thinking_cannot_carry_the_marker() -> None:
    signed = {
        "type": "provider_opaque",
        "driver": "anthropic",
        "kind": "thinking",
        "payload": {"signature": "sig"},
    }
    request = prepared(
        msg("user", text("q")),
        msg("assistant", {"type": "thinking", "thinking": "hm"}, signed),
        msg("assistant", {"type": "thinking", "thinking": "hm"}, signed, text("answer")),
    )
    body = encode_anthropic_messages(request, caching=CachePlan(False, False, (1, 2), None))
    # Message 1 is thinking only: unmarked; message 2's last block is its text.
    assert cc_paths(body) == ["messages[1].content[2]"]
    assert_anthropic_body({"model": "m", **body})


def test_a_plan_without_breakpoints_is_todays_anthropic_body() -> None:
    request = agent_loop()
    bare = encode_anthropic_messages(request, model="m", stream=True)
    assert encode_anthropic_messages(request, model="m", stream=True, caching=None) == bare
    empty = CachePlan(False, False, (), KEY)
    assert encode_anthropic_messages(request, model="m", stream=True, caching=empty) == bare


def test_marking_nothing_that_is_absent() -> None:
    # No tools, no system: the plan's flags find nothing to mark and add nothing.
    request = prepared(msg("user", text("q")))
    body = encode_anthropic_messages(request, caching=CachePlan(True, True, (0,), None))
    assert "tools" not in body
    assert "system" not in body
    assert cc_paths(body) == ["messages[0].content[0]"]


def test_openai_sends_the_key_and_nothing_else() -> None:
    request = agent_loop()
    plan = CachePlan(True, True, (1, 5), KEY)
    body = encode_openai_chat(request, model="gpt-x", stream=True, caching=plan)
    bare = encode_openai_chat(request, model="gpt-x", stream=True)
    assert body["prompt_cache_key"] == KEY
    assert {k: v for k, v in body.items() if k != "prompt_cache_key"} == bare
    assert "cache_control" not in json.dumps(body)
    assert_openai_body(body)
    assert encode_openai_chat(request, caching=CachePlan(True, True, (), None)) == (
        encode_openai_chat(request)
    )


def test_responses_sends_the_key_and_nothing_else() -> None:
    request = agent_loop()
    plan = CachePlan(True, True, (1, 5), KEY)
    body = encode_openai_responses(request, model="gpt-x", stream=True, caching=plan)
    bare = encode_openai_responses(request, model="gpt-x", stream=True)
    assert body["prompt_cache_key"] == KEY
    assert {k: v for k, v in body.items() if k != "prompt_cache_key"} == bare
    assert "cache_control" not in json.dumps(body)
    assert_responses_body(body)
    # The key follows the output limit, as in the Chat Completions body.
    keys = list(body)
    assert keys.index("prompt_cache_key") == keys.index("max_output_tokens") + 1


def test_caching_off_is_todays_bytes_in_both_protocols() -> None:
    caps = ModelCapabilities(
        context_window_tokens=100_000, max_output_tokens=100, prompt_caching="off"
    )
    call_ = _prepared_call(caps)
    assert plan_for(call_, prompt_caching="off", seed="s", stable_messages=None) is None
    for protocol in ("openai_chat", "anthropic_messages", "openai_responses"):
        assert encode(call_.request, protocol, caching=None) == encode(call_.request, protocol)


def test_a_system_part_under_the_minimum_is_not_marked_and_the_conversation_is() -> None:
    caps = ModelCapabilities(context_window_tokens=100_000, max_output_tokens=100)
    call_ = _prepared_call(caps)
    assert call_.budget.tool_surface_tokens + call_.budget.system_context_tokens < (
        MIN_CACHEABLE_TOKENS
    )
    # The previous request ended at this one's last message: a single message breakpoint.
    plan = plan_for(call_, prompt_caching="auto", seed="s", stable_messages=4)
    assert plan is not None
    body = encode(call_.request, "anthropic_messages", model="m", caching=plan)
    assert cc_paths(body) == [f"messages[{len(body['messages']) - 1}].content[0]"]
    assert_anthropic_body(body)
    openai = encode(call_.request, "openai_chat", model="m", caching=plan)
    assert openai["prompt_cache_key"] == plan.cache_key
    assert_openai_body(openai)


def test_every_body_with_every_plan_is_valid_by_the_sdk_types() -> None:
    for request in requests():
        count = len(request["messages"])
        for plan in _plans(count):
            assert_anthropic_body(
                encode_anthropic_messages(request, model="m", stream=True, caching=plan)
            )
            assert_openai_body(encode_openai_chat(request, model="m", stream=True, caching=plan))
            assert_responses_body(
                encode_openai_responses(request, model="m", stream=True, caching=plan)
            )


@pytest.mark.parametrize(
    ("body", "encoder"),
    [
        (wire.openai_chat_body, encode_openai_chat),
        (wire.anthropic_messages_body, encode_anthropic_messages),
        (wire.openai_responses_body, encode_openai_responses),
    ],
)
def test_memoized_bodies_are_the_json_of_the_encoding_with_a_plan(body: Any, encoder: Any) -> None:
    for request in requests():
        for plan in [*_plans(len(request["messages"])), None, *_plans(len(request["messages"]))]:
            expected = encoder(request, model="m-1", stream=True, caching=plan)
            wanted = json.dumps(expected, ensure_ascii=False, separators=(",", ":")).encode()
            # Twice: the second time every unmarked message comes from the memo.
            assert body(request, model="m-1", stream=True, caching=plan) == wanted
            assert body(request, model="m-1", stream=True, caching=plan) == wanted


def test_the_memoized_responses_body_of_a_reasoning_model_is_its_encoding() -> None:
    for request in requests():
        for plan in [None, *_plans(len(request["messages"]))]:
            for reasoning in (True, False):
                expected = encode_openai_responses(
                    request, model="m-1", stream=True, caching=plan, reasoning=reasoning
                )
                wanted = json.dumps(expected, ensure_ascii=False, separators=(",", ":")).encode()
                sent = wire.openai_responses_body(
                    request, model="m-1", stream=True, caching=plan, reasoning=reasoning
                )
                assert sent == wanted
                assert (b'"include":' in sent) is reasoning


def test_a_growing_conversation_moves_the_breakpoint_and_stays_exact() -> None:
    request = prepared(msg("system", text("sys")), tools=[READ_TOOL])
    for step in range(6):
        request["messages"].append(msg("assistant", text(f"a{step}"), call(f"c{step}")))
        request["messages"].append(msg("tool", result(f"c{step}", f"out {step}")))
        last = len(request["messages"]) - 1
        plan = CachePlan(True, True, (last - 2, last) if step else (last,), KEY)
        got = wire.anthropic_messages_body(request, model="m", stream=True, caching=plan)
        encoded = encode_anthropic_messages(request, model="m", stream=True, caching=plan)
        assert json.loads(got) == encoded
        assert len(cc_paths(encoded)) == (4 if step else 3)


def _plans(count: int) -> list[CachePlan]:
    last = count - 1
    indexes = [i for i in (0, 1, last - 1, last) if 0 <= i < count]
    plans = [CachePlan(True, True, (i,), KEY) for i in indexes]
    plans.append(CachePlan(False, True, tuple(sorted(set(indexes))[-2:]), None))
    plans.append(CachePlan(True, False, (), KEY))
    return plans


def _prepared_call(caps: ModelCapabilities) -> Any:
    system = [SystemPart("agent", [text_block("You are terse.")])]
    items = [
        Item("user", "normal", [text_block("q" * 3000)], RealOrigin(None, None)),
        Item("assistant", "normal", [text_block("a" * 2000)], RealOrigin(None, None)),
        Item("user", "normal", [text_block("again")], RealOrigin(None, None)),
    ]
    return prepare(system, items, [READ_TOOL], caps)  # type: ignore[list-item]


def _without_markers(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_markers(v) for v in value]
    return value
