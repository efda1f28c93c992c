"""What ``POST /v1/prepare``'s body costs before the service does anything with it: minimal
FastAPI routes on the same uvicorn, beside the raw-bytes echo of ``bench/floor_app.py``
(``bench/floors_minimal_http.py`` measures them):

- ``POST /min/route``: a FastAPI route that reads the body and sends it back (the framework);
- ``POST /min/orjson``: the same, the body decoded with ``orjson.loads`` first;
- ``POST /min/orjson-both``: decoded with ``orjson.loads`` and the value encoded again;
- ``POST /min/wire``: decoded as the stateless prepare decodes it (``PrepareWire``: msgspec
  structs, then the core's items), the body sent back;
- ``GET /bench/cpu``, ``GET /readyz``: this process's CPU time; ready.
"""

from __future__ import annotations

import json
import time
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response

from app.api.inputs.prepare import PrepareInput

__all__ = ["app"]

inner = FastAPI()


@inner.post("/min/route")
async def route(request: Request) -> Response:
    return Response(await request.body(), media_type="application/json")


@inner.post("/min/orjson")
async def decoded(request: Request) -> Response:
    body = await request.body()
    orjson.loads(body)
    return Response(body, media_type="application/json")


@inner.post("/min/orjson-both")
async def both(request: Request) -> Response:
    return Response(orjson.dumps(orjson.loads(await request.body())), media_type="application/json")


@inner.post("/min/wire")
async def wire(request: Request) -> Response:
    body = await request.body()
    assert PrepareInput.decode(body) is not None
    return Response(body, media_type="application/json")


async def _reply(send: Any, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def app(scope: Any, receive: Any, send: Any) -> None:
    path = scope.get("path", "") if scope["type"] == "http" else ""
    if path == "/bench/raw-echo":
        chunks = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        await _reply(send, b"".join(chunks))
    elif path == "/bench/cpu":
        figures = {"cpu": time.process_time(), "rss": 0, "statements": 0, "transactions": 0}
        await _reply(send, json.dumps(figures).encode())
    elif path == "/readyz":
        await _reply(send, b"{}")
    else:
        await inner(scope, receive, send)
