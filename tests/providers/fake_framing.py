"""HTTP/1.1 framing of the fake provider (``tests.providers.fakes``): reading one request from
a connection, and the status line and headers of a reply."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

__all__ = ["RecordedRequest", "read_request", "reply_head"]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes
    arrived_at: float = 0.0  # ``time.perf_counter()`` when its first line had arrived

    def json(self) -> Any:
        return json.loads(self.body)


def reply_head(status: int, headers: Mapping[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {_reason(status)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n").encode("latin-1")


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Overloaded" if status == 529 else "Unknown"


async def read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    try:
        first = await reader.readline()
        arrived_at = time.perf_counter()
        head = first + await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None  # the client closed the (idle) connection
    lines = head.decode("latin-1").split("\r\n")
    method, path, _version = lines[0].split(" ", 2)
    headers = _header_map(line for line in lines[1:] if line)
    length = int(headers.get("content-length", "0"))
    body = await reader.readexactly(length) if length else b""
    return RecordedRequest(method, path, headers, body, arrived_at)


def _header_map(lines: Iterable[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return headers
