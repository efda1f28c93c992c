"""A loopback fake provider with a prompt prefix cache, speaking Anthropic Messages and OpenAI
Responses.

It is ``tests.providers.fakes.FakeProviderServer`` (real HTTP on 127.0.0.1, chunked SSE) with a
responder: every ``POST /v1/messages`` goes through the cache Anthropic documents
(``bench.prefix_cache``: breakpoints, reads and writes), every ``POST /v1/responses`` through the
one OpenAI documents (``tests.providers.fake_responses.ResponsesPrefixCache``: automatic, keyed
by ``prompt_cache_key`` and the longest byte-identical prefix, from 1024 tokens in increments of
128, reported as ``usage.input_tokens_details.cached_tokens``). One server keeps one cache of
each. The reply is decided from the request by a scripted agent, so a session of any length
needs no queue of replies:

- the agent works on the latest task (the last user text that starts with ``TASK_MARK``): it
  calls a tool until that task has ``calls_per_task`` model calls, then answers with text; the
  call that reaches ``total_calls`` answers with text too, so the session ends there;
- the tool and its arguments follow from the call's number (deterministic), one call per reply;
- ``stream: true`` gets a stream, otherwise a whole message (or response object); both carry
  the usage the cache computed. A Responses call's ``CacheUsage`` has its cached tokens as
  ``cache_read_input_tokens``, nothing written, and no message ends (the items of a message are
  not the service's messages).

Each call is recorded (``calls``): its cache usage and whether it asked for a tool.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from bench.prefix_cache import CacheUsage, PrefixCache
from tests.providers.fake_responses import (
    FakeFunctionCall,
    ResponsesPrefixCache,
    responses_object,
    responses_output,
    responses_stream,
    responses_usage,
)
from tests.providers.fakes import (
    SSE,
    BodyReply,
    ErrorReply,
    FakeProviderServer,
    FakeToolUse,
    RecordedRequest,
    Reply,
    StreamReply,
    anthropic_error,
    anthropic_stream,
)

__all__ = ["TASK_MARK", "TOOLS", "CachingProviderServer", "ProviderCall", "tool_input"]

TASK_MARK = "[task "
TOOLS = ("read_file", "grep", "run_tests", "list_directory", "edit_file")
OUTPUT_TOKENS = 60


@dataclass(frozen=True, slots=True)
class ProviderCall:
    number: int  # 1-based, in arrival order
    usage: CacheUsage
    tool: str | None  # the tool the reply called, None for a text answer


def tool_input(number: int) -> tuple[str, dict[str, Any]]:
    """The tool call of model call ``number``: round robin over ``TOOLS``."""
    name = TOOLS[number % len(TOOLS)]
    module = f"src/pkg_{number % 17}/module_{number % 29}.py"
    choices: dict[str, dict[str, Any]] = {
        "read_file": {"path": module},
        "grep": {"pattern": f"def handler_{number % 13}", "path": "src"},
        "run_tests": {"selector": f"tests/test_module_{number % 29}.py", "verbose": True},
        "list_directory": {"path": f"src/pkg_{number % 17}"},
        "edit_file": {"path": module, "old": "return None", "new": f"return {number}"},
    }
    return name, choices[name]


def _states_a_task(content: Any) -> bool:
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    return any(
        b.get("type") in ("text", "input_text") and str(b.get("text", "")).startswith(TASK_MARK)
        for b in blocks or []
    )


def _responses_calls_in_task(body: dict[str, Any]) -> int:
    """Function calls after the last user message that states a task: every call of a task but
    its last asks for a tool, and a call asks for one tool."""
    count = 0
    for item in reversed(body.get("input") or []):
        if item.get("type") == "function_call":
            count += 1
        elif item.get("role") == "user" and _states_a_task(item.get("content")):
            return count
    return count


def _calls_in_task(body: dict[str, Any]) -> int:
    """Assistant messages after the last user message that states a task."""
    count = 0
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "assistant":
            count += 1
        elif _states_a_task(message.get("content")):
            return count
    return count


class CachingProviderServer:
    """The fake provider; use it in a ``with`` block (it serves from a background thread)."""

    def __init__(
        self,
        *,
        calls_per_task: int,
        total_calls: int,
        min_cacheable_tokens: int = 1024,
    ) -> None:
        self.calls_per_task = calls_per_task
        self.total_calls = total_calls
        self.cache = PrefixCache(min_cacheable_tokens=min_cacheable_tokens)
        self.responses_cache = ResponsesPrefixCache()
        self._calls: list[ProviderCall] = []
        self._lock = threading.Lock()
        self._server = FakeProviderServer(responder=self._respond)

    @property
    def base_url(self) -> str:
        return self._server.base_url

    @property
    def calls(self) -> list[ProviderCall]:
        with self._lock:
            return list(self._calls)

    def __enter__(self) -> CachingProviderServer:
        self._server.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.stop()

    def _respond(self, request: RecordedRequest) -> Reply:
        if request.method == "POST" and request.path.endswith("/v1/responses"):
            return self._respond_responses(request)
        if request.method != "POST" or not request.path.endswith("/v1/messages"):
            return ErrorReply(404, {"type": "error", "error": {"type": "not_found_error"}})
        try:
            body = request.json()
        except ValueError:
            return anthropic_error(400, "invalid_request_error", "the body is not JSON")
        with self._lock:
            number = len(self._calls) + 1
            usage = self.cache.observe(body)
            answer = number >= self.total_calls or _calls_in_task(body) + 1 >= self.calls_per_task
            tool = None if answer else tool_input(number)
            self._calls.append(ProviderCall(number, usage, tool[0] if tool else None))
        if body.get("stream"):
            return StreamReply(_stream(number, usage, tool))
        return BodyReply(_message(number, usage, tool))

    def _respond_responses(self, request: RecordedRequest) -> Reply:
        try:
            body = request.json()
        except ValueError:
            return ErrorReply(400, {"error": {"type": "invalid_request_error"}})
        with self._lock:
            number = len(self._calls) + 1
            total, cached = self.responses_cache.observe(body)
            usage = CacheUsage(total - cached, cached, 0, 0, 0, ())
            done = _responses_calls_in_task(body) + 1 >= self.calls_per_task
            tool = None if number >= self.total_calls or done else tool_input(number)
            self._calls.append(ProviderCall(number, usage, tool[0] if tool else None))
        text = [_text(number)] if tool is None else [f"Next I use {tool[0]}."]
        calls = (
            []
            if tool is None
            else [FakeFunctionCall(f"call_{number:05d}", tool[0], [json.dumps(tool[1])])]
        )
        figures = responses_usage(total, OUTPUT_TOKENS, cached=cached)
        if body.get("stream"):
            return StreamReply(responses_stream(text=text, function_calls=calls, usage=figures))
        output = responses_output(text=text, function_calls=calls)
        return BodyReply(responses_object(output, usage=figures))


def _usage(usage: CacheUsage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "output_tokens": OUTPUT_TOKENS,
    }


def _text(number: int) -> str:
    return f"Done with this task after call {number}: the change is in place and tests pass."


def _stream(number: int, usage: CacheUsage, tool: tuple[str, dict[str, Any]] | None) -> list[SSE]:
    text = [_text(number)] if tool is None else [f"Next I use {tool[0]}."]
    uses = (
        [] if tool is None else [FakeToolUse(f"toolu_{number:05d}", tool[0], [json.dumps(tool[1])])]
    )
    return anthropic_stream(
        text=text,
        tool_uses=uses,
        stop_reason="end_turn" if tool is None else "tool_use",
        input_tokens=usage.input_tokens,
        cache_read=usage.cache_read_input_tokens,
        cache_creation=usage.cache_creation_input_tokens,
        output_tokens=OUTPUT_TOKENS,
    )


def _message(
    number: int, usage: CacheUsage, tool: tuple[str, dict[str, Any]] | None
) -> dict[str, Any]:
    content: list[dict[str, Any]]
    if tool is None:
        content = [{"type": "text", "text": _text(number)}]
    else:
        content = [
            {"type": "text", "text": f"Next I use {tool[0]}."},
            {"type": "tool_use", "id": f"toolu_{number:05d}", "name": tool[0], "input": tool[1]},
        ]
    return {
        "id": f"msg_{number:05d}",
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": content,
        "stop_reason": "end_turn" if tool is None else "tool_use",
        "stop_sequence": None,
        "usage": _usage(usage),
    }
