"""The transport floor of a model call: what a bare aiohttp POST costs beyond the provider's time.

``bench/turns.py`` counts the provider adapter's work as the service's (encoding the request,
sending it, reading the stream: everything but the fake provider's own time, from a request's
first line to its reply's last byte). Part of that is no code of ours: two processes waking each
other over loopback and aiohttp's own request and response handling. This measures it with the
same fake provider, a body of the same conversation and the same replies, sent by a plain
``aiohttp.ClientSession`` that reads each stream to its end and parses nothing: the comparator
for the adapter's share, and a floor under any turn overhead on this machine.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

import aiohttp

from bench.compaction import batch
from bench.provider_process import ProviderProcess
from tests.providers.fakes import StreamReply

__all__ = ["transport_floor"]


def conversation_body(messages: int) -> bytes:
    """An OpenAI Chat body of the bench sessions' conversation (``bench.compaction.batch``)."""
    rows = batch(0, messages)
    body = {
        "model": "gpt-fake",
        "stream": True,
        "messages": [
            {"role": "system", "content": "You are a bench agent."},
            *({"role": role, "content": json.dumps(content)} for role, _, content in rows),
        ],
    }
    return json.dumps(body, separators=(",", ":")).encode()


async def transport_floor(
    server: ProviderProcess,
    messages: int,
    replies: Callable[[int], StreamReply],
    *,
    calls: int = 40,
) -> float:
    """Median seconds per call beyond the provider's time of ``calls`` bare POSTs (after 5
    warm-up calls; ``replies(i)`` is the ``i``-th call's reply, as in a turn)."""
    body = conversation_body(messages)
    url = server.base_url + "/v1/chat/completions"
    headers = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
    gaps: list[float] = []
    async with aiohttp.ClientSession() as session:
        for i in range(calls + 5):
            # Enqueued first: its round trip to the provider's process lets the previous
            # request's serving time be added before it is read.
            server.enqueue(replies(i))
            served = server.serving_seconds
            started = time.perf_counter()
            async with session.post(url, data=body, headers=headers) as response:
                async for _ in response.content.iter_any():
                    pass
            wall = time.perf_counter() - started
            if i >= 5:
                gaps.append(wall - (server.serving_seconds - served))
    return statistics.median(gaps)
