"""Checks of the raw request before the app reads it: body size (413 ``request_too_large``), a
body that is not JSON by its content type (415 ``unsupported_media_type``) and text that no
store can keep (422 ``invalid_request``)."""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.problems import problem_response

__all__ = ["RequestGuard", "unstorable_text"]

# U+0000 and unpaired UTF-16 surrogates are valid JSON (``"\u0000"``, ``"\ud800"``) and valid
# Python strings, so schemas let them through; then PostgreSQL refuses NUL in ``text`` and
# ``jsonb`` columns, and a lone surrogate cannot be encoded as UTF-8 (token counting, SQLite,
# every response). In a JSON body they can only arrive as ``\u`` escapes (a raw control
# character or invalid UTF-8 fails JSON decoding anyway), so scanning the escapes is enough.
#
# An escape names NUL, a high surrogate (with the low one that pairs it, if any) or a low
# surrogate. The pattern starts with its literal ``\u``, which ``re`` looks for with a fast
# scan; whether that backslash starts an escape (it follows an even run of backslashes) is
# checked per match. A pattern starting with the run (a lookbehind) is tried at every position
# instead: 48 ms over a 1.9 MB body holding a single ``\u001b``.
_ESCAPE = re.compile(
    rb"\\u(0000|d[89ab][0-9a-f]{2}(?:\\ud[c-f][0-9a-f]{2})?|d[c-f][0-9a-f]{2})",
    re.IGNORECASE,
)
_PAIR_LENGTH = len(b"d800\\udc00")
_BACKSLASH = ord("\\")


def _escaped(body: bytes, index: int) -> bool:
    """Whether the backslash at ``index`` is itself escaped (an odd run of them before it)."""
    before = index
    while before and body[before - 1] == _BACKSLASH:
        before -= 1
    return (index - before) % 2 == 1


def unstorable_text(body: bytes) -> str | None:
    """What makes a JSON ``body`` unstorable (``None``: nothing)."""
    match = _ESCAPE.search(body)
    while match is not None:
        if _escaped(body, match.start()):  # text: a backslash, then "u…"
            match = _ESCAPE.search(body, match.start() + 1)
            continue
        escape = match.group(1)
        if escape == b"0000":
            return "U+0000 (NUL)"
        if len(escape) != _PAIR_LENGTH:
            return f"an unpaired UTF-16 surrogate (\\u{escape.decode()})"
        match = _ESCAPE.search(body, match.end())
    return None


def _not_json(scope: Scope) -> str | None:
    """What a body that is not declared as JSON is declared as (``None``: it is JSON).

    Every body the API takes is JSON (``application/json`` or ``application/*+json``)."""
    for name, value in scope.get("headers", []):
        if name == b"content-type":
            media_type = value.split(b";", 1)[0].strip().lower().decode("latin-1")
            if media_type == "application/json" or (
                media_type.startswith("application/") and media_type.endswith("+json")
            ):
                return None
            return media_type or "an empty media type"
    return "nothing (no Content-Type)"


def _nul_in_target(scope: Scope) -> bool:
    # ``path`` is already percent-decoded; the query string is raw.
    return "\x00" in scope.get("path", "") or b"%00" in scope.get("query_string", b"")


class RequestGuard:
    """Pure ASGI middleware: reads the body whole before the app runs (every endpoint reads its
    JSON body whole anyway), refusing it by ``Content-Length`` up front or once the stream
    passes ``max_bytes``, and refusing unstorable text in it, the path or the query. The app
    then receives the body in one message."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if _nul_in_target(scope):
            await _unstorable(scope, receive, send, "U+0000 (NUL) in the path or query")
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._too_large(scope, receive, send)
                return
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: the app sees that
                pending = [message]
                break
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_bytes:
                await self._too_large(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                body = b"".join(chunks)
                media_type = _not_json(scope) if body else None
                if media_type is not None:
                    await _unsupported(scope, receive, send, media_type)
                    return
                found = unstorable_text(body)
                if found is not None:
                    await _unstorable(scope, receive, send, f"{found} in the request body")
                    return
                pending = [{"type": "http.request", "body": body, "more_body": False}]
                break

        async def replay() -> Message:
            return pending.pop() if pending else await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = (
            f"The request body exceeds {self.max_bytes} bytes (CTXSVC_MAX_BODY_BYTES); "
            "send less content per request."
        )
        await problem_response(413, "request_too_large", detail)(scope, receive, send)


async def _unsupported(scope: Scope, receive: Receive, send: Send, media_type: str) -> None:
    detail = (
        f"The request body must be JSON, sent with `Content-Type: application/json`; this one "
        f"is declared as {media_type}."
    )
    await problem_response(415, "unsupported_media_type", detail)(scope, receive, send)


async def _unstorable(scope: Scope, receive: Receive, send: Send, what: str) -> None:
    detail = f"The request holds {what}, which cannot be stored; remove or replace it."
    await problem_response(422, "invalid_request", detail)(scope, receive, send)
