"""A Chat Completions fake with OpenAI's automatic prompt cache, answering from a script.

``ChatPrefixCache`` reports what OpenAI documents for its automatic caching: a request reads the
longest prefix of its prompt that an earlier request with the same ``prompt_cache_key`` (or
none) sent, once that prefix is at least 1024 tokens, in steps of 128 tokens. Tokens: ⌈UTF-8
bytes of each unit's compact JSON ÷ 4⌉, the units being the tools, then each message (a
deterministic stand-in for the provider's tokenizer). ``ScriptedChat`` is a ``responder`` for
``FakeProviderServer``: the next scripted answer, streamed, with that usage.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from tests.providers.fake_framing import RecordedRequest
from tests.providers.fake_wire import FakeToolCall, Reply, StreamReply, openai_stream, openai_usage

__all__ = ["ChatPrefixCache", "ScriptedChat"]


class ChatPrefixCache:
    MIN_TOKENS = 1024
    STEP = 128

    def __init__(self) -> None:
        self._seen: dict[str | None, list[list[str]]] = {}

    def observe(self, body: Mapping[str, Any]) -> tuple[int, int]:
        """(prompt tokens, cached tokens) of ``body``; remembers it for later requests."""
        units = [json.dumps(body.get("tools"), sort_keys=True)]
        units += [json.dumps(m, sort_keys=True) for m in body.get("messages") or []]
        sizes = [max(1, -(-len(unit.encode()) // 4)) for unit in units]
        earlier = self._seen.setdefault(body.get("prompt_cache_key"), [])
        shared = 0
        for previous in earlier:
            same = 0
            while same < min(len(previous), len(units)) and previous[same] == units[same]:
                same += 1
            shared = max(shared, same)
        earlier.append(units)
        read = sum(sizes[:shared])
        cached = read - read % self.STEP if read >= self.MIN_TOKENS else 0
        return sum(sizes), cached


class ScriptedChat:
    """Answers in order: a text, tool calls ``[(id, name, arguments)]``, or a reply as it is."""

    def __init__(self) -> None:
        self.cache = ChatPrefixCache()
        self.answers: deque[str | Sequence[tuple[str, str, str]] | StreamReply] = deque()
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: RecordedRequest) -> Reply:
        body = json.loads(request.body)
        self.bodies.append(body)
        prompt, cached = self.cache.observe(body)
        usage = openai_usage(prompt, 7, cached=cached)
        answer = self.answers.popleft()
        if isinstance(answer, StreamReply):
            return answer
        if isinstance(answer, str):
            return StreamReply(openai_stream(text=[answer[:3], answer[3:]], usage=usage))
        calls = [FakeToolCall(i, n, [a]) for i, n, a in answer]
        return StreamReply(openai_stream(tool_calls=calls, finish_reason="tool_calls", usage=usage))
