"""Requests written byte by byte to a real server, for what no HTTP client will send: a body
cut short, an oversized head, a malformed line. Responses are read with h11."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any

import h11

__all__ = ["Answer", "exchange", "read_answer"]

TIMEOUT_SECONDS = 30.0  # a generous deadline: an answer that never comes fails, never flakes


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def read_answer(sock: socket.socket) -> Answer:
    """The first response on ``sock``, whatever was sent before it (the server may answer
    before the request is complete)."""
    reader = h11.Connection(h11.CLIENT)
    # h11 checks a response against the request it sent: give it one (nothing is sent).
    reader.send(h11.Request(method="GET", target="/", headers=[("host", "x")]))
    reader.send(h11.EndOfMessage())
    head: h11.Response | None = None
    body = b""
    while True:
        event = reader.next_event()
        if event is h11.NEED_DATA:
            reader.receive_data(sock.recv(65536))
        elif isinstance(event, h11.Response):
            head = event
        elif isinstance(event, h11.Data):
            body += bytes(event.data)
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            assert head is not None
            headers = {k.decode(): v.decode("latin-1") for k, v in head.headers}
            return Answer(head.status_code, headers, body)


def exchange(port: int, sent: bytes) -> Answer:
    """Send ``sent`` on a new connection and read the answer (the connection stays open for
    writing: a request left incomplete stays incomplete)."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_SECONDS) as sock:
        sock.sendall(sent)
        return read_answer(sock)
