"""What a provider's response body carried, and reading the rest of it.

``Received`` keeps the status, the content type and the size of a response (never its bytes) so
that a protocol error can say what came (``describe``). ``read_whole`` reads a complete
(non-streamed) answer; ``read_to_end`` drains what follows a stream's terminal event. Both read
an aiohttp response's ``content``, whose ``readany()`` answers ``b""`` at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import aiohttp

__all__ = ["MAX_ANSWER_BYTES", "Received", "read_to_end", "read_whole"]

MAX_ANSWER_BYTES = 64 * 1024 * 1024
"""A complete answer is bounded by the model's output tokens; this only stops a runaway body."""

# After the terminal event: how long, and how many bytes, to wait for the end of the body.
_END_OF_BODY_SECONDS = 0.05
_END_OF_BODY_BYTES = 64 * 1024


@dataclass
class Received:
    """What a response carried, for a protocol error to say."""

    status: int
    content_type: str | None
    size: int = 0

    @property
    def is_json(self) -> bool:
        media = (self.content_type or "").split(";", 1)[0].strip().lower()
        return media == "application/json" or media.endswith("+json")

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)

    def describe(self) -> str:
        # Never the bytes themselves: whatever answered at base_url may be no model provider
        # (a database port, a metadata service), and its answer is not the caller's to read
        # (``docs/security.md``, "Outbound requests").
        return (
            f"received HTTP {self.status}, content type {self.content_type or 'none'}, "
            f"{self.size} bytes"
        )


async def read_whole(
    stream: aiohttp.StreamReader, first: bytes, received: Received
) -> bytes | None:
    """The body from ``first`` on (``None``: it passed ``MAX_ANSWER_BYTES``)."""
    body = bytearray()
    chunk = first
    while chunk:
        received.add(chunk)
        body += chunk
        if len(body) > MAX_ANSWER_BYTES:
            return None
        chunk = await stream.readany()
    return bytes(body)


async def read_to_end(stream: aiohttp.StreamReader) -> None:
    """Read what follows the terminal event (normally only the end of the chunked body, sent
    with it). A response closed before its end cannot go back to the connection pool: every
    model call would then open a new connection, TLS handshake included. A server that keeps
    the stream open (or keeps sending) only costs this short wait: the response is then closed
    and its connection dropped, as before."""
    if stream.at_eof():
        return  # the end came with the terminal event: nothing to wait for
    received = 0
    with contextlib.suppress(TimeoutError, aiohttp.ClientError):
        async with asyncio.timeout(_END_OF_BODY_SECONDS):
            while chunk := await stream.readany():
                received += len(chunk)
                if received > _END_OF_BODY_BYTES:
                    return
