"""HTTP methods per path: ``Allow`` lists all of them, ``OPTIONS`` answers, ``HEAD`` works where
``GET`` does (RFC 9110 §9.3.2, §9.3.7, §15.5.6).

FastAPI registers one route per path and method, and Starlette's 405 names only the methods of
the first route whose path matched (``/v1/models/{id}`` said ``Allow: GET`` though PUT and DELETE
exist). The methods of a path are those of every route that matches it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from fastapi.routing import iter_route_contexts
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["MethodDispatch", "allowed_methods"]

_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(routes: Sequence[BaseRoute], scope: Scope) -> list[str]:
    """The methods the path of ``scope`` takes (``[]``: no route has that path)."""
    path = scope.get("path", "")
    found: set[str] = set()
    for route in iter_route_contexts(routes):  # included routers hold their routes
        methods, regex = route.methods, getattr(route, "path_regex", None)
        if methods and regex is not None and regex.match(path):
            found.update(methods)
    if not found:
        return []
    if "GET" in found:
        found.add("HEAD")
    found.add("OPTIONS")
    return sorted(found, key=lambda m: _ORDER.index(m) if m in _ORDER else len(_ORDER))


class MethodDispatch:
    """Pure ASGI middleware: answers ``OPTIONS`` for a known path (204 with ``Allow``) and runs a
    ``HEAD`` as the ``GET`` it stands for, sending its status and headers without the body."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("OPTIONS", "HEAD"):
            await self.app(scope, receive, send)
            return
        if scope["method"] == "OPTIONS":
            allowed = allowed_methods(self.routes, scope)
            if allowed:
                headers = [(b"allow", ", ".join(allowed).encode()), (b"content-length", b"0")]
                await send({"type": "http.response.start", "status": 204, "headers": headers})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            await self.app(scope, receive, send)  # no such path: the app's 404
            return
        await _head(self.app, scope, receive, send)


async def _head(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    # The GET runs as usual and its body is dropped (Content-Length stays the GET's, as HEAD
    # requires). A stream (Server-Sent Events) would never end: once the head is sent, the app
    # is told the client went away, which ends a stream as a real disconnect does.
    finished = asyncio.Event()
    first_receive = True

    async def head_receive() -> Message:
        nonlocal first_receive
        if first_receive:
            first_receive = False
            return await receive()
        await finished.wait()
        return {"type": "http.disconnect"}

    async def head_send(message: Message) -> None:
        if finished.is_set():
            return
        if message["type"] == "http.response.start":
            await send(message)
        elif message["type"] == "http.response.body":
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            finished.set()

    await app({**scope, "method": "GET"}, head_receive, head_send)
