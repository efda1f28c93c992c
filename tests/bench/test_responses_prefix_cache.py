"""The OpenAI prompt cache of the fakes (``ResponsesPrefixCache``), as OpenAI documents it: the
longest byte-identical prefix an earlier request with the same ``prompt_cache_key`` sent, read
from 1024 tokens on in increments of 128 tokens (⌈bytes ÷ 4⌉ per token here)."""

from __future__ import annotations

import json
from typing import Any

from tests.providers.fake_responses import ResponsesPrefixCache

TOOLS = [{"type": "function", "name": "read", "parameters": {"type": "object"}, "strict": False}]


def message(role: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": text}


def body(*items: dict[str, Any], key: str | None = "k") -> dict[str, Any]:
    return {"model": "m", "input": list(items), "tools": TOOLS, "prompt_cache_key": key}


def prompt_bytes(request: dict[str, Any]) -> int:
    units = [[request["tools"], None], *request["input"]]
    return sum(len(json.dumps(u, separators=(",", ":")).encode()) for u in units)


SYSTEM = message("system", "Rules. " * 1000)  # about 1 760 tokens


def test_a_repeated_prefix_is_read_in_steps_of_128_from_1024() -> None:
    cache = ResponsesPrefixCache()
    first = body(SYSTEM, message("user", "one"))
    total, cached = cache.observe(first)
    assert (total, cached) == (-(-prompt_bytes(first) // 4), 0)  # nothing was written before
    second = body(SYSTEM, message("user", "one"), message("assistant", "two"))
    total, cached = cache.observe(second)
    assert total == -(-prompt_bytes(second) // 4)
    shared = prompt_bytes(first) // 4  # the whole first prompt, then a byte or more further
    assert cached % 128 == 0
    assert shared - 128 < cached <= shared + 1


def test_a_short_prompt_is_never_cached() -> None:
    cache = ResponsesPrefixCache()
    short = body(message("system", "Rules. " * 100), message("user", "q"))
    assert cache.observe(short)[1] == 0
    assert cache.observe(short)[1] == 0  # the same 100-odd tokens again: under the minimum


def test_the_cache_is_per_prompt_cache_key() -> None:
    cache = ResponsesPrefixCache()
    cache.observe(body(SYSTEM, message("user", "q"), key="a"))
    assert cache.observe(body(SYSTEM, message("user", "q"), key="b"))[1] == 0
    assert cache.observe(body(SYSTEM, message("user", "q"), key="a"))[1] >= 1024


def test_the_prefix_ends_at_the_first_different_byte_even_inside_an_item() -> None:
    cache = ResponsesPrefixCache()
    long_user = message("user", "x" * 8000)  # 2 000 tokens
    cache.observe(body(SYSTEM, long_user))
    changed = message("user", "x" * 6000 + "y" * 2000)
    _, cached = cache.observe(body(SYSTEM, changed))
    # The system and the first 6 000 bytes of the user text are read: far past the item start.
    assert cached >= (prompt_bytes(body(SYSTEM)) + 6000) // 4 - 128


def test_a_reordered_key_breaks_the_prefix_there() -> None:
    cache = ResponsesPrefixCache()
    cache.observe(body(SYSTEM, message("user", "z" * 8000)))
    reordered = {"content": "z" * 8000, "role": "user", "type": "message"}
    _, cached = cache.observe(body(SYSTEM, reordered))
    assert cached <= prompt_bytes(body(SYSTEM)) // 4  # nothing of the reordered item is read
