"""Helpers of the client's tests: models registered with plain httpx (not the code under
test), a valid caller-written summary, and a proxy whose connections a test can cut."""

from __future__ import annotations

import contextlib
import socket
import threading
import uuid
from typing import Any

import httpx

from tests.servers import ServerProcess

__all__ = ["API_KEY", "VALID_SUMMARY", "CuttableProxy", "scripted", "tool_call"]

API_KEY = "client-test-key-3f9a7c21d84e4b0b"


def scripted(server: ServerProcess, script: list[dict[str, Any]], **capabilities: Any) -> str:
    """Register a ``scripted`` model under a fresh id (plain httpx: not the code under test)."""
    model_id = f"scripted-{uuid.uuid4().hex[:10]}"
    body: dict[str, Any] = {
        "context_window_tokens": 100_000,
        "max_output_tokens": 1000,
        "provider": {"kind": "scripted", "script": script},
        **capabilities,
    }
    response = httpx.put(f"{server.url}/v1/models/{model_id}", json=body, timeout=10)
    assert response.status_code == 201, response.text
    return model_id


def tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "input": arguments}


# A summary that passes spec §7.4 (nine headings, ≥ 500 characters), as a caller's model writes.
HEADINGS = [
    "1. Primary Request and Intent",
    "2. Key Technical Concepts",
    "3. Files and Code Sections",
    "4. Errors and Fixes",
    "5. Problem Solving and Decisions",
    "6. User Messages and Constraints",
    "7. Pending Tasks",
    "8. Current Work",
    "9. Next Safe Action",
]
VALID_SUMMARY = (
    '<conversation_summary format_version="1">\n'
    + "".join(
        f"## {h}\nThe user asked to list the files of the project and read them; noted.\n"
        for h in HEADINGS
    )
    + "</conversation_summary>"
)


class CuttableProxy:
    """A loopback TCP proxy to ``upstream``: ``cut()`` drops every open connection and refuses
    new ones (they are closed at once) until ``resume()``."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._refusing = False
        self.accepted = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._refusing:
                    client.close()
                    continue
                self.accepted += 1
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
                self._open += [client, upstream]
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(source, target), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            self._refusing = True
            sockets, self._open = self._open, []
        for sock in sockets:
            _close(sock)

    def resume(self) -> None:
        with self._lock:
            self._refusing = False

    def close(self) -> None:
        self.cut()
        self._listener.close()


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        _close(source)
        _close(target)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
