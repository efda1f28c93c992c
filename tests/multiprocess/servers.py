"""An in-process ``uvicorn`` for streaming tests, and a small SSE reader (server processes are
in ``tests/servers.py``)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

__all__ = ["SSEEvent", "read_events", "serve_in_process"]


@contextlib.asynccontextmanager
async def serve_in_process(app: FastAPI) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn on a free loopback port in this event loop; yields its URL
    (httpx's ASGI transport buffers whole responses, so streams need a real server)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    import asyncio

    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


@dataclass
class SSEEvent:
    id: int | None
    event: str
    data: dict[str, Any]


async def read_events(
    client: httpx.AsyncClient,
    url: str,
    *,
    until: str = "turn_finished",
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, Any] | None = None,
    limit: int | None = None,
    comments: list[str] | None = None,
    on_comment: Callable[[str], object] | None = None,
) -> list[SSEEvent]:
    """Read one SSE connection until an event of type ``until`` (or ``limit`` events) arrives,
    then disconnect. Comment lines are appended to ``comments`` and passed to ``on_comment``
    (the first, ``: connected``, says the stream is subscribed: wait for it, not for a while)."""
    import json

    events: list[SSEEvent] = []
    async with client.stream("GET", url, headers=headers, params=params) as response:
        assert response.status_code == 200, await response.aread()
        fields: dict[str, str] = {}
        async for line in response.aiter_lines():
            if line.startswith(":"):
                if comments is not None:
                    comments.append(line)
                if on_comment is not None:
                    on_comment(line)
                continue
            if line:
                name, _, value = line.partition(":")
                fields[name] = value[1:] if value.startswith(" ") else value
                continue
            if not fields:
                continue
            event = SSEEvent(
                int(fields["id"]) if "id" in fields else None,
                fields.get("event", "message"),
                json.loads(fields.get("data", "{}")),
            )
            fields = {}
            events.append(event)
            if event.event == until or (limit is not None and len(events) >= limit):
                break
    return events
