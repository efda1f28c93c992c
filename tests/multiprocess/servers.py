"""Real HTTP servers for tests: ``uvicorn`` processes on free loopback ports sharing one database
(multi-replica tests), an in-process ``uvicorn`` for streaming tests, and a small SSE reader."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

__all__ = ["SSEEvent", "ServerProcess", "free_port", "read_events", "serve_in_process"]

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServerProcess:
    """``python -m uvicorn app.main:app`` with ``CTXSVC_*`` settings from ``env``."""

    env: Mapping[str, str]
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> ServerProcess:
        env = {**os.environ, "CTXSVC_JSON_LOGS": "false", **self.env}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "app.main:app",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server on port {self.port} exited at start-up")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/healthz", timeout=1.0).status_code == 200:
                    return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"server on port {self.port} did not start in {timeout}s")

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to clean up (a crash)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


@contextlib.contextmanager
def server_processes(count: int, env: Mapping[str, str]) -> Iterator[list[ServerProcess]]:
    servers = [ServerProcess(env) for _ in range(count)]
    try:
        for server in servers:
            server.start()
        yield servers
    finally:
        for server in servers:
            server.stop()


@contextlib.asynccontextmanager
async def serve_in_process(app: FastAPI) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn on a free loopback port in this event loop; yields its URL
    (httpx's ASGI transport buffers whole responses, so streams need a real server)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    import asyncio

    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


@dataclass
class SSEEvent:
    id: int | None
    event: str
    data: dict[str, Any]


async def read_events(
    client: httpx.AsyncClient,
    url: str,
    *,
    until: str = "turn_finished",
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, Any] | None = None,
    limit: int | None = None,
    comments: list[str] | None = None,
) -> list[SSEEvent]:
    """Read one SSE connection until an event of type ``until`` (or ``limit`` events) arrives,
    then disconnect. Comment lines are appended to ``comments``."""
    import json

    events: list[SSEEvent] = []
    async with client.stream("GET", url, headers=headers, params=params) as response:
        assert response.status_code == 200, await response.aread()
        fields: dict[str, str] = {}
        async for line in response.aiter_lines():
            if line.startswith(":"):
                if comments is not None:
                    comments.append(line)
                continue
            if line:
                name, _, value = line.partition(":")
                fields[name] = value[1:] if value.startswith(" ") else value
                continue
            if not fields:
                continue
            event = SSEEvent(
                int(fields["id"]) if "id" in fields else None,
                fields.get("event", "message"),
                json.loads(fields.get("data", "{}")),
            )
            fields = {}
            events.append(event)
            if event.event == until or (limit is not None and len(events) >= limit):
                break
    return events
