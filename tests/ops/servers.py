"""Real server processes on loopback for the operations tests.

``running(...)`` starts one or more processes (``uvicorn`` or the ``ctxsvc`` console script) on
free 127.0.0.1 ports, waits until each answers its readiness path, and always stops them — also
when a test fails or a start-up goes wrong. Each process writes stdout and stderr to its own log
file (a pipe could fill up and block the server), which tests read after stopping it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

__all__ = [
    "CTXSVC_BIN",
    "PYTHON",
    "Server",
    "clean_env",
    "free_port",
    "running",
    "uvicorn_command",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
# The interpreter running the tests is the project's venv (scripts/test.sh); its console script
# sits beside it.
PYTHON = Path(sys.executable)
CTXSVC_BIN = PYTHON.parent / "ctxsvc"

START_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class Server:
    process: subprocess.Popen[bytes]
    base_url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


def free_port() -> int:
    """A port that was free a moment ago (the server binds it right after; the race is tiny)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def clean_env(**settings: str) -> dict[str, str]:
    """The test's environment without any ``CTXSVC_*`` variable, plus ``settings``.

    A developer's own ``CTXSVC_*`` variables must not leak into a server under test.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXSVC_")}
    env.update(settings)
    return env


def uvicorn_command(port: int) -> list[str]:
    app = ["-m", "uvicorn", "app.main:app"]
    return [str(PYTHON), *app, "--host", "127.0.0.1", "--port", str(port)]


def _start(command: Sequence[str], env: Mapping[str, str], cwd: Path, log_path: Path) -> Server:
    port = int(command[command.index("--port") + 1])
    with log_path.open("wb") as log:  # the child keeps its own descriptor
        process = subprocess.Popen(
            list(command), env=dict(env), cwd=cwd, stdout=log, stderr=subprocess.STDOUT
        )
    return Server(process, f"http://127.0.0.1:{port}", log_path)


def _stop(server: Server) -> None:
    if server.process.poll() is None:
        server.process.terminate()  # SIGTERM: uvicorn shuts down gracefully (lifespan ends)
        try:
            server.process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()


def _wait_ready(servers: Sequence[Server], path: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    pending = list(servers)
    with httpx.Client(timeout=2.0) as client:
        while pending:
            server = pending[0]
            if server.process.poll() is not None:
                raise RuntimeError(
                    f"{server.base_url} exited with {server.process.returncode}:\n{server.log()}"
                )
            try:
                if client.get(server.base_url + path).status_code == 200:
                    pending.pop(0)
                    continue
            except httpx.TransportError:
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise TimeoutError(f"{server.base_url}{path} not ready:\n{server.log()}")
            time.sleep(0.1)


@contextmanager
def running(
    commands: Sequence[Sequence[str]],
    *,
    env: Mapping[str, str],
    cwd: Path,
    ready_path: str = "/readyz",
) -> Iterator[list[Server]]:
    """Start every command (each with ``--port P``), wait for ``ready_path``, stop them after."""
    with ExitStack() as stack:
        servers: list[Server] = []
        for index, command in enumerate(commands):
            server = _start(command, env, cwd, cwd / f"server-{index}.log")
            stack.callback(_stop, server)
            servers.append(server)
        _wait_ready(servers, ready_path)
        yield servers
