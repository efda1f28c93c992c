"""Provider HTTP benchmark: what each layer of a model call costs beyond the provider's own time.

One request of a 100-message conversation (a ~35 KB body) answered by a short stream (an
``update_plan`` tool call, as in ``bench/turns.py``), against the loopback fake provider in a
child process (``bench.provider_process``) with 50 ms latency. Each layer's figure is its time per
call minus the provider's serving time (measured by the fake, from a request's first line to its
reply's last byte), the median of rounds of 20 calls, the layers alternating round by round:

1. ``raw``: one asyncio stream writing the request and reading up to the chunked body's end (no
   HTTP client: the floor, the kernel's share included);
2. ``httpx``: an ``httpx.AsyncClient`` (what the adapters used until 2026-12-03) sending the
   same bytes and reading the body;
3. ``session``: the adapters' aiohttp session (``ProviderHTTP``) doing the same;
4. ``adapter``: ``OpenAIChatClient.complete`` (body from the message memo, headers, timeouts,
   SSE decoding, the response assembled);
5. ``observed``: the same through the model-call observer (traces and info lines off), as
   ``ModelClients.for_model`` hands it out;
6. ``call_model``: the same as a turn's step calls it (with its cancel watch).

Run: ``.venv/bin/python bench/provider_http.py [--rounds N]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too

import httpx
import uvloop

from app.observability import CallTarget, Observability
from app.providers.base import ProviderConfig
from app.providers.http_client import ProviderHTTP
from app.providers.openai_chat import OpenAIChatClient
from app.services.turns.model_call import call_model
from bench.provider_process import ProviderProcess
from tests.providers.fakes import FakeToolCall, RecordingSink, StreamReply, openai_stream

LATENCY = 0.05
BATCH = 20


def conversation(messages: int) -> dict[str, Any]:
    plan = {
        "name": "update_plan",
        "description": "Update the plan",
        "input_schema": {"type": "object", "properties": {"plan": {"type": "array"}}},
    }
    items = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": [{"type": "text", "text": f"message {i} " + "lorem ipsum " * 25}],
        }
        for i in range(messages)
    ]
    return {"messages": items, "tools": [plan], "max_output_tokens": 16_384}


def reply() -> StreamReply:
    arguments = json.dumps({"plan": [{"step": "step 1", "status": "in_progress"}]})
    call = FakeToolCall("plan-1", "update_plan", [arguments])
    return StreamReply(openai_stream(tool_calls=[call], finish_reason="tool_calls"))


async def layers(
    server: ProviderProcess, http: ProviderHTTP, other: httpx.AsyncClient
) -> tuple[dict[str, Callable[[], Any]], asyncio.StreamWriter]:
    """The calls of each layer, and the raw layer's connection (to close)."""
    config = ProviderConfig("openai_chat", server.base_url + "/v1", "gpt-fake", "KEY")
    adapter = OpenAIChatClient(http, config, env={"KEY": "sk-bench"})
    target = CallTarget("bench", "openai_chat", "gpt-fake", "turn")
    observed = Observability().model_client(adapter, target)
    request = conversation(100)
    body = adapter.body(request)
    url = server.base_url + "/v1/chat/completions"
    headers = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    head = (
        f"POST {parts.path} HTTP/1.1\r\nhost: {parts.netloc}\r\n"
        + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        + f"content-length: {len(body)}\r\n\r\n"
    ).encode()

    async def raw() -> None:
        writer.write(head + body)
        await reader.readuntil(b"\r\n\r\n")
        await reader.readuntil(b"0\r\n\r\n")

    async def with_httpx() -> None:
        async with other.stream("POST", url, content=body, headers=headers) as response:
            async for _ in response.aiter_bytes():
                pass

    async def session() -> None:
        async with http.session().post(url, data=body, headers=headers) as response:
            while await response.content.readany():
                pass

    sink: Any = RecordingSink()
    cancel = asyncio.Event()
    calls: dict[str, Callable[[], Any]] = {
        "raw": raw,
        "httpx": with_httpx,
        "session": session,
        "adapter": lambda: adapter.complete(request, sink=sink),
        "observed": lambda: observed.complete(request, sink=sink),
        "call_model": lambda: call_model(observed, request, sink, cancel),
    }
    return calls, writer


async def run(rounds: int) -> None:
    http = ProviderHTTP(allow_private_hosts=True)
    other = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=10.0))
    try:
        with ProviderProcess(latency=LATENCY) as server:
            calls, raw_connection = await layers(server, http, other)
            figures: dict[str, list[float]] = {name: [] for name in calls}
            try:
                for round_ in range(rounds + 1):  # the first round warms up
                    for name, call in calls.items():
                        server.enqueue(*(reply() for _ in range(BATCH)))
                        served = server.serving_seconds
                        elapsed = await timed(call, BATCH)
                        if round_:
                            beyond = elapsed - (server.serving_seconds - served)
                            figures[name].append(beyond / BATCH)
            finally:
                raw_connection.close()
    finally:
        await http.aclose()
        await other.aclose()
    print(f"beyond the provider's time, per call (median of {rounds} rounds of {BATCH} calls):")
    for name, values in figures.items():
        print(f"  {name:<10} {statistics.median(values) * 1000:.3f} ms")


async def timed(call: Callable[[], Awaitable[Any]], count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        await call()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    # The event loop the service runs on (``ctxsvc serve`` picks uvloop).
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    asyncio.run(run(args.rounds))


if __name__ == "__main__":
    main()
