"""The benchmark's fake prompt cache behaves as Anthropic documents prompt caching: reads of the
longest written prefix that ends at a breakpoint, the 20-block lookback, writes only from the
minimum cacheable length, and usage split into read / written / the rest."""

from __future__ import annotations

import json
from typing import Any

import httpx

from bench.caching_provider import CachingProviderServer
from bench.prefix_cache import PrefixCache, block_tokens, prompt_blocks

MARK = {"type": "ephemeral"}
SYSTEM = "You are a careful engineer. " * 200  # ≈ 1 400 tokens: over the 1024 minimum


def text(t: str, *, marked: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": t}
    if marked:
        block["cache_control"] = MARK
    return block


def body(turns: int, *, marks: tuple[int, ...] = (), system_mark: bool = True) -> dict[str, Any]:
    """A system prompt and ``turns`` alternating messages of one text block each; ``marks``
    are the indexes of the messages whose block carries ``cache_control``."""
    messages = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": [text(f"message {i} " + "x" * 400, marked=i in marks)],
        }
        for i in range(turns)
    ]
    return {
        "tools": [{"name": "read", "description": "Read a file", "input_schema": {}}],
        "system": [text(SYSTEM, marked=system_mark)],
        "messages": messages,
    }


def through(request: dict[str, Any], blocks: int) -> int:
    """Tokens of the request's first ``blocks`` blocks."""
    return sum(b.tokens for b in prompt_blocks(request)[:blocks])


def test_tokens_are_the_bytes_of_the_block_without_cache_control_over_four() -> None:
    marked, plain = prompt_blocks(body(1, marks=(0,))), prompt_blocks(body(1))
    assert [b.identity for b in marked] == [b.identity for b in plain]
    assert [b.marked for b in marked] == [False, True, True]
    for block in plain:
        assert block.tokens == -(-len(block.identity) // 4) == block_tokens(block.identity)


def test_the_first_request_writes_through_its_last_breakpoint_and_reads_nothing() -> None:
    request = body(4, marks=(3,))
    usage = PrefixCache().observe(request)
    assert usage.cache_read_input_tokens == 0
    assert usage.cache_creation_input_tokens == through(request, 6)  # tools, system, 4 messages
    assert usage.input_tokens == 0
    assert usage.total_tokens == sum(b.tokens for b in prompt_blocks(request))


def test_a_longer_request_reads_the_prefix_written_at_the_previous_breakpoint() -> None:
    cache = PrefixCache()
    cache.observe(body(4, marks=(3,)))
    request = body(8, marks=(3, 7))
    usage = cache.observe(request)
    assert usage.cache_read_input_tokens == through(request, 6)
    assert usage.cache_creation_input_tokens == through(request, 10) - through(request, 6)
    assert usage.input_tokens == 0
    assert usage.read_blocks == 6


def test_tokens_after_the_last_breakpoint_are_plain_input() -> None:
    cache = PrefixCache()
    cache.observe(body(4, marks=(3,)))
    request = body(6, marks=(3,))
    usage = cache.observe(request)
    assert usage.cache_read_input_tokens == through(request, 6)
    assert usage.cache_creation_input_tokens == 0
    assert usage.input_tokens == through(request, 8) - through(request, 6)


def test_the_lookback_finds_a_written_boundary_up_to_20_blocks_before_a_breakpoint() -> None:
    cache = PrefixCache()
    cache.observe(body(4, marks=(3,)))  # written after block 6 (tools, system, 4 messages)
    near = body(24, marks=(23,))  # breakpoint on block 26: 20 blocks after the written one
    assert cache.observe(near).cache_read_input_tokens == through(near, 6)

    cache = PrefixCache()
    cache.observe(body(4, marks=(3,)))
    far = body(25, marks=(24,))  # block 27: 21 blocks after it, out of reach
    usage = cache.observe(far)
    # Only the system breakpoint (written by the first request) is read.
    assert usage.cache_read_input_tokens == through(far, 2)
    assert usage.cache_creation_input_tokens == through(far, 27) - through(far, 2)


def test_a_changed_earlier_block_reads_only_up_to_a_written_boundary_before_it() -> None:
    cache = PrefixCache()
    cache.observe(body(8, marks=(7,)))
    edited = body(10, marks=(9,))
    edited["messages"][1]["content"][0]["text"] = "pruned"
    usage = cache.observe(edited)
    assert usage.cache_read_input_tokens == through(edited, 2)  # tools and system


def test_merging_two_messages_into_one_is_a_change() -> None:
    cache = PrefixCache()
    cache.observe(body(4, marks=(3,)))
    merged = body(4)
    first, second = merged["messages"][2], merged["messages"][3]
    second["role"] = "user"
    first["content"] = first["content"] + [text(second["content"][0]["text"], marked=True)]
    del merged["messages"][3]
    assert cache.observe(merged).cache_read_input_tokens == through(merged, 2)


def test_a_prefix_under_the_minimum_length_is_never_written() -> None:
    cache = PrefixCache(min_cacheable_tokens=10_000)
    request = body(4, marks=(3,))
    first = cache.observe(request)
    assert first.cache_creation_input_tokens == 0
    assert first.input_tokens == first.total_tokens
    assert cache.observe(request).cache_read_input_tokens == 0
    assert cache.written == 0


def test_without_breakpoints_nothing_is_read_or_written() -> None:
    cache = PrefixCache()
    request = body(4, system_mark=False)
    for _ in range(2):
        usage = cache.observe(request)
        assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (0, 0)


def test_the_fake_provider_reports_the_cache_usage_on_the_wire_streamed_or_not() -> None:
    with CachingProviderServer(calls_per_task=2, total_calls=10) as fake:
        request = {
            "model": "claude-fake",
            "max_tokens": 100,
            **body(1, marks=(0,)),
        }
        request["messages"][0]["content"][0]["text"] = "[task 1] go"
        url = fake.base_url + "/v1/messages"
        whole = httpx.post(url, json=request, timeout=10).json()
        assert whole["stop_reason"] == "tool_use"  # the task's first call uses a tool
        assert whole["usage"]["cache_creation_input_tokens"] == through(request, 3)
        assert whole["usage"]["cache_read_input_tokens"] == 0

        request["stream"] = True
        answer = {"role": "assistant", "content": whole["content"]}
        result = {"role": "user", "content": [text("the file", marked=True)]}
        request["messages"] += [answer, result]
        streamed = httpx.post(url, json=request, timeout=10).text
        events = [json.loads(line[6:]) for line in streamed.splitlines() if line[:6] == "data: "]
        usage = events[0]["message"]["usage"]
        assert usage["cache_read_input_tokens"] == through(request, 3)
        assert events[-2]["delta"]["stop_reason"] == "end_turn"  # the task's second: text
        assert [c.tool for c in fake.calls] == ["grep", None]
