"""Helpers shared by the tokenizer tests."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

ENCODING_NAMES = ("o200k_base", "cl100k_base")


class NetworkGuard:
    """Makes every way of opening a connection or resolving a name fail, and remembers tries."""

    def __init__(self) -> None:
        self.attempts: list[str] = []

    def _refuse(self, what: str) -> Any:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            self.attempts.append(f"{what}{args!r}")
            raise OSError(f"network access attempted in a test: {what}{args!r}")

        return refuse

    def install(self, monkeypatch: pytest.MonkeyPatch) -> NetworkGuard:
        for attr in ("socket", "create_connection", "getaddrinfo"):
            monkeypatch.setattr(socket, attr, self._refuse(f"socket.{attr}"))
        return self


def write_baked(directory: Path, name: str, data: bytes) -> Path:
    path = directory / f"{name}.tiktoken"
    path.write_bytes(data)
    return path
