"""The loopback fake provider (``tests.providers.fakes.FakeProviderServer``) in a child process.

A benchmark of the service must not share the service's CPU with the provider: in the same
process the fake server's thread holds the GIL while it writes a reply, and the service cannot
read the first bytes until it is done. A real provider runs elsewhere; so does this one. The
parent scripts it over a pipe (replies are plain dataclasses) and reads its serving time.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any

from tests.providers.fakes import FakeProviderServer, Reply

__all__ = ["ProviderProcess"]


def _serve(commands: Connection, latency: float) -> None:
    with FakeProviderServer(latency=latency) as server:
        commands.send(server.port)
        while True:
            command, replies = commands.recv()
            if command == "enqueue":
                server.enqueue(*replies)
                commands.send(None)
            elif command == "serving_seconds":
                commands.send(server.serving_seconds)
            else:  # stop
                commands.send(None)
                return


class ProviderProcess:
    """``enqueue``, ``base_url`` and ``serving_seconds`` of a ``FakeProviderServer``."""

    def __init__(self, *, latency: float) -> None:
        self._latency = latency
        self._commands: Connection | None = None
        self._process: Any = None
        self.port = 0

    def __enter__(self) -> ProviderProcess:
        context = multiprocessing.get_context("spawn")  # nothing of this process is inherited
        self._commands, theirs = context.Pipe()
        self._process = context.Process(target=_serve, args=(theirs, self._latency), daemon=True)
        self._process.start()
        self.port = self._commands.recv()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._call("stop")
        self._process.join(timeout=10)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def enqueue(self, *replies: Reply) -> None:
        self._call("enqueue", list(replies))

    @property
    def serving_seconds(self) -> float:
        """The server's time on requests so far (see ``FakeProviderServer.serving_seconds``)."""
        return float(self._call("serving_seconds"))

    def _call(self, command: str, payload: Any = None) -> Any:
        assert self._commands is not None, "use ProviderProcess in a with block"
        self._commands.send((command, payload))
        return self._commands.recv()
