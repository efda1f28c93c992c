"""The floor of a proxy of the drop-in endpoints' shape, for ``bench/proxy.py --floor``: a bare
ASGI app under the same uvicorn that reads the caller's Anthropic Messages body, decodes it with
the service's codec (``app.api.compat.anthropic_messages``, its decoded-prefix memo included),
re-encodes it as JSON (the model name swapped for the provider's) and forwards it to the provider
over one keep-alive ``httpx`` client, passing the answer's bytes back as they come. No session, no
database, no prepare: what any proxy that reads and rewrites the body pays on top of the direct
call. The provider's URL is ``BENCH_PASSTHROUGH_PROVIDER``."""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

from app.api.compat.anthropic_messages import CODEC
from app.fastjson import loads

PROVIDER = os.environ.get("BENCH_PASSTHROUGH_PROVIDER", "")
MODEL = "claude-fake"
_client: httpx.AsyncClient | None = None


async def _body(receive: Any) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    global _client
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        if _client is not None:
            await _client.aclose()
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["path"] == "/readyz":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
        return
    if _client is None:
        _client = httpx.AsyncClient(base_url=PROVIDER, timeout=120)
    body = loads(await _body(receive))
    CODEC.decode(body)  # what the service reads of it
    forwarded = json.dumps({**body, "model": MODEL}, ensure_ascii=False).encode()
    request = _client.build_request(
        "POST",
        "/v1/messages",
        content=forwarded,
        headers={"content-type": "application/json", "x-api-key": "bench"},
    )
    response = await _client.send(request, stream=True)
    try:
        headers = [(b"content-type", response.headers["content-type"].encode())]
        await send(
            {"type": "http.response.start", "status": response.status_code, "headers": headers}
        )
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        await response.aclose()
