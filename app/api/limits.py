"""Checks of the raw request before the app reads it: body size (413 ``request_too_large``), a
body that is not JSON by its content type (415 ``unsupported_media_type``), a body that is not
UTF-8 (400 ``malformed_json``) and text that no store can keep (422 ``invalid_request``)."""

from __future__ import annotations

import codecs
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.problems import problem_response

__all__ = ["RequestGuard", "not_utf8", "unstorable_text"]

# U+0000 and unpaired UTF-16 surrogates are valid JSON (``"\u0000"``, ``"\ud800"``) and valid
# Python strings, so schemas let them through; then PostgreSQL refuses NUL in ``text`` and
# ``jsonb`` columns, and a lone surrogate cannot be encoded as UTF-8 (token counting, SQLite,
# every response). In a JSON body they can only arrive as ``\u`` escapes (a raw control
# character fails JSON decoding, a body that is not UTF-8 is refused first: ``not_utf8``), so
# scanning the escapes is enough.
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


# Byte order marks of the encodings JSON readers guess from the first bytes (Python's
# ``json.loads`` of bytes among them), UTF-32 before UTF-16 (``FF FE 00 00`` starts with
# ``FF FE``). A UTF-8 one is UTF-8 and is read as before (RFC 8259 §8.1: a reader may ignore it).
_FOREIGN_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def not_utf8(body: bytes) -> str | None:
    """Why ``body`` is not JSON text in UTF-8 (``None``: it is), decided once for every reader.

    JSON on the wire is UTF-8 (RFC 8259 §8.1). The readers behind this check would
    guess otherwise: the standard reader decodes UTF-16 and UTF-32 bodies and UTF-8-encoded
    surrogates (``ED A0 80``) without complaint, which let U+0000 and lone surrogates past the
    escape scan (``unstorable_text``), which reads UTF-8 escapes. A NUL byte is never part of
    JSON text (not in a string, not as white space), while UTF-16 and UTF-32 text without a
    byte order mark has one beside every ASCII character: refusing it refuses them."""
    for bom, encoding in _FOREIGN_BOMS:
        if body.startswith(bom):
            return f"is {encoding} (it starts with a {encoding} byte order mark)"
    nul = body.find(b"\x00")
    if nul != -1:
        return f"holds a NUL byte (byte {nul}): it is not UTF-8 (UTF-16 or UTF-32 perhaps)"
    if body.isascii():
        return None
    try:
        body.decode("utf-8")  # strict: no encoded surrogates, no overlong forms
    except UnicodeDecodeError as exc:
        return f"is not UTF-8 (byte {exc.start})"
    return None


def _not_json(scope: Scope) -> str | None:
    """What a body that is not declared as JSON is declared as (``None``: it is JSON).

    Every body the API takes is JSON (``application/json`` or ``application/*+json``) in UTF-8:
    a ``charset`` parameter naming another encoding is refused too."""
    for name, value in scope.get("headers", []):
        if name == b"content-type":
            media_type, *parameters = value.decode("latin-1").lower().split(";")
            media_type = media_type.strip()
            if not (
                media_type == "application/json"
                or (media_type.startswith("application/") and media_type.endswith("+json"))
            ):
                return media_type or "an empty media type"
            for parameter in parameters:
                key, _, charset = parameter.partition("=")
                charset = charset.strip().strip('"')
                if key.strip() == "charset" and charset not in ("utf-8", "utf8"):
                    return f"{media_type} in {charset} (JSON is UTF-8)"
            return None
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
                encoding = not_utf8(body)
                if encoding is not None:
                    await _not_utf8(scope, receive, send, encoding)
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


async def _not_utf8(scope: Scope, receive: Receive, send: Send, why: str) -> None:
    detail = f"The request body {why}; send JSON encoded as UTF-8."
    await problem_response(400, "malformed_json", detail)(scope, receive, send)


async def _unstorable(scope: Scope, receive: Receive, send: Send, what: str) -> None:
    detail = f"The request holds {what}, which cannot be stored; remove or replace it."
    await problem_response(422, "invalid_request", detail)(scope, receive, send)
