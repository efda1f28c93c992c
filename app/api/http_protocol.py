"""The HTTP/1.1 connection: a bounded request head, and problem+json for what the server
refuses before any route runs (spec §8).

uvicorn's httptools protocol (its default) reads request lines and headers of any size (four
64 MiB headers were buffered whole before the 401) and answers a request it cannot parse (a
malformed request line or header, a bad ``Content-Length``, NUL in a header) with a plain-text
400. ``BoundedHttpProtocol`` is that protocol with

- the request head (request line and headers) bounded by ``--h11-max-incomplete-event-size``,
  the knob uvicorn's h11 protocol bounds the same thing with; ``ctxsvc serve`` passes
  ``CTXSVC_MAX_HEADER_BYTES``. A longer head is answered 431 ``headers_too_large``: exactly
  past the limit once the head is complete (the URL, and each header's name and value plus 4
  bytes for ``": "`` and CRLF), at most two reads (2 × 256 KiB) past it while it is not;
- every refusal it sends in the one problem shape (``app.api.problems``): 400
  ``malformed_request`` for a request that is not HTTP/1.1.

Either answer closes the connection, as uvicorn's 400 does: the rest of what the client sends
is not read. Run the app with it through ``ctxsvc serve`` or
``uvicorn --http app.api.http_protocol:BoundedHttpProtocol``.
"""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

__all__ = ["DEFAULT_MAX_HEADER_BYTES", "BoundedHttpProtocol"]

DEFAULT_MAX_HEADER_BYTES = 64 * 1024


class _HeadTooLarge(Exception):
    """Raised from a parser callback to stop the parser (it reaches ``send_400_response``)."""


def _problem(status: int, *, code: str, detail: str) -> bytes:
    """A whole HTTP/1.1 response holding the problem, closing the connection."""
    body = json.dumps(
        {
            "type": f"https://ctxsvc.dev/problems/{code}",
            "title": HTTPStatus(status).phrase,
            "status": status,
            "detail": detail,
            "code": code,
        },
        separators=(",", ":"),
    ).encode()
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        "content-type: application/problem+json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class BoundedHttpProtocol(HttpToolsProtocol):
    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.max_head_bytes = config.h11_max_incomplete_event_size or DEFAULT_MAX_HEADER_BYTES
        # Bytes received while a head is incomplete (what the parser may be holding), and the
        # head's own bytes as the parser hands them over (exact, once the head is complete).
        self._in_head = True
        self._received_in_head = 0
        self._head_bytes = 0
        self._began_in_read = False
        self._too_large = False

    def data_received(self, data: bytes) -> None:
        self._began_in_read = False
        super().data_received(data)
        if not self._in_head or self.transport.is_closing():
            return
        # The read a head began in may also hold the end of the previous request's body: it is
        # not counted (a head that stays incomplete is refused one read later at most).
        if not self._began_in_read:
            self._received_in_head += len(data)
        if self._received_in_head > self.max_head_bytes:
            self._too_large = True
            self.send_400_response("")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._began_in_read = True
        self._received_in_head = 0
        self._head_bytes = 0

    def _count(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self.max_head_bytes:
            self._too_large = True
            raise _HeadTooLarge

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)  # "name: value\r\n", about
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def send_400_response(self, msg: str) -> None:
        if self._too_large:
            response = _problem(
                431,
                code="headers_too_large",
                detail=f"The request line and headers exceed {self.max_head_bytes} bytes "
                "(CTXSVC_MAX_HEADER_BYTES); send shorter ones.",
            )
        else:
            response = _problem(
                400,
                code="malformed_request",
                detail="The request is not valid HTTP/1.1 (its request line, a header or its "
                "Content-Length could not be read; a header may hold no NUL or control "
                "character).",
            )
        self.transport.write(response)
        self.transport.close()
